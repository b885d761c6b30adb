package upstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Direct sends a request to a candidate's server outside routing: model
// details, resident models, and the requests Switchyard passes through
// unchanged (docs/API.md, "Pass-through"). It is safe for concurrent use.
type Direct struct {
	Pool *Pool
}

// URL is the address of path on c's server. path is as a caller of
// Switchyard names it: "/api/..." below an Ollama server's root, "/v1/..."
// below the root of an OpenAI-compatible server whose base URL ends in /v1
// (or below an Ollama server's root, which serves /v1 too).
func URL(c fleet.Candidate, path string) string {
	base := strings.TrimRight(c.URL, "/")
	if c.Provider == fleet.ProviderOpenAI && strings.HasSuffix(base, "/v1") {
		if rest, ok := strings.CutPrefix(path, "/v1"); ok {
			return base + rest
		}
		return strings.TrimSuffix(base, "/v1") + path
	}
	return base + path
}

// Do sends method path (see URL) with body and header to c's server, with
// c's API key, and returns the answer, whatever its status. Redirects are
// not followed.
func (d Direct) Do(ctx context.Context, c fleet.Candidate, method, path string, header http.Header, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, URL(c, path), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Del("Authorization") // the caller's key is Switchyard's, not the server's
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := *d.Pool.Client(c.URL)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return hc.Do(req)
}
