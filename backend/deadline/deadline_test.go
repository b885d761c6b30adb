package deadline

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

var qwen = fleet.Candidate{ID: "qwen"}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestFirstToken(t *testing.T) {
	const ceiling = 60 * time.Second
	tests := []struct {
		name     string
		samples  []time.Duration
		resident func(fleet.Candidate) (bool, bool, time.Time)
		loadTime time.Duration
		want     time.Duration
		wantCold bool
	}{
		{name: "no samples: the ceiling", want: ceiling},
		{name: "too few samples: the ceiling", samples: repeat(ms(300), 19), want: ceiling},
		{name: "enough samples: k × p99", samples: append(repeat(ms(300), 19), ms(800)), want: 4 * ms(800)},
		{name: "floor", samples: repeat(ms(100), 20), want: 2 * time.Second},
		{name: "capped at the ceiling", samples: repeat(20*time.Second, 20), want: ceiling},
		{name: "cold model gets its configured load time on top",
			samples: repeat(ms(800), 20), resident: func(fleet.Candidate) (bool, bool, time.Time) { return false, true, time.Now() },
			loadTime: 30 * time.Second, want: 4*ms(800) + 30*time.Second, wantCold: true},
		{name: "cold model without a known load time gets the default allowance",
			resident: func(fleet.Candidate) (bool, bool, time.Time) { return false, true, time.Now() },
			want:     ceiling + DefaultLoadTime, wantCold: true},
		{name: "resident: no allowance", samples: repeat(ms(800), 20),
			resident: func(fleet.Candidate) (bool, bool, time.Time) { return true, true, time.Now() }, want: 4 * ms(800)},
		{name: "residency unknown: no allowance", samples: repeat(ms(800), 20),
			resident: func(fleet.Candidate) (bool, bool, time.Time) { return false, false, time.Time{} }, want: 4 * ms(800)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Settings{Resident: tt.resident, LoadTime: func(fleet.Candidate) time.Duration { return tt.loadTime }})
			for _, s := range tt.samples {
				l.Observe(qwen, fleet.TTFTSample{TTFT: s})
			}
			d, cold := l.FirstToken(qwen, ceiling)
			if d != tt.want || cold != tt.wantCold {
				t.Errorf("FirstToken() = %v, %v; want %v, %v", d, cold, tt.want, tt.wantCold)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestColdSamplesAreNotLearnedAsWarm(t *testing.T) {
	l := New(Settings{})
	for range 20 {
		l.Observe(qwen, fleet.TTFTSample{TTFT: ms(300)})
	}
	l.Observe(qwen, fleet.TTFTSample{TTFT: 20 * time.Second, Cold: true})                                          // the attempt was known cold
	l.Observe(qwen, fleet.TTFTSample{TTFT: 15 * time.Second, Usage: &fleet.Usage{LoadDuration: 14 * time.Second}}) // upstream reports a load
	if st := l.Stats(qwen.ID); st.N != 20 || st.P99 != ms(300) {
		t.Errorf("Stats() = %+v; want only the 20 warm samples", st)
	}
}

func TestLearnedLoadTime(t *testing.T) {
	cold := func(fleet.Candidate) (bool, bool, time.Time) { return false, true, time.Now() }
	l := New(Settings{Resident: cold})
	l.Observe(qwen, fleet.TTFTSample{TTFT: 9 * time.Second, Usage: &fleet.Usage{LoadDuration: 8 * time.Second}})
	d, isCold := l.FirstToken(qwen, 60*time.Second)
	if !isCold || d != 60*time.Second+12*time.Second {
		t.Errorf("FirstToken() = %v, %v; want ceiling + 1.5 × the 8s load", d, isCold)
	}
}

func TestWindowKeepsTheNewest(t *testing.T) {
	l := New(Settings{Window: 20})
	for range 20 {
		l.Observe(qwen, fleet.TTFTSample{TTFT: 10 * time.Second})
	}
	for range 20 {
		l.Observe(qwen, fleet.TTFTSample{TTFT: ms(200)})
	}
	if st := l.Stats(qwen.ID); st.N != 20 || st.P99 != ms(200) {
		t.Errorf("Stats() = %+v; want the 20 newest samples only", st)
	}
}

func TestSeedFromHistory(t *testing.T) {
	l := New(Settings{Window: 3})
	l.Seed(qwen.ID, []time.Duration{ms(1), ms(2), ms(3), ms(4)}) // newest first
	if st := l.Stats(qwen.ID); st.N != 3 || st.P99 != ms(3) || st.P50 != ms(2) {
		t.Errorf("Stats() = %+v; want the 3 newest (1, 2, 3 ms)", st)
	}
}

func TestHedgeAfter(t *testing.T) {
	l := New(Settings{})
	if _, ok := l.HedgeAfter(qwen); ok {
		t.Error("HedgeAfter known without samples")
	}
	for i := range 100 {
		l.Observe(qwen, fleet.TTFTSample{TTFT: ms(i + 1)})
	}
	if d, ok := l.HedgeAfter(qwen); !ok || d != ms(95) {
		t.Errorf("HedgeAfter() = %v, %v; want the p95, 95ms", d, ok)
	}
}

// A warm answer reports a millisecond of load_duration; averaging it in
// made the load allowance of a 300 ms cold load fall to ~16 ms, too short
// for the next cold start (docs/DESIGN.md, "First-token deadlines").
func TestWarmAnswersDoNotTeachLoadTime(t *testing.T) {
	cold := func(fleet.Candidate) (bool, bool, time.Time) { return false, true, time.Now() }
	l := New(Settings{Resident: cold})
	l.Observe(qwen, fleet.TTFTSample{TTFT: ms(350), Cold: true, Usage: &fleet.Usage{LoadDuration: ms(300)}})
	for range 30 {
		l.Observe(qwen, fleet.TTFTSample{TTFT: ms(20), Usage: &fleet.Usage{LoadDuration: ms(1)}})
	}
	d, isCold := l.FirstToken(qwen, 2*time.Second)
	// 30 warm samples: the warm deadline is the 2 s floor; plus 1.5 × the
	// one real load.
	if want := 2*time.Second + ms(450); !isCold || d != want {
		t.Errorf("FirstToken() = %v, %v; want %v (warm deadline + 1.5 × the real 300 ms load)", d, isCold, want)
	}
}

// A wait in the server's queue is no sample of its speed.
func TestQueuedSamplesAreNotLearned(t *testing.T) {
	l := New(Settings{})
	for range 20 {
		l.Observe(qwen, fleet.TTFTSample{TTFT: ms(300)})
	}
	for range 10 {
		l.Observe(qwen, fleet.TTFTSample{TTFT: 40 * time.Second, Queued: true})
	}
	if st := l.Stats(qwen.ID); st.N != 20 || st.P99 != ms(300) {
		t.Errorf("Stats() = %+v; want the 20 unqueued samples only", st)
	}
}

// A poll is a few seconds old: a model that answered since the poll that
// said it was not loaded is loaded now, and its answers are warm samples.
func TestAnswerAfterThePollMeansResident(t *testing.T) {
	polled := time.Now()
	l := New(Settings{Resident: func(fleet.Candidate) (bool, bool, time.Time) { return false, true, polled }})
	if _, cold := l.FirstToken(qwen, time.Minute); !cold {
		t.Fatal("before any answer: not cold; want cold, as the poll says")
	}
	l.Observe(qwen, fleet.TTFTSample{TTFT: ms(400), Cold: true, Usage: &fleet.Usage{LoadDuration: ms(350)}})
	if _, cold := l.FirstToken(qwen, time.Minute); cold {
		t.Error("after an answer newer than the poll: cold; want warm")
	}
}

// BenchmarkObserveThenFirstToken is the learner's cost per request at
// concurrency 1: a sample from the last answer, then the next deadline.
func BenchmarkObserveThenFirstToken(b *testing.B) {
	l := New(Settings{})
	c := fleet.Candidate{ID: "a"}
	for i := range 500 {
		l.Observe(c, fleet.TTFTSample{TTFT: time.Duration(i%97+1) * time.Millisecond})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// Samples that vary, as a server's do.
		i++
		l.Observe(c, fleet.TTFTSample{TTFT: time.Duration(i*31%97+1) * time.Millisecond})
		l.FirstToken(c, time.Minute)
	}
}

// The percentiles kept as samples come are those of the window sorted
// afresh, whatever order the samples come in and however often the window
// turned over.
func TestStatsFollowTheWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, window := range []int{1, 3, 20, 200} {
		l := New(Settings{Window: window})
		var all []time.Duration
		for n := range 3*window + 7 {
			d := time.Duration(rng.IntN(50)) * time.Millisecond // repeats too
			if n%5 == 0 {
				d = time.Duration(n) * time.Millisecond
			}
			l.add("a", d)
			all = append(all, d)
			ring := slices.Sorted(slices.Values(all[max(0, len(all)-window):]))
			want := Stats{N: len(ring), P50: pct(ring, 50), P95: pct(ring, 95), P99: pct(ring, 99)}
			if got := l.Stats("a"); got != want {
				t.Fatalf("window %d, after %d samples: Stats = %+v; want %+v", window, n+1, got, want)
			}
		}
	}
}
