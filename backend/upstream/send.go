package upstream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Call is one request to a server: Method on the server's base URL and
// Path, as both adapters send theirs.
type Call struct {
	Method string
	URL    string // the candidate's base URL (http://127.0.0.1:11434, .../v1)
	Path   string // below URL: /api/chat, /chat/completions, /models
	APIKey string // sent as a bearer token when set
	Body   []byte // a JSON body; nil sends none
	Accept string // the media type the answer is asked in
}

// Send sends c to its server and returns the answer once its headers
// arrived; the caller closes its body, and a body read to its end gives
// its connection back for the next request. A plain-HTTP server is spoken
// to by the pool's own client of its host (h1), any other through
// net/http's, where a request with a body is Replayable.
//
// Only a 2xx status is an answer: the servers Switchyard speaks to answer
// 200 (a stream or one object) or an error status, and anything else is
// one of those errors in another form. A redirect is never followed (it
// would turn a POST into a GET, or carry the prompt to another host, and a
// configured candidate means neither), so a 3xx, like a 4xx, a 5xx or a
// final 1xx, is a *fleet.StatusError (StatusError, with Ollama's "server
// busy" 503 marked Busy), its body read and closed. A transport failure
// is a *url.Error, which names the method and the URL, as net/http's
// client returns it.
func (p *Pool) Send(ctx context.Context, c Call) (*http.Response, error) {
	var resp *http.Response
	var err error
	if h := p.h1(c.URL); h != nil {
		resp, err = h.send(ctx, c)
	} else {
		resp, err = p.sendHTTP(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		se := StatusError(resp, OllamaBusy)
		resp.Body.Close()
		return nil, se
	}
	return resp, nil
}

// target is c's URL: its server's base URL and its path.
func (c Call) target() string { return strings.TrimRight(c.URL, "/") + c.Path }

// sendHTTP sends c through net/http's client of its host.
func (p *Pool) sendHTTP(ctx context.Context, c Call) (*http.Response, error) {
	url := c.target()
	var body io.Reader
	if c.Body != nil {
		body = bytes.NewReader(c.Body)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, url, body)
	if err != nil {
		return nil, fmt.Errorf("build request %s: %w", url, err)
	}
	if c.Body != nil {
		req.Header.Set("Content-Type", "application/json")
		Replayable(req)
	}
	if c.Accept != "" {
		req.Header.Set("Accept", c.Accept)
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	// Copying the pool's client keeps its shared transport and connections.
	hc := *p.Client(c.URL)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return hc.Do(req)
}
