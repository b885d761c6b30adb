package upstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchyard/switchyard/backend/realserver"
)

// countDials makes h count the connections it dials.
func countDials(h *h1) *atomic.Int32 {
	var n atomic.Int32
	dial := h.dial
	h.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return dial(ctx, network, addr)
	}
	return &n
}

// Against a real llama-server (FINDINGS.md §13), which closes the
// connection after every streamed answer, whatever its Keep-Alive header
// says, and after the hundredth answer on one connection: each request
// after such a close goes out on a new connection without failing, and
// 147 answers of /models take two.
func TestH1RealLlamaServer(t *testing.T) {
	s := realserver.Find(t).LlamaServer(t, realserver.LlamaOptions{})
	p := NewPool(Settings{})
	t.Cleanup(p.CloseIdle)
	dials := countDials(p.h1(s.URL))

	body := []byte(`{"model":"tiny","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`)
	for i := range 3 {
		resp, err := p.Send(context.Background(), Call{Method: http.MethodPost, URL: s.URL, Path: "/chat/completions", Body: body, Accept: "text/event-stream"})
		if err != nil {
			t.Fatalf("chat %d: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.Contains(string(b), "data: [DONE]") {
			t.Fatalf("chat %d: %v, %q; want a whole stream", i, err, b)
		}
	}
	if n := dials.Load(); n != 3 {
		t.Errorf("%d connections for 3 streamed answers; want 3 (llama-server closes each after its stream)", n)
	}

	for i := range 147 {
		resp, err := p.Send(context.Background(), Call{Method: http.MethodGet, URL: s.URL, Path: "/models", Accept: "application/json"})
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := dials.Load() - 3; n != 2 {
		t.Errorf("%d connections for 147 requests; want 2 (llama-server's max=100)", n)
	}
}
