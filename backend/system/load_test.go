package system

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// The load tests below run a Switchyard in front of a simulated fleet of
// their own, under more concurrency than the e2e tests, and check what
// every caller saw against what every upstream and the history recorded.
// They are sized for a 2-core machine under -race: fast pacing, loopback
// only, no raised limits.

// startOver runs a Switchyard over f, with selection as the YAML body of
// its selection section and defaultModel as chat.default_model. Every
// member is a candidate without GPUs (a real GPU's readings never demote
// one). The returned stop shuts it down and waits for Run; it is safe to
// call more than once and is also a cleanup of t.
func startOver(t *testing.T, f *simfleet.Fleet, selection, defaultModel string) (*System, func()) {
	t.Helper()
	cfgPath := fleetConfig(t, f, "selection:\n"+selection, defaultModel, "gpus: []")
	db := filepath.Join(filepath.Dir(cfgPath), "history.db")
	sys, err := New(t.Context(), Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: db, ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return sys, runSystem(t, sys)
}

// loopbackClient is an HTTP client for many concurrent streams to one
// loopback server: no proxy, a modest idle pool. The caller closes its
// idle connections.
func loopbackClient() (*http.Client, *http.Transport) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 64
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr}, tr
}

// newChatStream is a streaming OpenAI chat request for model.
func newChatStream(ctx context.Context, base, model string) *http.Request {
	body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, model)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return req
}

// sseAnswer is what an OpenAI streaming caller saw.
type sseAnswer struct {
	status                       int
	requestID, served, fallback  string // the X-Switchyard-* headers
	content                      string
	models                       map[string]int // the "model" of each chunk
	done                         bool           // data: [DONE] arrived
	afterDone, streamErr, badSSE string         // what should not be there
	err                          error          // transport error, or the body's read error
}

// readSSE reads an OpenAI chat completion stream until it ends or fails.
// It parses the SSE itself: data lines, blank separators, [DONE]. When
// onEvent is not nil it is called as each data event arrives, with the
// number of them so far.
func readSSE(resp *http.Response, onEvent func(n int)) sseAnswer {
	a := sseAnswer{
		status:    resp.StatusCode,
		requestID: resp.Header.Get("X-Switchyard-Request-Id"),
		served:    resp.Header.Get("X-Switchyard-Served-Model"),
		fallback:  resp.Header.Get("X-Switchyard-Fallback"),
		models:    make(map[string]int),
	}
	var content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Split(completeLines)
	for n := 0; sc.Scan(); {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if ok && onEvent != nil {
			n++
			onEvent(n)
		}
		switch {
		case !ok:
			a.badSSE = line
		case a.done:
			a.afterDone = data
		case data == "[DONE]":
			a.done = true
		default:
			var ch struct {
				Model   string
				Choices []struct{ Delta struct{ Content string } }
				Error   *struct{ Message string }
			}
			if err := json.Unmarshal([]byte(data), &ch); err != nil {
				a.badSSE = data
				continue
			}
			if ch.Error != nil {
				a.streamErr = ch.Error.Message
				continue
			}
			a.models[ch.Model]++
			for _, c := range ch.Choices {
				content.WriteString(c.Delta.Content)
			}
		}
	}
	a.content, a.err = content.String(), sc.Err()
	return a
}

// completeLines splits like bufio.ScanLines, but drops a last line that
// did not end in a newline: a caller that hangs up mid-stream cuts the line
// it was reading, and what it did not receive is no malformed SSE.
func completeLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, bytes.TrimSuffix(data[:i], []byte("\r")), nil
	}
	if atEOF {
		return len(data), nil, nil
	}
	return 0, nil, nil
}

// complaints reports the first few failures of one kind in a loop over
// many requests, then how many more there were.
type complaints struct {
	t    *testing.T
	n    int
	kind string
}

func (c *complaints) add(format string, args ...any) {
	c.t.Helper()
	c.n++
	if c.n <= 10 {
		c.t.Errorf(format, args...)
	}
}

func (c *complaints) close() {
	c.t.Helper()
	if c.n > 10 {
		c.t.Errorf("... and %d more %s", c.n-10, c.kind)
	}
}

// allRequests reads every request of the history, with its attempts,
// keyed by id.
func allRequests(ctx context.Context, s *history.Store) (map[string]fleet.RequestRecord, error) {
	out := make(map[string]fleet.RequestRecord)
	before := ""
	for {
		page, err := s.Requests(ctx, history.Filter{Limit: history.MaxLimit, Before: before})
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			out[r.ID] = r
		}
		if len(page) < history.MaxLimit {
			return out, nil
		}
		before = page[len(page)-1].ID
	}
}

// poll calls cond every few milliseconds until it returns true or d has
// passed, and returns cond's last result.
func poll(ctx context.Context, d time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// TestThousandStreamsWithFailingPrimaries sends 1,000 concurrent streaming
// requests through the OpenAI API. Request i names primary i%10 as its
// model; three of the ten primaries fail before their first token, each in
// its own way, so 30% of the requests must fail over to a healthy
// fallback without the caller noticing. Every answer must be whole and
// come from one server, every request must be in history with the right
// attempts, every upstream request must be accounted for and closed, and
// no goroutine may outlive the system.
func TestThousandStreamsWithFailingPrimaries(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	const (
		streams   = 1000
		primaries = 10
	)
	// The failing primaries: their fault, and the outcome their attempt
	// records (or skipped_open once their breaker opened).
	faults := map[string]string{"primary-7": "close_before_first", "primary-8": "error_event", "primary-9": "empty"}
	failing := map[string]fleet.Outcome{"primary-7": fleet.OutcomeError, "primary-8": fleet.OutcomeError, "primary-9": fleet.OutcomeNoContent}
	pace := func(p fleet.Provider) simfleet.Config {
		return simfleet.Config{Provider: p, TTFT: 2 * time.Millisecond, TokenGap: time.Millisecond, Tokens: 4}
	}
	// The fallbacks come first in priority, so a failing primary's request
	// goes straight to fallback-1 and never to another primary.
	members := []simfleet.Member{
		{ID: "fallback-1", Priority: 1, Config: pace(fleet.ProviderOpenAI)},
		{ID: "fallback-2", Priority: 2, Config: pace(fleet.ProviderOllama)},
	}
	for i := range primaries {
		m := simfleet.Member{ID: fmt.Sprintf("primary-%d", i), Priority: 10 + i,
			Config: pace([]fleet.Provider{fleet.ProviderOllama, fleet.ProviderOpenAI}[i%2])}
		members = append(members, m)
	}
	for i := range members {
		members[i].Config.Models = []simfleet.Model{{Name: members[i].ID}} // model name = id: Answer(id) is the text
	}
	f, err := simfleet.StartFleet(members)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for id, name := range faults {
		fault, err := simfleet.ParseFault(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.SetFault(id, fault); err != nil {
			t.Fatal(err)
		}
	}
	// A fixed 20s first-token deadline: a healthy server starved of CPU
	// under -race is slow, not failing.
	sys, stop := startOver(t, f, "  first_token_timeout: 20s\n  deadline_floor: 20s\n", "fallback-1")
	client, tr := loopbackClient()
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
	answers := make([]sseAnswer, streams)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			<-gate
			resp, err := client.Do(newChatStream(ctx, sys.URL(), fmt.Sprintf("primary-%d", i%primaries)))
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			answers[i] = readSSE(resp, nil)
		})
	}
	began := time.Now()
	close(gate)
	wg.Wait()
	t.Logf("%d streams answered in %v", streams, time.Since(began).Round(time.Millisecond))

	// What the callers saw: every stream whole, from one server.
	recs, err := allRequests(t.Context(), sys.store)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != streams {
		t.Errorf("history has %d requests; want %d", len(recs), streams)
	}
	callers := complaints{t: t, kind: "caller-visible errors"}
	mixed := complaints{t: t, kind: "wrong or mixed answers"}
	hist := complaints{t: t, kind: "history mismatches"}
	fellBack := 0
	for i, a := range answers {
		primary := fmt.Sprintf("primary-%d", i%primaries)
		if a.err != nil || a.status != http.StatusOK || !a.done || a.streamErr != "" || a.badSSE != "" || a.afterDone != "" {
			callers.add("stream %d (%s): status %d, [DONE] %v, error %v, stream error %q, bad SSE %q, after [DONE] %q",
				i, primary, a.status, a.done, a.err, a.streamErr, a.badSSE, a.afterDone)
			continue
		}
		_, fails := failing[primary]
		wantServed, wantFallback := primary, "false"
		if fails {
			wantServed, wantFallback = "fallback-1", "true"
			fellBack++
		}
		if a.served != wantServed || a.fallback != wantFallback {
			mixed.add("stream %d (%s): served %q fallback %q; want %q %q", i, primary, a.served, a.fallback, wantServed, wantFallback)
		}
		srv := f.Server(a.served)
		if srv == nil {
			mixed.add("stream %d (%s): served-model header %q names no server", i, primary, a.served)
			continue
		}
		if want := srv.Answer(a.served); a.content != want {
			mixed.add("stream %d (%s): content %q; want exactly %q (served by %s)", i, primary, a.content, want, a.served)
		}
		if len(a.models) != 1 || a.models[a.served] == 0 {
			mixed.add("stream %d (%s): chunk models %v; want only %s", i, primary, a.models, a.served)
		}

		rec, ok := recs[a.requestID]
		if !ok {
			hist.add("stream %d (%s): request %q is not in history", i, primary, a.requestID)
			continue
		}
		if rec.Status != fleet.StatusOK || rec.ServedCandidate != a.served || fmt.Sprint(rec.IsFallback) != a.fallback || rec.RequestedModel != primary {
			hist.add("stream %d: history status %s, served %s, fallback %v, requested %s; want ok, %s, %s, %s",
				i, rec.Status, rec.ServedCandidate, rec.IsFallback, rec.RequestedModel, a.served, a.fallback, primary)
		}
		if err := checkFailover(rec.Attempts, primary, a.served, failing); err != nil {
			hist.add("stream %d (%s, fault %q): attempts %s: %v", i, primary, faults[primary], describeAttempts(rec.Attempts), err)
		}
	}
	callers.close()
	mixed.close()
	hist.close()
	if fellBack != streams*len(failing)/primaries {
		t.Errorf("%d requests fell back; want %d", fellBack, streams*len(failing)/primaries)
	}

	// Every upstream request is accounted for, and closed.
	upstreamCalls := upstreamAttempts(recs)
	for _, c := range f.Candidates() {
		srv := f.Server(c.ID)
		wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
		if err := srv.WaitIdle(wctx); err != nil {
			t.Errorf("%s still has open streams: %+v", c.ID, srv.Stats())
		}
		wcancel()
		st := srv.Stats()
		if st.Requests != upstreamCalls[c.ID] || st.Completed != st.Requests || st.Cancelled != 0 {
			t.Errorf("%s: stats %+v; want %d requests (its attempts in history), all completed", c.ID, st, upstreamCalls[c.ID])
		}
		br := sys.router.Breaker(c.ID).Snapshot()
		if faults[c.ID] == "empty" {
			// An empty answer that ends normally is nobody's fault
			// (docs/DESIGN.md, "Whose fault is it"): tried every time,
			// never counted.
			if br.State != fleet.BreakerClosed || br.Failures != 0 || st.Requests != streams/primaries {
				t.Errorf("%s (fault empty): breaker %+v after %d requests; want closed, tried by all %d", c.ID, br, st.Requests, streams/primaries)
			}
		} else if _, fails := failing[c.ID]; fails {
			t.Logf("%s (fault %s): tried by %d requests, skipped by %d once its breaker opened", c.ID, faults[c.ID], st.Requests, streams/primaries-st.Requests)
			if br.State != fleet.BreakerOpen {
				t.Errorf("%s (fault %s): breaker %+v; want open", c.ID, faults[c.ID], br)
			}
		} else if br.State != fleet.BreakerClosed || br.Failures != 0 {
			t.Errorf("%s (healthy): breaker %+v; want closed without failures", c.ID, br)
		}
	}

	// Nothing outlives the system and the fleet.
	tr.CloseIdleConnections()
	stop()
	f.Close()
	goleak.VerifyNone(t, leaks)
}

// checkFailover checks the attempts of a request whose first choice was
// primary and which served served. The router records a skipped_open
// attempt for every candidate whose breaker was open when it planned the
// request (every exclusion is recorded: docs/DESIGN.md, "Exclusions"), ahead of the attempts it
// made, whether or not that candidate would have been reached. So: only a
// failing candidate may be skipped, and the attempts made are the primary
// (unless skipped) failing as its fault says and then the server that
// answered, or the healthy primary alone.
func checkFailover(as []fleet.Attempt, primary, served string, failing map[string]fleet.Outcome) error {
	var tried []fleet.Attempt
	skippedPrimary := false
	for i, a := range as {
		if a.Order != i {
			return fmt.Errorf("attempt %d has order %d", i, a.Order)
		}
		if a.Outcome != fleet.OutcomeSkippedOpen {
			tried = append(tried, a)
			continue
		}
		if _, ok := failing[a.Candidate]; !ok {
			return fmt.Errorf("healthy %s skipped", a.Candidate)
		}
		skippedPrimary = skippedPrimary || a.Candidate == primary
	}
	want, fails := failing[primary]
	switch {
	case !fails && len(tried) == 1 && tried[0].Candidate == primary && tried[0].Outcome == fleet.OutcomeSuccess:
	case fails && skippedPrimary && len(tried) == 1 && tried[0].Candidate == served && tried[0].Outcome == fleet.OutcomeSuccess:
	case fails && !skippedPrimary && len(tried) == 2 && tried[0].Candidate == primary && tried[0].Outcome == want &&
		tried[1].Candidate == served && tried[1].Outcome == fleet.OutcomeSuccess:
	default:
		return fmt.Errorf("want the primary's %s or skipped_open, then %s's success", want, served)
	}
	return nil
}

// describeAttempts lists attempts for a failure message:
// "[primary-8 error (error event), fallback-1 success]".
func describeAttempts(as []fleet.Attempt) string {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", a.Candidate, a.Outcome)
		if a.Error != "" {
			fmt.Fprintf(&b, " (%s)", a.Error)
		}
	}
	return "[" + b.String() + "]"
}

// TestCallersAbortAtRandomMoments streams a few hundred requests, each
// cancelled by its caller at a random moment (the seed is logged): before
// the request is sent, while the router probes for the first token, or
// after commit. An abort is never a candidate failure: every upstream
// connection must close promptly, no breaker may count a failure, and
// history must record each request the caller learned the id of as a
// client abort.
func TestCallersAbortAtRandomMoments(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	const (
		streams = 300
		servers = 3
		ttft    = 100 * time.Millisecond
		gap     = 25 * time.Millisecond
		tokens  = 40
		// Timed aborts land in [0, latest). An answer takes at least
		// ttft + (tokens-1)*gap ≈ 1.1s, so the abort always comes first,
		// with a wide margin.
		latest = 400 * time.Millisecond
		// Aborts by count come after 0 to maxChunks events of the answer,
		// well before its end.
		maxChunks = 8
	)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	// One caller in ten aborts at once, before its request is sent; four
	// at a random time, mostly before the first token under this load;
	// five once they have read a random number of events, after commit.
	plans := make([]abortPlan, streams)
	for i := range plans {
		switch r := rng.IntN(10); {
		case r == 0:
			plans[i] = abortPlan{afterEvents: -1}
		case r < 5:
			plans[i] = abortPlan{delay: time.Duration(rng.Int64N(int64(latest))), afterEvents: -1}
		default:
			plans[i] = abortPlan{delay: -1, afterEvents: rng.IntN(maxChunks + 1)}
		}
	}

	var members []simfleet.Member
	for i := range servers {
		id := fmt.Sprintf("abort-%d", i+1)
		members = append(members, simfleet.Member{ID: id, Priority: i + 1, Config: simfleet.Config{
			Provider: []fleet.Provider{fleet.ProviderOllama, fleet.ProviderOpenAI}[i%2],
			Models:   []simfleet.Model{{Name: id}},
			TTFT:     ttft, TokenGap: gap, Tokens: tokens,
		}})
	}
	f, err := simfleet.StartFleet(members)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sys, stop := startOver(t, f, "  first_token_timeout: 20s\n  deadline_floor: 20s\n", "abort-1")
	client, tr := loopbackClient()
	defer tr.CloseIdleConnections()

	// What each caller learned before its abort.
	type seen struct {
		id      string // "" when the abort came before the headers
		served  string // the served-model header
		done    bool   // the whole answer arrived: the abort came too late
		err     error  // an error that is not the abort
		content string
	}
	seens := make([]seen, streams)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			<-gate
			p := plans[i]
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if p.delay >= 0 {
				defer time.AfterFunc(p.delay, cancel).Stop()
			}
			resp, err := client.Do(newChatStream(ctx, sys.URL(), fmt.Sprintf("abort-%d", i%servers+1)))
			if err != nil {
				if ctx.Err() == nil {
					seens[i].err = err
				}
				return
			}
			defer resp.Body.Close()
			abortAt := func(n int) {
				if p.afterEvents >= 0 && n >= p.afterEvents {
					cancel()
				}
			}
			abortAt(0)
			a := readSSE(resp, abortAt)
			seens[i] = seen{id: a.requestID, served: a.served, done: a.done, content: a.content}
			if a.status != http.StatusOK || a.streamErr != "" || a.badSSE != "" {
				seens[i].err = fmt.Errorf("status %d, stream error %q, bad SSE %q", a.status, a.streamErr, a.badSSE)
			}
		})
	}
	began := time.Now()
	close(gate)
	wg.Wait()
	aborted := time.Now()

	afterHeaders := 0
	committed := make(map[string]int) // per server, the streams whose caller got headers
	for i, s := range seens {
		if s.err != nil {
			t.Errorf("stream %d (abort %v): %v", i, plans[i], s.err)
		}
		if s.done {
			t.Errorf("stream %d (abort %v): the whole answer arrived before the abort", i, plans[i])
		}
		if s.id != "" {
			afterHeaders++
			committed[s.served]++
			if want := fmt.Sprintf("abort-%d", i%servers+1); s.served != want {
				t.Errorf("stream %d: served by %q; want %s", i, s.served, want)
			} else if answer := f.Server(want).Answer(want); !strings.HasPrefix(answer, s.content) {
				t.Errorf("stream %d: content %q; want a prefix of %q", i, s.content, answer)
			}
		}
	}

	// Every upstream connection is closed promptly.
	for _, c := range f.Candidates() {
		srv := f.Server(c.ID)
		wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
		if err := srv.WaitIdle(wctx); err != nil {
			t.Errorf("%s still has open streams 5s after the last abort: %+v", c.ID, srv.Stats())
		}
		wcancel()
	}
	t.Logf("%d streams aborted within %v (%d after their headers); every upstream idle %v after the last abort",
		streams, aborted.Sub(began).Round(time.Millisecond), afterHeaders, time.Since(aborted).Round(time.Millisecond))

	// History: every request ends as a client abort. Records are written
	// as each request ends on the server side, so wait for them: for every
	// id a caller learned, and for an attempt per request each upstream
	// received.
	var recs map[string]fleet.RequestRecord
	complete := func() bool {
		var err error
		if recs, err = allRequests(t.Context(), sys.store); err != nil {
			t.Fatal(err)
		}
		for _, s := range seens {
			if _, ok := recs[s.id]; s.id != "" && !ok {
				return false
			}
		}
		calls := upstreamAttempts(recs)
		for _, c := range f.Candidates() {
			if calls[c.ID] < f.Server(c.ID).Stats().Requests {
				return false
			}
		}
		return true
	}
	if !poll(t.Context(), 10*time.Second, complete) {
		t.Errorf("history is missing requests 10s after the last abort: %d recorded", len(recs))
	}
	for i, s := range seens {
		rec, ok := recs[s.id]
		if s.id == "" || !ok {
			continue
		}
		if n := len(rec.Attempts); rec.Status != fleet.StatusClientAbort || n == 0 || rec.Attempts[n-1].Outcome != fleet.OutcomeClientAbort {
			t.Errorf("stream %d (abort %v, after its headers): history status %s, attempts %s; want client_abort, the last attempt client_abort",
				i, plans[i], rec.Status, describeAttempts(rec.Attempts))
		}
	}
	var beforeRouting, duringProbe, afterCommit int
	for _, rec := range recs {
		switch {
		case rec.Status != fleet.StatusClientAbort:
			t.Errorf("request %s: history status %s, attempts %s; want client_abort", rec.ID, rec.Status, describeAttempts(rec.Attempts))
		case len(rec.Attempts) == 0:
			beforeRouting++
		case rec.ServedCandidate == "":
			duringProbe++
		default:
			afterCommit++
		}
		for _, a := range rec.Attempts {
			if a.Outcome != fleet.OutcomeClientAbort {
				t.Errorf("request %s: attempt %s %s (%s); want only client_abort", rec.ID, a.Candidate, a.Outcome, a.Error)
			}
		}
	}
	t.Logf("history: %d client aborts: %d before routing, %d during the probe, %d after commit", len(recs), beforeRouting, duringProbe, afterCommit)
	if len(recs) < afterHeaders || len(recs) > streams {
		t.Errorf("history has %d client aborts; want between %d (aborted after their headers) and %d", len(recs), afterHeaders, streams)
	}
	if duringProbe == 0 || afterCommit == 0 {
		t.Errorf("aborts during the probe %d, after commit %d; want some of each", duringProbe, afterCommit)
	}

	// The upstreams saw every stream they served cut short: at least
	// those whose caller got the headers, at most one per attempt in
	// history. No breaker counted an abort as a failure.
	calls := upstreamAttempts(recs)
	for _, c := range f.Candidates() {
		st := f.Server(c.ID).Stats()
		if st.Completed != 0 || st.Cancelled != st.Requests || st.Requests < committed[c.ID] || st.Requests > calls[c.ID] {
			t.Errorf("%s: stats %+v; want every request cancelled, between %d (streams with headers) and %d (its attempts in history)",
				c.ID, st, committed[c.ID], calls[c.ID])
		}
		if br := sys.router.Breaker(c.ID).Snapshot(); br.State != fleet.BreakerClosed || br.Failures != 0 {
			t.Errorf("%s: breaker %+v; want closed without failures", c.ID, br)
		}
	}

	// The client first: an abort during the dial leaves an unused
	// connection in its pool, which the server would wait ~5s for.
	tr.CloseIdleConnections()
	stop()
	f.Close()
	goleak.VerifyNone(t, leaks)
}

// abortPlan is when a caller gives up on its stream: delay after it
// starts (-1: not by time), or as soon as it has read afterEvents events of
// the answer (-1: not by count; 0: as the headers arrive).
type abortPlan struct {
	delay       time.Duration
	afterEvents int
}

func (p abortPlan) String() string {
	if p.afterEvents >= 0 {
		return fmt.Sprintf("after %d events", p.afterEvents)
	}
	return fmt.Sprintf("after %v", p.delay)
}

// upstreamAttempts counts, per candidate, the attempts in recs that called
// the upstream (all but skipped_open).
func upstreamAttempts(recs map[string]fleet.RequestRecord) map[string]int {
	n := make(map[string]int)
	for _, r := range recs {
		for _, a := range r.Attempts {
			if a.Outcome != fleet.OutcomeSkippedOpen {
				n[a.Candidate]++
			}
		}
	}
	return n
}

// TestReadSSEIgnoresTheLineACallerCut: the reader of the load tests took
// the half line a deliberately aborted caller was reading for malformed
// SSE, and failed a clean run (issue 12, item 7).
func TestReadSSEIgnoresTheLineACallerCut(t *testing.T) {
	body := "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"id\":\"chatcmpl-06h2vtjhbd39xm096g"
	a := readSSE(&http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}, nil)
	if a.badSSE != "" || a.content != "hi" {
		t.Errorf("readSSE() = bad %q content %q; want no bad SSE and the content received", a.badSSE, a.content)
	}
}
