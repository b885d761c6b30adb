package upstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkSend is one POST and its chunked answer read to the end, through
// the pool's own client and through net/http's.
func BenchmarkSend(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer ts.Close()
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	buf := make([]byte, 4<<10)
	for _, tt := range []struct {
		name string
		send func(p *Pool, c Call) (*http.Response, error)
	}{
		{"h1", func(p *Pool, c Call) (*http.Response, error) {
			return p.h1(c.URL).send(context.Background(), c)
		}},
		{"net-http", func(p *Pool, c Call) (*http.Response, error) {
			return p.sendHTTP(context.Background(), c)
		}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			p := NewPool(Settings{})
			defer p.CloseIdle()
			c := Call{Method: http.MethodPost, URL: ts.URL + "/v1", Path: "/chat/completions", Body: body, Accept: "text/event-stream"}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tt.send(p, c)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := resp.Body.Read(buf); err != nil {
						break
					}
				}
				resp.Body.Close()
			}
		})
	}
}
