package system

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ollamaapi "github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// harness is a running Switchyard in front of a fast simulated fleet of
// two servers: "fast-1" (primary, Ollama) and "fast-2" (OpenAI).
type harness struct {
	sys   *System
	fleet *simfleet.Fleet
	db    string
	stop  func()
}

const testFirstToken = 400 * time.Millisecond

func start(t *testing.T, extra string) *harness {
	t.Helper()
	f, err := simfleet.StartFast(2, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	head := fmt.Sprintf("selection:\n  failure_threshold: 100\n  first_token_timeout: %s\n  deadline_floor: 100ms\n  stall_timeout: 1s\n%s", testFirstToken, extra)
	cfgPath := fleetConfig(t, f, head, "fast-1", "supports_thinking: true")
	db := filepath.Join(filepath.Dir(cfgPath), "history.db")
	sys, err := New(t.Context(), Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: db, ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{sys: sys, fleet: f, db: db}
	h.stop = runSystem(t, sys)
	return h
}

// fleetConfig writes a config file whose candidates are f's servers, in
// its order, after head (YAML of the other sections), with each candidate
// line ending in extra (more flow-map keys, or ""). It returns its path, in
// a fresh temporary directory.
func fleetConfig(t *testing.T, f *simfleet.Fleet, head, defaultModel, extra string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%schat:\n  default_model: %s\n  candidates:\n", head, defaultModel)
	for _, c := range f.Candidates() {
		fmt.Fprintf(&b, "    - {id: %s, provider: %s, url: %q, model: %s, priority: %d", c.ID, c.Provider, c.URL, c.Model, c.Priority)
		if extra != "" {
			b.WriteString(", " + extra)
		}
		b.WriteString("}\n")
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runSystem runs sys until the test ends. The returned stop shuts it down
// and waits for Run; it is safe to call more than once.
func runSystem(t *testing.T, sys *System) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sys.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run() = %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (h *harness) openai() openai.Client {
	return openai.NewClient(option.WithBaseURL(h.sys.URL()+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func (h *harness) ollama(t *testing.T) *ollamaapi.Client {
	t.Helper()
	return ollamaapi.NewClient(mustURL(t, h.sys.URL()), http.DefaultClient)
}

// record reads a request's record back from the database file.
func (h *harness) record(t *testing.T, id string) fleet.RequestRecord {
	t.Helper()
	rec, err := h.sys.store.Request(t.Context(), id)
	if err != nil {
		t.Fatalf("history has no request %s: %v", id, err)
	}
	return rec
}

// faultCase is one row of the fault matrix: what the primary does, and
// what the caller and the history must see.
type faultCase struct {
	fault string
	// outcome of the primary's attempt.
	outcome fleet.Outcome
	// afterCommit: the fault strikes after the first token, so a stream
	// ends in an error (and a non-stream request falls back).
	afterCommit bool
	// servedByPrimary: the primary serves despite the fault.
	servedByPrimary bool
}

var faultMatrix = []faultCase{
	{fault: "healthy", outcome: fleet.OutcomeSuccess, servedByPrimary: true},
	{fault: "slow:5ms", outcome: fleet.OutcomeSuccess, servedByPrimary: true},
	{fault: "refuse", outcome: fleet.OutcomeError},
	{fault: "status:500", outcome: fleet.OutcomeError},
	{fault: "status:404", outcome: fleet.OutcomeError},
	{fault: "busy", outcome: fleet.OutcomeBusy},
	{fault: "hang_headers", outcome: fleet.OutcomeTimeout},
	{fault: "hang_first_token", outcome: fleet.OutcomeTimeout},
	{fault: "role_then_stall", outcome: fleet.OutcomeTimeout},
	{fault: "close_before_first", outcome: fleet.OutcomeError},
	{fault: "empty", outcome: fleet.OutcomeNoContent},
	{fault: "error_event", outcome: fleet.OutcomeError},
	{fault: "malformed", outcome: fleet.OutcomeError},
	{fault: "die_after:3", outcome: fleet.OutcomeFailedAfterCommit, afterCommit: true},
	{fault: "truncated", outcome: fleet.OutcomeFailedAfterCommit, afterCommit: true},
}

// TestFaultMatrix drives every fault of the simulated fleet through the
// real API with the official OpenAI and Ollama Go clients, streaming and
// not, and checks what the caller saw and what history recorded.
func TestFaultMatrix(t *testing.T) {
	for _, fc := range faultMatrix {
		t.Run(fc.fault, func(t *testing.T) {
			t.Parallel()
			for _, proto := range []string{"openai", "ollama"} {
				for _, stream := range []bool{true, false} {
					t.Run(fmt.Sprintf("%s stream=%v", proto, stream), func(t *testing.T) {
						h := start(t, "")
						fault, err := simfleet.ParseFault(fc.fault)
						if err != nil {
							t.Fatal(err)
						}
						h.fleet.SetFault("fast-1", fault)
						var got clientResult
						if proto == "openai" {
							got = h.askOpenAI(t, stream)
						} else {
							got = h.askOllama(t, stream)
						}
						h.check(t, fc, stream, got)
					})
				}
			}
		})
	}
}

// clientResult is what a client saw.
type clientResult struct {
	content   string
	err       error
	requestID string
	served    string
	fallback  string
}

func (h *harness) askOpenAI(t *testing.T, stream bool) clientResult {
	t.Helper()
	c := h.openai()
	params := openai.ChatCompletionNewParams{
		Model:    "auto",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	}
	var resp *http.Response
	var r clientResult
	if stream {
		s := c.Chat.Completions.NewStreaming(t.Context(), params, option.WithResponseInto(&resp))
		var b strings.Builder
		for s.Next() {
			for _, ch := range s.Current().Choices {
				b.WriteString(ch.Delta.Content)
			}
		}
		r.content, r.err = b.String(), s.Err()
	} else {
		out, err := c.Chat.Completions.New(t.Context(), params, option.WithResponseInto(&resp))
		r.err = err
		if err == nil && len(out.Choices) > 0 {
			r.content = out.Choices[0].Message.Content
		}
	}
	if resp != nil {
		r.requestID = resp.Header.Get("X-Switchyard-Request-Id")
		r.served = resp.Header.Get("X-Switchyard-Served-Model")
		r.fallback = resp.Header.Get("X-Switchyard-Fallback")
	}
	return r
}

func (h *harness) askOllama(t *testing.T, stream bool) clientResult {
	t.Helper()
	var r clientResult
	var b strings.Builder
	done := false
	err := h.ollama(t).Chat(t.Context(), &ollamaapi.ChatRequest{
		Model:    "auto",
		Messages: []ollamaapi.Message{{Role: "user", Content: "hello"}},
		Stream:   &stream,
	}, func(resp ollamaapi.ChatResponse) error {
		b.WriteString(resp.Message.Content)
		done = done || resp.Done
		return nil
	})
	r.content, r.err = b.String(), err
	if err == nil && !done {
		// The v0.17.4 client returns nil on a cut stream: completion is
		// judged by done:true.
		r.err = errors.New("stream ended without done:true")
	}
	// The Ollama client does not expose headers: find the request in history.
	recs, herr := h.sys.store.Requests(t.Context(), history.Filter{Limit: 1})
	if herr != nil || len(recs) == 0 {
		t.Fatalf("no request in history: %v", herr)
	}
	r.requestID, r.served = recs[0].ID, recs[0].ServedCandidate
	r.fallback = fmt.Sprint(recs[0].IsFallback)
	return r
}

func (h *harness) check(t *testing.T, fc faultCase, stream bool, got clientResult) {
	t.Helper()
	primary, secondary := h.fleet.Server("fast-1"), h.fleet.Server("fast-2")
	wantServer, wantFallback := secondary, "true"
	if fc.servedByPrimary || (fc.afterCommit && stream) {
		wantServer, wantFallback = primary, "false"
	}
	wantID := map[*simfleet.Server]string{primary: "fast-1", secondary: "fast-2"}[wantServer]
	full := wantServer.Answer(wantID)
	switch {
	case fc.afterCommit && stream:
		if got.err == nil {
			t.Errorf("stream error = nil; want the upstream failure after commit")
		}
		if got.content == "" || !strings.HasPrefix(full, got.content) {
			t.Errorf("content = %q; want a prefix of %q (no mixed output)", got.content, full)
		}
	default:
		if got.err != nil {
			t.Fatalf("client error = %v", got.err)
		}
		if got.content != full {
			t.Errorf("content = %q; want %q", got.content, full)
		}
	}
	if got.served != wantID || got.fallback != wantFallback {
		t.Errorf("served %q fallback %q; want %q %q", got.served, got.fallback, wantID, wantFallback)
	}
	if got.requestID == "" {
		t.Fatal("no request id")
	}
	rec := h.record(t, got.requestID)
	if rec.ServedCandidate != wantID || fmt.Sprint(rec.IsFallback) != wantFallback || rec.Stream != stream {
		t.Errorf("history: served %s fallback %v stream %v", rec.ServedCandidate, rec.IsFallback, rec.Stream)
	}
	if len(rec.Attempts) == 0 || rec.Attempts[0].Candidate != "fast-1" {
		t.Fatalf("history attempts = %+v; want fast-1 first", rec.Attempts)
	}
	wantOutcome := fc.outcome
	if fc.afterCommit && !stream {
		wantOutcome = fleet.OutcomeError // nothing reached the caller: an ordinary failure
	}
	if a := rec.Attempts[0]; a.Outcome != wantOutcome {
		t.Errorf("history: primary attempt %s (%s); want %s", a.Outcome, a.Error, wantOutcome)
	}
	wantStatus := fleet.StatusOK
	if fc.afterCommit && stream {
		wantStatus = fleet.StatusUpstreamErrorAfterCommit
	}
	if rec.Status != wantStatus {
		t.Errorf("history: status %s; want %s", rec.Status, wantStatus)
	}
	if wantStatus == fleet.StatusOK && rec.TTFT <= 0 {
		t.Errorf("history: ttft %v; want > 0", rec.TTFT)
	}
	if wantServer == secondary && rec.Attempts[len(rec.Attempts)-1].Outcome != fleet.OutcomeSuccess {
		t.Errorf("history: last attempt %+v; want the secondary's success", rec.Attempts[len(rec.Attempts)-1])
	}
	// Every abandoned upstream connection is closed.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := primary.WaitIdle(ctx); err != nil {
		t.Errorf("primary still has open streams: %+v", primary.Stats())
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
