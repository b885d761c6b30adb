package experiment

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// small is a reduced experiment: fewer requests, a shorter first-token
// deadline for the stall scenario, and servers without delays.
func small(t *testing.T, scenarios []Scenario) Options {
	return Options{
		Requests: 20, Concurrency: 4, Scenarios: scenarios,
		FirstTokenTimeout: 200 * time.Millisecond,
		TTFT:              time.Millisecond, TokenGap: time.Microsecond, Tokens: 8,
		TempDir: t.TempDir(),
	}
}

func TestEveryScenarioHolds(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	calls := 0
	o := small(t, nil)
	o.Progress = func(done, total int, scenario string) {
		calls++
		if done != calls || total != 20*len(Scenarios()) || scenario == "" {
			t.Errorf("Progress(%d, %d, %q) on call %d", done, total, scenario, calls)
		}
	}
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if len(rep.Results) != len(Scenarios()) {
		t.Fatalf("%d results; want %d", len(rep.Results), len(Scenarios()))
	}
	for _, res := range rep.Results {
		if !res.Held {
			t.Errorf("%s: expectation failed: %v", res.Scenario, res.Problems)
		}
		if res.Requests != 20 || res.LatencyP50 <= 0 || res.LatencyP95 < res.LatencyP50 || res.TTFTP50 <= 0 {
			t.Errorf("%s: requests %d, latency p50 %v p95 %v, TTFT p50 %v", res.Scenario, res.Requests, res.LatencyP50, res.LatencyP95, res.TTFTP50)
		}
	}
	if !rep.Held() {
		t.Error("Report.Held() = false; want true")
	}
	if calls != 20*len(Scenarios()) {
		t.Errorf("Progress called %d times; want %d", calls, 20*len(Scenarios()))
	}
	// The open breaker is what serves most fallbacks: the primary was
	// asked only until its breaker opened.
	for _, res := range rep.Results {
		// An empty answer that ended normally is nobody's fault: the
		// primary is asked every time and its breaker stays closed.
		if res.Fault == "empty" {
			if res.SkippedOpen != 0 || res.PrimaryRequests != res.Requests {
				t.Errorf("%s: %d skipped_open, primary asked %d of %d times; want it asked every time", res.Scenario, res.SkippedOpen, res.PrimaryRequests, res.Requests)
			}
			continue
		}
		if res.Expect == ExpectFallback && (res.SkippedOpen == 0 || res.PrimaryRequests >= res.Requests) {
			t.Errorf("%s: %d skipped_open, primary asked %d times; want the breaker to open", res.Scenario, res.SkippedOpen, res.PrimaryRequests)
		}
	}
}

// TestBrokenExpectationFails runs scenarios whose expectation is wrong and
// checks that the report says so.
func TestBrokenExpectationFails(t *testing.T) {
	rep, err := Run(t.Context(), small(t, []Scenario{
		{Name: "503 said to be healthy", Fault: "status:503", Expect: ExpectPrimary},
		{Name: "healthy said to fail over", Fault: "healthy", Expect: ExpectFallback},
		{Name: "healthy said to be cut", Fault: "healthy", Expect: ExpectCutNoMix},
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range rep.Results {
		if res.Held || len(res.Problems) == 0 {
			t.Errorf("%s: Held = %v, problems %v; want a failure", res.Scenario, res.Held, res.Problems)
		}
	}
	if rep.Held() {
		t.Error("Report.Held() = true; want false")
	}
	var table strings.Builder
	rep.WriteTable(&table)
	if got := table.String(); !strings.Contains(got, "NO") || !strings.Contains(got, "FAIL 503 said to be healthy: 20 fallbacks; want 0") {
		t.Errorf("table does not report the failure:\n%s", got)
	}
}

func TestUnknownFault(t *testing.T) {
	_, err := Run(t.Context(), small(t, []Scenario{{Name: "x", Fault: "nonsense", Expect: ExpectPrimary}}))
	if err == nil {
		t.Fatal("Run() = nil error for an unknown fault")
	}
}

func TestMixed(t *testing.T) {
	full := map[string]string{Primary: "alpha here: one two", Secondary: "beta here: three four"}
	for _, c := range []struct {
		a    Answer
		want bool
	}{
		{Answer{Served: Primary, Content: "alpha here: one two"}, false},
		{Answer{Served: Secondary, Content: "beta here: three four"}, false},
		{Answer{Served: Primary, Content: "alpha here: one", Err: ErrCut}, false},
		{Answer{Served: Primary, Content: "alpha here: one", Err: nil}, true},
		{Answer{Served: Secondary, Content: "alpha here: one two"}, true},
		{Answer{Served: Primary, Content: "alpha here:beta here: three four", Err: ErrCut}, true},
		{Answer{Err: errors.New("HTTP 503")}, false},
		{Answer{Content: "beta here"}, true},
	} {
		if got := mixed(c.a, full); got != c.want {
			t.Errorf("mixed(%+v) = %v; want %v", c.a, got, c.want)
		}
	}
}

func TestReadEvents(t *testing.T) {
	long := strings.Repeat("x", 10000)
	for _, c := range []struct {
		name, in string
		want     []string
		err      error
	}{
		{"complete", "data: a\n\ndata: b\n\ndata: [DONE]\n\n", []string{"a", "b"}, nil},
		{"crlf and no space", "data:a\r\n\r\ndata: [DONE]\r\n\r\n", []string{"a"}, nil},
		{"comments and fields", ": ping\n\nevent: x\ndata: a\nid: 1\n\ndata: [DONE]\n\n", []string{"a"}, nil},
		{"multi-line data", "data: a\ndata: b\n\ndata: [DONE]\n\n", []string{"a\nb"}, nil},
		{"done without blank line", "data: a\n\ndata: [DONE]\n", []string{"a"}, nil},
		{"long line", "data: " + long + "\n\ndata: [DONE]\n\n", []string{long}, nil},
		{"cut", "data: a\n\ndata: b", []string{"a"}, ErrCut},
		{"empty", "", nil, ErrCut},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			err := readEvents(strings.NewReader(c.in), func(d []byte) error {
				got = append(got, string(d))
				return nil
			})
			if !errors.Is(err, c.err) || strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("readEvents() = %q, %v; want %q, %v", got, err, c.want, c.err)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for p, want := range map[float64]time.Duration{50: 5, 95: 10, 99: 10, 10: 1, 100: 10} {
		if got := Percentile(d, p); got != want {
			t.Errorf("Percentile(1..10, %v) = %v; want %v", p, got, want)
		}
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile(nil, 50) = %v; want 0", got)
	}
}
