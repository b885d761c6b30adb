package simfleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	tests := []struct {
		in   string
		want Fault
		name string // String of the result
	}{
		{"", Fault{Kind: FaultHealthy}, "healthy"},
		{"healthy", Fault{Kind: FaultHealthy}, "healthy"},
		{"refuse", Fault{Kind: FaultRefuse}, "refuse"},
		{"status", Fault{Kind: FaultStatus, Status: 500}, "status:500"},
		{"status:503", Fault{Kind: FaultStatus, Status: 503}, "status:503"},
		{"busy", Fault{Kind: FaultBusy, RetryAfter: time.Second}, "busy"},
		{"busy:1s", Fault{Kind: FaultBusy, RetryAfter: time.Second}, "busy"},
		{"slow", Fault{Kind: FaultSlow, Gap: time.Second}, "slow"},
		{"busy:3", Fault{Kind: FaultBusy, RetryAfter: 3 * time.Second}, "busy:3s"},
		{"busy:1500ms", Fault{Kind: FaultBusy, RetryAfter: 1500 * time.Millisecond}, "busy:1.5s"},
		{"die_after:3", Fault{Kind: FaultDieAfter, AfterTokens: 3}, "die_after:3"},
		{"die_after", Fault{Kind: FaultDieAfter}, "die_after:0"},
		{"slow:250ms", Fault{Kind: FaultSlow, Gap: 250 * time.Millisecond}, "slow:250ms"},
		{" hang_first_token ", Fault{Kind: FaultHangFirstToken}, "hang_first_token"},
	}
	for _, tt := range tests {
		got, err := ParseFault(tt.in)
		if err != nil || got != tt.want || got.String() != tt.name {
			t.Errorf("ParseFault(%q) = %+v (%q), %v; want %+v (%q)", tt.in, got, got.String(), err, tt.want, tt.name)
		}
	}
	for _, bad := range []string{"nope", "status:200", "status:abc", "refuse:1", "die_after:-1", "slow:fast", "busy:-1s"} {
		if f, err := ParseFault(bad); err == nil {
			t.Errorf("ParseFault(%q) = %+v, nil; want an error", bad, f)
		}
	}
	// Every kind round-trips through its name, and through JSON as text.
	for _, k := range FaultKinds() {
		f, err := ParseFault(string(k))
		if err != nil {
			t.Fatalf("ParseFault(%q) = %v", k, err)
		}
		back, err := ParseFault(f.String())
		if err != nil || back != f {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", f.String(), back, err, f)
		}
		b, err := json.Marshal(map[string]Fault{"fault": f})
		if err != nil {
			t.Fatal(err)
		}
		var decoded map[string]Fault
		if err := json.Unmarshal(b, &decoded); err != nil || decoded["fault"] != f {
			t.Errorf("JSON %s decodes to %+v, %v; want %+v", b, decoded, err, f)
		}
	}
	if (Fault{}).String() != "healthy" {
		t.Errorf("Fault{}.String() = %q; want healthy", Fault{}.String())
	}
}

func TestSetFault(t *testing.T) {
	s := start(t, protos[0].config("alpha"))
	if s.Fault() != (Fault{Kind: FaultHealthy}) {
		t.Errorf("Fault() of a new server = %+v; want healthy", s.Fault())
	}
	if err := s.SetFault(Fault{Kind: "bogus"}); err == nil {
		t.Error("SetFault(bogus) = nil; want an error")
	}
	if err := s.SetFault(Fault{Kind: FaultStatus, Status: 200}); err == nil {
		t.Error("SetFault(status 200) = nil; want an error")
	}
	if err := s.SetFault(Fault{Kind: FaultSlow}); err != nil || s.Fault() != (Fault{Kind: FaultSlow, Gap: DefaultSlowGap}) {
		t.Errorf("SetFault(slow) = %v, Fault() = %+v; want the default gap", err, s.Fault())
	}
	s.Close()
	if err := s.SetFault(Fault{}); !errors.Is(err, ErrClosed) {
		t.Errorf("SetFault after Close = %v; want ErrClosed", err)
	}
}

// setFault sets a named fault or fails the test.
func setFault(t *testing.T, s *Server, name string) {
	t.Helper()
	f, err := ParseFault(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetFault(f); err != nil {
		t.Fatalf("SetFault(%s) = %v", name, err)
	}
}

// faulted starts a fast server of p with the named fault.
func faulted(t *testing.T, p proto, fault string) *Server {
	t.Helper()
	s := start(t, p.config("alpha"))
	setFault(t, s, fault)
	return s
}

// faultCase is one streaming request to a fast server with a fault.
type faultCase struct {
	p      proto
	s      *Server
	test   context.Context // the test's, for waits
	ctx    context.Context // the request's; cancel ends it
	cancel context.CancelFunc
	c      *http.Client
}

// stream sends a streaming chat request and returns the response, whose
// headers arrived.
func (x faultCase) stream(t *testing.T) *http.Response {
	t.Helper()
	return mustPost(x.ctx, t, x.c, x.p, x.s, x.p.body(x.p.model, true, false))
}

// read sends a streaming chat request and reads its whole body; err says
// how the body ended.
func (x faultCase) read(t *testing.T) (events []string, err error) {
	t.Helper()
	raw, err := readAll(x.stream(t))
	return x.p.events(t, raw), err
}

// TestStreamFaults observes every fault of a streaming request at the byte
// level, in both protocols, with a plain HTTP client.
func TestStreamFaults(t *testing.T) {
	tests := []struct {
		fault string
		check func(t *testing.T, x faultCase)
	}{
		{"status:503", func(t *testing.T, x faultCase) {
			resp := x.stream(t)
			expectStatus(t, resp, 503)
			raw, _ := readAll(resp)
			if x.p.provider == "ollama" {
				if want := `{"error":"simulated HTTP 503 (server alpha)"}`; string(raw) != want {
					t.Errorf("body = %s; want %s", raw, want)
				}
			} else {
				var body struct {
					Error map[string]any `json:"error"`
				}
				if err := json.Unmarshal(raw, &body); err != nil || body.Error["message"] != "simulated HTTP 503 (server alpha)" ||
					body.Error["type"] == "" || body.Error["code"] != 503.0 {
					t.Errorf("body = %s; want {error:{message,type,code:503}}", raw)
				}
			}
			if st := x.s.Stats(); st != (Stats{Requests: 1, Completed: 1, Faulted: 1}) {
				t.Errorf("Stats() = %+v; want one faulted, completed request", st)
			}
		}},
		{"busy:2s", func(t *testing.T, x faultCase) {
			resp := x.stream(t)
			raw, _ := readAll(resp)
			if x.p.provider == "ollama" {
				want := `{"error":"server busy, please try again.  maximum pending requests exceeded"}`
				if resp.StatusCode != 503 || string(raw) != want {
					t.Errorf("answer = %d %s; want 503 %s", resp.StatusCode, raw, want)
				}
				return
			}
			if ra := resp.Header.Get("Retry-After"); resp.StatusCode != 429 || ra != "2" {
				t.Errorf("answer = %d, Retry-After %q; want 429 and 2", resp.StatusCode, ra)
			}
			if l := decode[oaLine](t, string(raw)); l.Error == nil || l.Error.Code != 429 || l.Error.Message == "" {
				t.Errorf("body = %s; want an error with code 429", raw)
			}
		}},
		{"hang_headers", func(t *testing.T, x faultCase) {
			// No headers until the client goes away, which the server
			// counts as a cancellation.
			done := make(chan error, 1)
			go func() {
				resp, err := post(x.ctx, t, x.c, x.p, x.s, x.p.body(x.p.model, true, false))
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			if err := x.s.WaitStats(x.test, func(st Stats) bool { return st.OpenStreams == 1 }); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				t.Fatalf("request returned (%v) while the server hangs", err)
			case <-time.After(absence):
			}
			x.cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("request error = %v; want context.Canceled", err)
			}
			waitCancelled(x.test, t, x.s)
		}},
		{"hang_first_token", func(t *testing.T, x faultCase) {
			resp := x.stream(t)
			expectStatus(t, resp, http.StatusOK)
			quiet(t, resp.Body, x.cancel)
			waitCancelled(x.test, t, x.s)
		}},
		{"role_then_stall", func(t *testing.T, x faultCase) {
			resp := x.stream(t)
			expectStatus(t, resp, http.StatusOK)
			r := bufio.NewReader(resp.Body)
			ev, err := x.p.nextEvent(r)
			if err != nil {
				t.Fatal(err)
			}
			if got := x.p.collect(t, []string{ev}); got.tokens != 0 || got.finished {
				t.Errorf("first event %s carries a token or an end", ev)
			}
			if x.p.provider == "ollama" {
				if l := decode[ollamaLine](t, ev); l.Message.Role != "assistant" || l.Done {
					t.Errorf("first line = %s; want an empty assistant line", ev)
				}
			} else if l := decode[oaLine](t, ev); l.Choices[0].Delta["role"] != "assistant" {
				t.Errorf("first event = %s; want the role chunk", ev)
			}
			quiet(t, r, x.cancel)
			waitCancelled(x.test, t, x.s)
		}},
		{"close_before_first", func(t *testing.T, x faultCase) {
			resp := x.stream(t)
			expectStatus(t, resp, http.StatusOK)
			raw, err := readAll(resp)
			if len(raw) != 0 || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("body %q, err %v; want nothing and io.ErrUnexpectedEOF", raw, err)
			}
		}},
		{"empty", func(t *testing.T, x faultCase) {
			events, err := x.read(t)
			if err != nil {
				t.Fatal(err)
			}
			want := 1 // the done line
			if x.p.provider == "openai" {
				want = 4 // role, finish, usage, [DONE]
			}
			if got := x.p.collect(t, events); got.tokens != 0 || !got.finished || len(events) != want {
				t.Errorf("events %q; want %d, no token, finished", events, want)
			}
		}},
		{"error_event", func(t *testing.T, x faultCase) {
			events, err := x.read(t)
			if err != nil {
				t.Fatal(err)
			}
			if x.p.provider == "ollama" {
				if len(events) != 1 || events[0] != `{"error":"simulated error before the first token (server alpha)"}` {
					t.Errorf("lines = %q; want one {\"error\":...} line", events)
				}
				return
			}
			if len(events) != 2 || events[1] != "[DONE]" {
				t.Fatalf("events = %q; want the error event and [DONE]", events)
			}
			if l := decode[oaLine](t, events[0]); l.Error == nil || l.Error.Message == "" || l.Error.Code != 500 || l.Error.Type == "" {
				t.Errorf("error event = %s; want {error:{message,type,code}}", events[0])
			}
		}},
		{"die_after:3", func(t *testing.T, x faultCase) {
			events, err := x.read(t)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("body ended with %v; want io.ErrUnexpectedEOF", err)
			}
			got := x.p.collect(t, events)
			want := strings.Join(x.s.AnswerTokens(x.p.model)[:3], "")
			if got.tokens != 3 || got.content != want || got.finished {
				t.Errorf("stream = %+v; want 3 tokens %q, unfinished", got, want)
			}
		}},
		{"truncated", func(t *testing.T, x faultCase) {
			events, err := x.read(t)
			if err != nil {
				t.Fatalf("body ended with %v; want a clean end", err)
			}
			if got := x.p.collect(t, events); got.content != x.s.Answer(x.p.model) || got.finished {
				t.Errorf("stream = %+v; want the whole answer, unfinished", got)
			}
			for _, ev := range events {
				for _, marker := range []string{"[DONE]", `"finish_reason":"`, `"done":true`} {
					if strings.Contains(ev, marker) {
						t.Errorf("truncated stream has %s in %s", marker, ev)
					}
				}
			}
		}},
		{"malformed", func(t *testing.T, x faultCase) {
			events, err := x.read(t)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for _, ev := range events {
				if !json.Valid([]byte(ev)) {
					bad++
				}
			}
			if bad != 1 {
				t.Errorf("%d events are not JSON in %q; want 1", bad, events)
			}
		}},
		{"slow:10ms", func(t *testing.T, x faultCase) {
			began := time.Now()
			events, err := x.read(t)
			if err != nil {
				t.Fatal(err)
			}
			if got := x.p.collect(t, events); got.content != x.s.Answer(x.p.model) || !got.finished {
				t.Errorf("stream = %+v; want the whole answer", got)
			}
			if elapsed, least := time.Since(began), 5*10*time.Millisecond; elapsed < least {
				t.Errorf("stream took %v; want at least %v (5 gaps)", elapsed, least)
			}
		}},
	}
	for _, tt := range tests {
		for _, p := range protos {
			t.Run(tt.fault+"/"+p.name, func(t *testing.T) {
				test := testContext(t)
				ctx, cancel := context.WithCancel(test)
				defer cancel()
				tt.check(t, faultCase{p: p, s: faulted(t, p, tt.fault), test: test, ctx: ctx, cancel: cancel, c: client(t)})
			})
		}
	}
}

// refuse: connections are refused; a healthy fault listens again on the
// same port.
func TestFaultRefuse(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			ctx := testContext(t)
			s := start(t, p.config("alpha"))
			c := client(t)
			// A kept-alive connection from before does not survive either.
			resp := mustPost(ctx, t, c, p, s, p.body(p.model, true, false))
			if _, err := readAll(resp); err != nil {
				t.Fatal(err)
			}
			url := s.URL()
			setFault(t, s, "refuse")
			if _, err := post(ctx, t, client(t), p, s, p.body(p.model, true, false)); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("new connection: err = %v; want ECONNREFUSED", err)
			}
			if resp, err := post(ctx, t, c, p, s, p.body(p.model, true, false)); err == nil {
				resp.Body.Close()
				t.Errorf("old client got HTTP %d; want an error", resp.StatusCode)
			}
			setFault(t, s, "healthy")
			if s.URL() != url {
				t.Errorf("URL() = %s after refuse; want %s", s.URL(), url)
			}
			resp = mustPost(ctx, t, c, p, s, p.body(p.model, true, false))
			raw, err := readAll(resp)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.collect(t, p.events(t, raw)); got.content != s.Answer(p.model) {
				t.Errorf("after healthy: content %q; want the answer", got.content)
			}
			if st := s.Stats(); st.Requests != 2 || st.Completed != 2 {
				t.Errorf("Stats() = %+v; want the 2 served requests only", st)
			}
		})
	}
}

// A fault applies to new requests: a stream in flight keeps going.
func TestFaultAppliesToNewRequests(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			ctx := testContext(t)
			s := start(t, p.config("alpha"))
			c := client(t)
			resp := mustPost(ctx, t, c, p, s, p.body(p.model, true, false))
			r := bufio.NewReader(resp.Body)
			if _, err := p.nextEvent(r); err != nil {
				t.Fatal(err)
			}
			setFault(t, s, "status:500")
			second := mustPost(ctx, t, c, p, s, p.body(p.model, true, false))
			expectStatus(t, second, 500)
			rest, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.collect(t, p.events(t, rest)); !got.finished {
				t.Errorf("the stream in flight did not finish: %q", rest)
			}
		})
	}
}

// Every fault also shapes a stream:false request sensibly.
func TestFaultsNonStream(t *testing.T) {
	for _, p := range protos {
		for _, tt := range []struct {
			fault  string
			status int  // 0: the request fails before a response
			valid  bool // the body is one complete JSON object
		}{
			{"error_event", 500, true},
			{"empty", 200, true},
			{"truncated", 200, false},
			{"malformed", 200, false},
			{"die_after:2", 200, false},
			{"close_before_first", 200, false},
		} {
			t.Run(p.name+"/"+tt.fault, func(t *testing.T) {
				ctx := testContext(t)
				s := faulted(t, p, tt.fault)
				resp := mustPost(ctx, t, client(t), p, s, p.body(p.model, false, false))
				expectStatus(t, resp, tt.status)
				raw, _ := readAll(resp)
				if json.Valid(raw) != tt.valid {
					t.Errorf("body %q: valid JSON = %v; want %v", raw, !tt.valid, tt.valid)
				}
				if err := s.WaitIdle(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// The error messages of status and error_event name the server, but not at
// their start before a colon: a router puts the candidate's name there, and
// compares the text up to the first colon of two servers' messages to tell
// a request's fault from a server's. Two servers failing alike still read
// as two.
func TestFaultMessagesNameTheServer(t *testing.T) {
	for _, p := range protos {
		for _, fault := range []string{"status:500", "error_event"} {
			t.Run(p.name+"/"+fault, func(t *testing.T) {
				ctx := testContext(t)
				heads := map[string]bool{}
				for _, name := range []string{"qwen3-8b", "llama3.2-3b"} {
					s := start(t, p.config(name))
					setFault(t, s, fault)
					resp := mustPost(ctx, t, client(t), p, s, p.body(p.model, false, false))
					expectStatus(t, resp, 500)
					raw, _ := readAll(resp)
					msg := errorMessage(t, p, raw)
					head, _, _ := strings.Cut(msg, ":")
					if !strings.HasPrefix(msg, "simulated ") || !strings.Contains(head, name) {
						t.Errorf("%s's message %q; want it to start with what happened and name the server before any colon", name, msg)
					}
					heads[head] = true
				}
				if len(heads) != 2 {
					t.Errorf("both servers' messages read %v up to their first colon; want them to differ", heads)
				}
			})
		}
	}
}

// errorMessage reads the message of an HTTP error body of p.
func errorMessage(t *testing.T, p proto, raw []byte) string {
	t.Helper()
	if p.provider == "ollama" {
		var body struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("error body %q: %v", raw, err)
		}
		return body.Error
	}
	l := decode[oaLine](t, string(raw))
	if l.Error == nil {
		t.Fatalf("error body %q has no error", raw)
	}
	return l.Error.Message
}
