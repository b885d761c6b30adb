// Package experiment is the failover experiment (docs/DESIGN.md,
// "Failover experiment"): it starts a
// simulated fleet of two servers (a primary speaking Ollama's API and a
// healthy secondary speaking the OpenAI API as vLLM does) and a real
// Switchyard in front of them, in-process and over real HTTP, and sends
// streamed requests through Switchyard's OpenAI-compatible API while the
// primary misbehaves in one way per scenario. It counts what the callers
// saw (errors, fallbacks, answers that mix two servers' text), measures
// latency and time to first token as the callers saw them, and checks each
// scenario's expected outcome.
//
// Every scenario gets a fresh fleet and a fresh Switchyard with its own
// config file and history database in a temporary directory, so breaker
// state never leaks from one scenario into the next.
//
// The pieces are exported for the benchmarks (backend/bench) too:
// StartSwitchyard runs a real Switchyard in front of any simulated fleet,
// and Client measures a streamed answer as its caller sees it.
package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// The fleet's candidates.
const (
	Primary   = "primary"   // Ollama, the first choice; the faults strike it
	Secondary = "secondary" // OpenAI-compatible (vLLM dialect), always healthy

	primaryModel   = "llama3.2:3b"
	secondaryModel = "Qwen/Qwen3-8B"
)

// Expect is the outcome a scenario must show.
type Expect string

const (
	// ExpectPrimary: no errors, no fallbacks, every answer the primary's
	// complete answer.
	ExpectPrimary Expect = "primary serves"
	// ExpectFallback: no errors, every request served by the secondary
	// (a fallback, whether the primary was tried or skipped by its open
	// breaker), every answer the secondary's complete answer.
	ExpectFallback Expect = "secondary serves"
	// ExpectCutNoMix: some callers see their stream end in an error event
	// after the primary committed, and every answer, cut or complete, comes
	// from one server only: a cut answer is a prefix of the primary's.
	ExpectCutNoMix Expect = "errors, no mixed output"
)

// Scenario is one row of the experiment: what the primary does and what
// the callers must see.
type Scenario struct {
	// Name is the row's label.
	Name string
	// Fault is the primary's simfleet fault, as ParseFault reads it.
	Fault string
	// Expect is the outcome that must hold.
	Expect Expect
}

// Scenarios returns the experiment's scenarios, in the order they are run.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "primary healthy", Fault: "healthy", Expect: ExpectPrimary},
		{Name: "primary 503", Fault: "status:503", Expect: ExpectFallback},
		{Name: "crash before first token", Fault: "close_before_first", Expect: ExpectFallback},
		{Name: "stall before first token", Fault: "hang_first_token", Expect: ExpectFallback},
		{Name: "empty stream", Fault: "empty", Expect: ExpectFallback},
		{Name: "dies mid-stream", Fault: "die_after:3", Expect: ExpectCutNoMix},
	}
}

// Options configure Run. The zero value runs the whole experiment.
type Options struct {
	// Requests is the number of requests per scenario. Default 100.
	Requests int
	// Concurrency is the number of requests in flight at once. Default 10.
	Concurrency int
	// Scenarios are the scenarios to run. Default Scenarios().
	Scenarios []Scenario
	// FirstTokenTimeout is Switchyard's first-token deadline, which ends
	// the stall scenario's attempts on the primary. Default 2s: far
	// above the simulated servers' 20ms first token, so that a healthy
	// secondary on a machine busy with other work is not cut as stalled.
	FirstTokenTimeout time.Duration
	// TTFT and TokenGap pace the simulated servers. Defaults 20ms and 2ms.
	TTFT, TokenGap time.Duration
	// Tokens is the length of each answer in tokens. Default 16.
	Tokens int
	// TempDir is where each scenario's config and database are made (and
	// removed afterwards). Default os.TempDir().
	TempDir string
	// Progress, when set, is called after every request with the number
	// of requests done and the total over all scenarios, and the name of
	// the scenario running. It is called from many goroutines, one call at
	// a time.
	Progress func(done, total int, scenario string)
}

func (o Options) withDefaults() Options {
	if o.Requests <= 0 {
		o.Requests = 100
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 10
	}
	if o.Scenarios == nil {
		o.Scenarios = Scenarios()
	}
	if o.FirstTokenTimeout <= 0 {
		o.FirstTokenTimeout = 2 * time.Second
	}
	if o.TTFT <= 0 {
		o.TTFT = 20 * time.Millisecond
	}
	if o.TokenGap <= 0 {
		o.TokenGap = 2 * time.Millisecond
	}
	if o.Tokens <= 0 {
		o.Tokens = 16
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	return o
}

// Report is the outcome of a whole experiment.
type Report struct {
	Requests    int           `json:"requests_per_scenario"`
	Concurrency int           `json:"concurrency"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Results     []Result      `json:"scenarios"`
}

// Held reports whether every scenario's expectation held.
func (r Report) Held() bool {
	for _, res := range r.Results {
		if !res.Held {
			return false
		}
	}
	return len(r.Results) > 0
}

// Result is the outcome of one scenario. Durations are as the callers
// measured them; TTFT percentiles cover the answers that had a first
// token.
type Result struct {
	Scenario string `json:"scenario"`
	Fault    string `json:"fault"`
	Expect   Expect `json:"expect"`
	Requests int    `json:"requests"`
	// Errors counts answers that did not complete: HTTP errors, error
	// events and cut streams.
	Errors int `json:"errors"`
	// StreamErrors counts the Errors that arrived inside an HTTP 200
	// stream, after Switchyard had committed.
	StreamErrors int `json:"stream_errors"`
	// Fallbacks counts answers served by another candidate than the first
	// choice (X-Switchyard-Fallback: true); SkippedOpen counts those among
	// them whose primary was skipped because its breaker was open, as the
	// history recorded.
	Fallbacks   int `json:"fallbacks"`
	SkippedOpen int `json:"skipped_open"`
	// Mixed counts answers that are not exactly (or, when cut, a prefix
	// of) the answer of the server Switchyard said served them.
	Mixed int `json:"mixed"`
	// PrimaryRequests is the number of chat requests the primary server
	// received.
	PrimaryRequests int `json:"primary_requests"`

	LatencyP50 time.Duration `json:"latency_p50_ns"`
	LatencyP95 time.Duration `json:"latency_p95_ns"`
	TTFTP50    time.Duration `json:"ttft_p50_ns"`
	TTFTP95    time.Duration `json:"ttft_p95_ns"`

	// Held says the expectation held; Problems say why not.
	Held     bool     `json:"held"`
	Problems []string `json:"problems,omitempty"`
}

// Run runs every scenario of o in turn and returns the report. An error
// means the experiment could not run (a server did not start, ctx ended);
// an expectation that failed is in the Report, not an error.
func Run(ctx context.Context, o Options) (Report, error) {
	o = o.withDefaults()
	rep := Report{Requests: o.Requests, Concurrency: o.Concurrency}
	start := time.Now()
	total := o.Requests * len(o.Scenarios)
	var mu sync.Mutex
	done := 0
	for _, sc := range o.Scenarios {
		progress := func() {
			if o.Progress == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			done++
			o.Progress(done, total, sc.Name)
		}
		res, err := runScenario(ctx, o, sc, progress)
		if err != nil {
			return rep, fmt.Errorf("scenario %q: %w", sc.Name, err)
		}
		rep.Results = append(rep.Results, res)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// bed is a scenario's test bed: a fleet, a running Switchyard in front of
// it and a client for Switchyard's API.
type bed struct {
	fleet  *simfleet.Fleet
	sy     *Switchyard
	client *Client
}

func startBed(ctx context.Context, o Options) (*bed, error) {
	f, err := simfleet.StartFleet([]simfleet.Member{
		{ID: Primary, Priority: 1, Config: simfleet.Config{
			Provider: fleet.ProviderOllama,
			Models:   []simfleet.Model{{Name: primaryModel}},
			TTFT:     o.TTFT, TokenGap: o.TokenGap, Tokens: o.Tokens,
		}},
		{ID: Secondary, Priority: 2, Config: simfleet.Config{
			Provider: fleet.ProviderOpenAI,
			Models:   []simfleet.Model{{Name: secondaryModel}},
			TTFT:     o.TTFT, TokenGap: o.TokenGap, Tokens: o.Tokens,
		}},
	})
	if err != nil {
		return nil, err
	}
	sy, err := StartSwitchyard(ctx, Setup{
		Selection: map[string]string{
			"failure_threshold":   "2",
			"open_duration":       "30s",
			"first_token_timeout": o.FirstTokenTimeout.String(),
			"deadline_floor":      o.FirstTokenTimeout.String(),
			"stall_timeout":       "10s",
		},
		DefaultModel: Primary,
		Candidates:   f.Candidates(),
		TempDir:      o.TempDir,
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return &bed{fleet: f, sy: sy, client: NewClient(sy.URL()+"/v1", o.Concurrency)}, nil
}

func (b *bed) stop() error {
	// Idle client connections first: a connection the client dialled but
	// never used is new, not idle, to the server, and would hold up its
	// shutdown for 5s.
	b.client.CloseIdle()
	err := b.sy.Close()
	b.fleet.Close()
	return err
}

func runScenario(ctx context.Context, o Options, sc Scenario, progress func()) (res Result, err error) {
	fault, err := simfleet.ParseFault(sc.Fault)
	if err != nil {
		return res, err
	}
	b, err := startBed(ctx, o)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, b.stop()) }()
	if err := b.fleet.SetFault(Primary, fault); err != nil {
		return res, err
	}

	answers := make([]Answer, o.Requests)
	body := ChatBody("auto", true)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(o.Concurrency, o.Requests) {
		wg.Go(func() {
			for i := range next {
				answers[i] = b.client.Chat(ctx, body)
				progress()
			}
		})
	}
	for i := range answers {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}

	res = Result{Scenario: sc.Name, Fault: fault.String(), Expect: sc.Expect, Requests: o.Requests}
	res.PrimaryRequests = b.fleet.Server(Primary).Stats().Requests
	res.SkippedOpen, err = skippedOpen(ctx, b.sy, answers)
	if err != nil {
		return res, err
	}
	full := map[string]string{
		Primary:   b.fleet.Server(Primary).Answer(primaryModel),
		Secondary: b.fleet.Server(Secondary).Answer(secondaryModel),
	}
	tally(&res, answers, full)
	res.Problems = check(sc.Expect, res, answers, full)
	res.Held = len(res.Problems) == 0
	return res, nil
}

// tally counts the answers and their percentiles into res.
func tally(res *Result, answers []Answer, full map[string]string) {
	var lat, ttft []time.Duration
	for _, a := range answers {
		if a.Err != nil {
			res.Errors++
			if a.StreamError {
				res.StreamErrors++
			}
		}
		if a.Fallback {
			res.Fallbacks++
		}
		if mixed(a, full) {
			res.Mixed++
		}
		lat = append(lat, a.Latency)
		if a.TTFT > 0 {
			ttft = append(ttft, a.TTFT)
		}
	}
	slices.Sort(lat)
	slices.Sort(ttft)
	res.LatencyP50, res.LatencyP95 = Percentile(lat, 50), Percentile(lat, 95)
	res.TTFTP50, res.TTFTP95 = Percentile(ttft, 50), Percentile(ttft, 95)
}

// mixed reports whether a's content is not the answer of the server that
// served it: for a complete answer, exactly that server's answer; for a
// cut one, a prefix of it. An answer with no content and no server (an
// HTTP error) is not mixed.
func mixed(a Answer, full map[string]string) bool {
	want, ok := full[a.Served]
	if !ok {
		return a.Content != ""
	}
	if a.Err != nil {
		return !strings.HasPrefix(want, a.Content)
	}
	return a.Content != want
}

// check returns the ways res misses the expectation; none when it holds.
func check(e Expect, res Result, answers []Answer, full map[string]string) []string {
	var p []string
	want := func(ok bool, format string, args ...any) {
		if !ok {
			p = append(p, fmt.Sprintf(format, args...))
		}
	}
	served := func(id string) int {
		n := 0
		for _, a := range answers {
			if a.Err == nil && a.Served == id && a.Content == full[id] {
				n++
			}
		}
		return n
	}
	want(res.Mixed == 0, "%d answers mixed or not their server's; want 0%s", res.Mixed, firstMixed(answers, full))
	switch e {
	case ExpectPrimary:
		want(res.Errors == 0, "%d errors; want 0%s", res.Errors, firstError(answers))
		want(res.Fallbacks == 0, "%d fallbacks; want 0", res.Fallbacks)
		want(served(Primary) == res.Requests, "%d complete answers from the primary; want %d", served(Primary), res.Requests)
	case ExpectFallback:
		want(res.Errors == 0, "%d errors; want 0%s", res.Errors, firstError(answers))
		want(res.Fallbacks == res.Requests, "%d fallbacks; want %d", res.Fallbacks, res.Requests)
		want(served(Secondary) == res.Requests, "%d complete answers from the secondary; want %d", served(Secondary), res.Requests)
	case ExpectCutNoMix:
		want(res.Errors > 0, "no errors; want the primary's streams cut after their first token")
		want(res.StreamErrors == res.Errors, "%d of %d errors came instead of a stream; want all inside a committed stream%s",
			res.Errors-res.StreamErrors, res.Errors, firstError(answers))
		for _, a := range answers {
			if a.Err != nil && (a.Served != Primary || a.Content == "") {
				want(false, "a cut answer came from %q with %q; want a non-empty part of the primary's", a.Served, a.Content)
				break
			}
		}
	default:
		want(false, "unknown expectation %q", e)
	}
	return p
}

func firstError(answers []Answer) string {
	for _, a := range answers {
		if a.Err != nil {
			return fmt.Sprintf(" (first: %v)", a.Err)
		}
	}
	return ""
}

func firstMixed(answers []Answer, full map[string]string) string {
	for _, a := range answers {
		if mixed(a, full) {
			return fmt.Sprintf(" (first: served by %q: %q)", a.Served, a.Content)
		}
	}
	return ""
}

// skippedOpen counts the answered requests whose first attempt the history
// recorded as skipped_open: the primary's breaker was open.
func skippedOpen(ctx context.Context, sy *Switchyard, answers []Answer) (int, error) {
	ids := make(map[string]bool, len(answers))
	for _, a := range answers {
		if a.RequestID != "" {
			ids[a.RequestID] = true
		}
	}
	n := 0
	before := ""
	for {
		recs, err := sy.Requests(ctx, history.Filter{Limit: history.MaxLimit, Before: before})
		if err != nil {
			return 0, fmt.Errorf("read history: %w", err)
		}
		for _, r := range recs {
			if ids[r.ID] && len(r.Attempts) > 0 && r.Attempts[0].Outcome == fleet.OutcomeSkippedOpen {
				n++
			}
		}
		if len(recs) < history.MaxLimit {
			return n, nil
		}
		before = recs[len(recs)-1].ID
	}
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method; zero for no samples.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
