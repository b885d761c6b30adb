package httpapi

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Requests in a row reuse one upstream connection: the adapter reads the
// body to its end after the answer's end marker. It used to close the body
// there, and net/http closed the connection with it: every request
// dialled a new one.
func TestUpstreamConnectionIsReused(t *testing.T) {
	cases := []struct {
		name, path, body, contentType, answer string
		cand                                  func(u *httptest.Server) fleet.Candidate
	}{{
		name: "openai stream", path: "/v1/chat/completions", contentType: "text/event-stream",
		body:   `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		answer: sse(lcRole, lcHello, lcStop, lcUsage),
		cand: func(u *httptest.Server) fleet.Candidate {
			return fleet.Candidate{ID: "tiny", Provider: fleet.ProviderOpenAI, URL: u.URL + "/v1", Model: "tiny", Priority: 1}
		},
	}, {
		name: "openai non-stream", path: "/v1/chat/completions", contentType: "text/event-stream",
		body:   `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`,
		answer: sse(lcRole, lcHello, lcStop, lcUsage),
		cand: func(u *httptest.Server) fleet.Candidate {
			return fleet.Candidate{ID: "tiny", Provider: fleet.ProviderOpenAI, URL: u.URL + "/v1", Model: "tiny", Priority: 1}
		},
	}, {
		name: "ollama", path: "/api/chat", contentType: "application/x-ndjson",
		body:   `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`,
		answer: olHello + "\n" + olDone + "\n",
		cand: func(u *httptest.Server) fleet.Candidate {
			return fleet.Candidate{ID: "tiny", Provider: fleet.ProviderOllama, URL: u.URL, Model: "tiny", Priority: 1}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var conns atomic.Int32
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.contentType)
				io.WriteString(w, tc.answer)
				// The end of the body a moment after the answer, as a
				// server that flushes each event sends it: the adapter
				// has seen the end marker by then.
				w.(http.Flusher).Flush()
				time.Sleep(2 * time.Millisecond)
			}))
			up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			up.Start()
			t.Cleanup(up.Close)
			api := fleetServer(t, tc.cand(up))
			for i := range 5 {
				w := do(api, "POST", tc.path, tc.body, nil)
				if w.Code != 200 || !strings.Contains(w.Body.String(), "Hello") {
					t.Fatalf("request %d: %d %s", i, w.Code, w.Body.String())
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("5 requests in a row opened %d upstream connections; want 1", n)
			}
		})
	}
}

// A server that never ends its body after [DONE] costs the answer
// finishWait at most, and its connection.
func TestUpstreamBodyThatNeverEnds(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sse(lcRole, lcHello, lcStop))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(up.Close)
	api := fleetServer(t, fleet.Candidate{ID: "tiny", Provider: fleet.ProviderOpenAI, URL: up.URL + "/v1", Model: "tiny", Priority: 1})
	start := time.Now()
	w := do(api, "POST", "/v1/chat/completions", `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if w.Code != 200 || !strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the answer took %v; want it to end soon after [DONE]", d)
	}
}
