package httpapi

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/upstream"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
	"github.com/switchyard/switchyard/backend/upstream/openai"
)

// flushCounter counts the flushes of a handler's answer.
type flushCounter struct {
	http.ResponseWriter
	n *atomic.Int32
}

func (f flushCounter) Flush() {
	f.n.Add(1)
	f.ResponseWriter.(http.Flusher).Flush()
}

func (f flushCounter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// A stream's chunks go out when the upstream's stream is about to wait:
// what the upstream sent in one write goes out in one, and nothing is held
// back while the upstream is silent. Each chunk used to be its own write
// and flush, twice the system calls of a bare proxy's copy on an answer
// whose tokens arrive together.
func TestStreamWritesBeforeTheUpstreamWaits(t *testing.T) {
	cases := []struct {
		name, path, body, contentType string
		first, rest                   []string // the upstream's two writes
		cand                          func(u *httptest.Server) fleet.Candidate
	}{{
		name: "openai", path: "/v1/chat/completions", contentType: "text/event-stream",
		body:  `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		first: []string{"data: " + lcRole + "\n\n", "data: " + lcHello + "\n\n", "data: " + lcHello + "\n\n", "data: " + lcHello + "\n\n"},
		rest:  []string{"data: " + lcHello + "\n\n", "data: " + lcStop + "\n\n", "data: " + lcUsage + "\n\n", "data: [DONE]\n\n"},
		cand: func(u *httptest.Server) fleet.Candidate {
			return fleet.Candidate{ID: "tiny", Provider: fleet.ProviderOpenAI, URL: u.URL + "/v1", Model: "tiny", Priority: 1}
		},
	}, {
		name: "ollama", path: "/api/chat", contentType: "application/x-ndjson",
		body:  `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`,
		first: []string{olHello + "\n", olHello + "\n", olHello + "\n"},
		rest:  []string{olHello + "\n", olDone + "\n"},
		cand: func(u *httptest.Server) fleet.Candidate {
			return fleet.Candidate{ID: "tiny", Provider: fleet.ProviderOllama, URL: u.URL, Model: "tiny", Priority: 1}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.contentType)
				io.WriteString(w, strings.Join(tc.first, ""))
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, strings.Join(tc.rest, ""))
			}))
			t.Cleanup(up.Close)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			api := fleetServer(t, tc.cand(up))
			var flushes atomic.Int32
			sw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Host = "127.0.0.1:8484"
				api.ServeHTTP(flushCounter{w, &flushes}, r)
			}))
			t.Cleanup(sw.Close)

			resp, err := http.Post(sw.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			// Every token the upstream sent arrives while it is silent.
			br := bufio.NewReader(resp.Body)
			got := 0
			for got < 3 {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("after %d tokens: %v", got, err)
				}
				got += strings.Count(line, "Hello")
			}
			if n := flushes.Load(); n != 1 {
				t.Errorf("%d flushes for the upstream's first write; want 1", n)
			}
			close(release)
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(rest), "Hello"); n != 1 {
				t.Errorf("%d tokens after the wait; want 1: %s", n, rest)
			}
			if n := flushes.Load(); n != 2 {
				t.Errorf("%d flushes for the upstream's two writes; want 2", n)
			}
		})
	}
}

// flushRecorder keeps what a handler wrote and what of it was flushed.
type flushRecorder struct {
	http.ResponseWriter
	written, flushed strings.Builder
	flushes          int
}

func (f *flushRecorder) Write(p []byte) (int, error) {
	f.written.Write(p)
	return f.ResponseWriter.Write(p)
}

func (f *flushRecorder) Flush() {
	f.flushes++
	f.flushed.Reset()
	f.flushed.WriteString(f.written.String())
	f.ResponseWriter.(http.Flusher).Flush()
}

func (f *flushRecorder) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// recordFunc is a router.Recorder that calls f with each record.
type recordFunc func(fleet.RequestRecord)

func (f recordFunc) Record(_ context.Context, rec fleet.RequestRecord) error {
	f(rec)
	return nil
}

// An answer whose events all come in one read reaches the caller before
// its record is written, and its end (held back until the record is
// durable) goes out with the body's terminator, unflushed: the tokens no
// longer wait for the history, and the end is one write, not two.
func TestStreamTokensGoOutBeforeTheRecord(t *testing.T) {
	cases := []struct {
		name, path, body, contentType, answer, end string
		cand                                       func(u *httptest.Server) fleet.Candidate
	}{{
		name: "openai", path: "/v1/chat/completions", contentType: "text/event-stream",
		body:   `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		answer: sse(lcRole, lcHello, lcHello, lcStop, lcUsage), end: "[DONE]",
		cand: func(u *httptest.Server) fleet.Candidate {
			return fleet.Candidate{ID: "tiny", Provider: fleet.ProviderOpenAI, URL: u.URL + "/v1", Model: "tiny", Priority: 1}
		},
	}, {
		name: "ollama", path: "/api/chat", contentType: "application/x-ndjson",
		body:   `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`,
		answer: olHello + "\n" + olHello + "\n" + olDone + "\n", end: `"done":true`,
		cand: func(u *httptest.Server) fleet.Candidate {
			return fleet.Candidate{ID: "tiny", Provider: fleet.ProviderOllama, URL: u.URL, Model: "tiny", Priority: 1}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The whole answer in one write, with a length: one read.
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.contentType)
				io.WriteString(w, tc.answer)
			}))
			t.Cleanup(up.Close)
			pool := upstream.NewPool(upstream.Settings{})
			t.Cleanup(pool.CloseIdle)
			var b fleet.Backend = openai.New(pool)
			c := tc.cand(up)
			c.Enabled = true
			if c.Provider == fleet.ProviderOllama {
				b = ollama.New(pool)
			}
			var fr *flushRecorder
			var atRecord string
			rec := recordFunc(func(fleet.RequestRecord) { atRecord = fr.flushed.String() })
			rt := router.New(router.Fleet{Targets: []router.Target{{Candidate: c, Backend: b}}, DefaultModel: c.ID}, router.Deps{Recorder: rec})
			api := New(Options{Router: rt, Upstreams: upstream.Direct{Pool: pool}, Listen: "127.0.0.1:8484"})
			sw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Host = "127.0.0.1:8484"
				fr = &flushRecorder{ResponseWriter: w}
				api.ServeHTTP(fr, r)
			}))
			t.Cleanup(sw.Close)

			resp, err := http.Post(sw.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, %v: %s", resp.StatusCode, err, got)
			}
			if n := strings.Count(atRecord, "Hello"); n != 2 {
				t.Errorf("when the record was written, the caller had been sent %d tokens; want 2: %q", n, atRecord)
			}
			if strings.Contains(atRecord, tc.end) {
				t.Errorf("the end went out before the record: %q", atRecord)
			}
			if !strings.Contains(string(got), tc.end) {
				t.Errorf("the answer has no end: %s", got)
			}
			if fr.flushes != 1 {
				t.Errorf("%d flushes; want 1, the tokens before the record (the end goes with the terminator)", fr.flushes)
			}
		})
	}
}
