package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
)

// ScaleRow is what a history of Requests requests costs, each figure as
// the History screen and the API meet it (issue table of docs/BENCHMARKS.md,
// "History at scale").
type ScaleRow struct {
	Requests int `json:"requests"`
	// From, when set, says which earlier run measured this row
	// (Report.AddScaleFrom).
	From     string `json:"from,omitempty"`
	Attempts int    `json:"attempts"`
	// FillS is how long Store.Import took to write them; FileBytes the
	// database file and WALBytes its WAL afterwards.
	FillS     float64 `json:"fill_s"`
	FileBytes int64   `json:"file_bytes"`
	WALBytes  int64   `json:"wal_bytes"`
	// StartCold and StartWarm: Open to the first page of the list, with
	// the file's pages dropped from the page cache first (when the OS
	// allows it; ColdDropped says) and then again with them cached.
	StartCold   float64 `json:"start_cold_us"`
	StartWarm   float64 `json:"start_warm_us"`
	ColdDropped bool    `json:"cold_dropped"`
	// FirstPage, PageN and Detail: the list's first page, a page a
	// thousand rows back, one request with its attempts.
	FirstPage float64 `json:"first_page_us"`
	PageN     float64 `json:"page_n_us"`
	Detail    float64 `json:"detail_us"`
	// Stats24h and Stats7d: the charts' TTFTSeries and FailoverRate over
	// the last 24 hours (30-minute buckets) and 7 days (3-hour buckets),
	// as the History screen asks for them.
	Stats24h float64 `json:"stats_24h_us"`
	Stats7d  float64 `json:"stats_7d_us"`
	// NothingAll and Nothing7d: a status filter that matches no request,
	// over all time and over the last 7 days; Fallback7d the fallbacks of
	// the last 7 days, first page.
	NothingAll float64 `json:"nothing_all_us"`
	Nothing7d  float64 `json:"nothing_7d_us"`
	Fallback7d float64 `json:"fallback_7d_us"`
	// SweepDay and SweepWeek: a retention sweep of a day's and then a
	// week's requests, with a writer and a reader running beside it; the
	// Wait figures are the longest a reader's first page took meanwhile.
	SweepDay      float64 `json:"sweep_day_us"`
	SweepDayWait  float64 `json:"sweep_day_wait_us"`
	SweepWeek     float64 `json:"sweep_week_us"`
	SweepWeekWait float64 `json:"sweep_week_wait_us"`
	// StartPrune: Open to the first page when a day's sweep is pending.
	StartPrune float64 `json:"start_prune_us"`
	// After the sweeps (about 30 % of the requests gone): the file and
	// its WAL while open, and the file after Close.
	SweptFileBytes  int64 `json:"swept_file_bytes"`
	SweptWALBytes   int64 `json:"swept_wal_bytes"`
	ClosedFileBytes int64 `json:"closed_file_bytes"`
}

// scaleSpan is how far back a filled history reaches, and scaleRetention
// the retention it is opened with: nothing has expired until the clock
// moves on.
const (
	scaleSpan      = 28 * 24 * time.Hour
	scaleRetention = scaleSpan + time.Hour
	scaleBatch     = 5000
)

// scaleCandidates are the fleet the filled history was served by.
var scaleCandidates = []string{"gpu0/llama3.1:8b", "gpu0/qwen2.5:14b", "gpu1/llama3.1:8b", "cpu/phi3:mini", "vllm/mistral-7b"}

func (b *bencher) historyScale(ctx context.Context) error {
	for _, n := range b.sz.HistoryScale {
		b.o.Logf("history at scale: %d requests...", n)
		row, err := b.scaleRow(ctx, n)
		if err != nil {
			if ctx.Err() != nil && row.FillS > 0 {
				// What the budget left time for: the zero figures are
				// not measured.
				b.rep.Scale = append(b.rep.Scale, row)
				b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("history at scale, %d requests: the run's budget ended before every figure was measured; the zero ones were not", n))
			}
			return fmt.Errorf("%d requests: %w", n, err)
		}
		b.rep.Scale = append(b.rep.Scale, row)
	}
	return nil
}

func (b *bencher) scaleRow(ctx context.Context, n int) (ScaleRow, error) {
	row := ScaleRow{Requests: n}
	dir, err := os.MkdirTemp(b.o.TempDir, "switchyard-scale-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "history.db")
	var shift atomic.Int64 // how far the store's clock is ahead
	opts := history.Options{Retention: scaleRetention, Now: func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }}
	store, err := history.Open(file, opts)
	if err != nil {
		return row, err
	}
	defer func() { store.Close() }()

	end := time.Now()
	gen := newScaleGen(n, end)
	start := time.Now()
	for batch := gen.next(scaleBatch); len(batch) > 0; batch = gen.next(scaleBatch) {
		if err := store.Import(ctx, batch); err != nil {
			return row, err
		}
		if err := ctx.Err(); err != nil {
			return row, err
		}
	}
	row.FillS = time.Since(start).Seconds()
	row.Attempts = gen.attempts
	row.FileBytes, row.WALBytes = fileSize(file), fileSize(file+"-wal")

	reopen := func(cold bool) (float64, error) {
		if err := store.Close(); err != nil {
			return 0, err
		}
		if cold {
			row.ColdDropped = dropCache(file) == nil
		}
		t := time.Now()
		s, err := history.Open(file, opts)
		if err != nil {
			return 0, err
		}
		store = s
		if _, err := store.Requests(ctx, history.Filter{Limit: 50}); err != nil {
			return 0, err
		}
		return us(time.Since(t)), nil
	}
	if row.StartCold, err = reopen(true); err != nil {
		return row, err
	}
	if row.StartWarm, err = reopen(false); err != nil {
		return row, err
	}

	week, day := end.Add(-7*24*time.Hour), end.Add(-24*time.Hour)
	yes := true
	page, err := store.Requests(ctx, history.Filter{Limit: 1000})
	if err != nil || len(page) == 0 {
		return row, cmpErr(err, fmt.Errorf("no requests"))
	}
	cursor, some := page[len(page)-1].ID, page[len(page)/2].ID
	for _, q := range []struct {
		into *float64
		run  func() error
	}{
		{&row.FirstPage, func() error { _, err := store.Requests(ctx, history.Filter{Limit: 50}); return err }},
		{&row.PageN, func() error { _, err := store.Requests(ctx, history.Filter{Limit: 50, Before: cursor}); return err }},
		{&row.Detail, func() error { _, err := store.Request(ctx, some); return err }},
		{&row.Stats24h, func() error { return stats(ctx, store, day, 30*time.Minute) }},
		{&row.Stats7d, func() error { return stats(ctx, store, week, 3*time.Hour) }},
		{&row.NothingAll, func() error {
			_, err := store.Requests(ctx, history.Filter{Limit: 50, Status: fleet.StatusUpstreamErrorAfterCommit})
			return err
		}},
		{&row.Nothing7d, func() error {
			_, err := store.Requests(ctx, history.Filter{Limit: 50, Status: fleet.StatusUpstreamErrorAfterCommit, Since: week})
			return err
		}},
		{&row.Fallback7d, func() error {
			_, err := store.Requests(ctx, history.Filter{Limit: 50, Fallback: &yes, Since: week})
			return err
		}},
	} {
		d, err := medianTime(5, q.run)
		if err != nil {
			return row, err
		}
		*q.into = d
	}

	// A day asleep, then a week: the sweeps, beside a writer and a reader.
	shift.Store(int64(25 * time.Hour))
	if row.SweepDay, row.SweepDayWait, err = sweep(ctx, store, gen); err != nil {
		return row, err
	}
	shift.Store(int64(8 * 24 * time.Hour))
	if row.SweepWeek, row.SweepWeekWait, err = sweep(ctx, store, gen); err != nil {
		return row, err
	}
	// A start with a day's sweep pending.
	shift.Store(int64(9 * 24 * time.Hour))
	if row.StartPrune, err = reopen(false); err != nil {
		return row, err
	}
	// What the sweeps gave back, once any background work is done.
	if _, err := store.Prune(ctx); err != nil {
		return row, err
	}
	row.SweptFileBytes, row.SweptWALBytes = fileSize(file), fileSize(file+"-wal")
	if err := store.Close(); err != nil {
		return row, err
	}
	row.ClosedFileBytes = fileSize(file)
	store, err = history.Open(file, opts) // for the deferred Close
	return row, err
}

// stats asks for what the History screen's charts show.
func stats(ctx context.Context, store *history.Store, since time.Time, bucket time.Duration) error {
	if _, err := store.TTFTSeries(ctx, since, bucket); err != nil {
		return err
	}
	_, err := store.FailoverRate(ctx, since, bucket)
	return err
}

// sweep runs a Prune while a writer records a request every 5 ms and a
// reader asks for the first page, back to back; it returns how long the
// Prune took and the longest the reader waited for a page meanwhile.
func sweep(ctx context.Context, store *history.Store, gen *scaleGen) (took, longest float64, err error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var worst atomic.Int64
	var first atomic.Value
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if err := store.Record(ctx, gen.live()); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			t := time.Now()
			if _, err := store.Requests(ctx, history.Filter{Limit: 50}); err != nil {
				first.CompareAndSwap(nil, err)
				return
			}
			d := int64(time.Since(t))
			for w := worst.Load(); d > w && !worst.CompareAndSwap(w, d); w = worst.Load() {
			}
			time.Sleep(time.Millisecond)
		}
	})
	time.Sleep(50 * time.Millisecond) // both running
	worst.Store(0)
	t := time.Now()
	_, err = store.Prune(ctx)
	took = us(time.Since(t))
	close(stop)
	wg.Wait()
	if e, ok := first.Load().(error); ok && err == nil {
		err = e
	}
	return took, us(time.Duration(worst.Load())), err
}

// medianTime runs f k times and returns the median time it took.
func medianTime(k int, f func() error) (float64, error) {
	ds := make([]time.Duration, k)
	for i := range ds {
		t := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ds[i] = time.Since(t)
	}
	slices.Sort(ds)
	return us(ds[k/2]), nil
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// scaleGen makes the requests of a filled history: n of them spread
// evenly (with jitter) over scaleSpan before end, oldest first, served by
// scaleCandidates much as a small fleet serves them. About 88 % succeed at
// the first try, 10 % after a failover (1.13 attempts a request in all),
// 1 % fail on every candidate and 1 % are aborted by the client; none ends
// in an error after commit, so a filter on that status matches nothing.
// It is deterministic: the same n and end give the same records.
type scaleGen struct {
	n, i     int
	attempts int
	end      time.Time
	rng      *rand.Rand
	lives    atomic.Int64
}

func newScaleGen(n int, end time.Time) *scaleGen {
	return &scaleGen{n: n, end: end, rng: rand.New(rand.NewPCG(uint64(n), 24))}
}

// next returns the next k records, or none when all n are made.
func (g *scaleGen) next(k int) []fleet.RequestRecord {
	var out []fleet.RequestRecord
	step := float64(scaleSpan) / float64(g.n)
	for ; g.i < g.n && len(out) < k; g.i++ {
		at := g.end.Add(-scaleSpan + time.Duration((float64(g.i)+g.rng.Float64())*step))
		r := g.record(fmt.Sprintf("req-%09d", g.i), at, g.rng)
		g.attempts += len(r.Attempts)
		out = append(out, r)
	}
	return out
}

// live is a request that starts now, for the writer beside a sweep.
func (g *scaleGen) live() fleet.RequestRecord {
	i := g.lives.Add(1)
	return g.record(fmt.Sprintf("live-%09d", i), time.Now(), rand.New(rand.NewPCG(uint64(i), 7)))
}

func (g *scaleGen) record(id string, at time.Time, rng *rand.Rand) fleet.RequestRecord {
	first := rng.IntN(len(scaleCandidates))
	ttft := func() time.Duration {
		// Log-normal around 350 ms, as a warm 8B model on a GPU answers.
		return time.Duration(math.Exp(math.Log(350)+0.6*rng.NormFloat64()) * float64(time.Millisecond))
	}
	r := fleet.RequestRecord{
		ID: id, StartedAt: at, Protocol: fleet.ProtocolOpenAI, Stream: rng.IntN(4) > 0,
		RequestedModel: "auto", Status: fleet.StatusOK, HTTPStatus: 200,
		PromptTokens: 50 + rng.IntN(2000), CompletionTokens: 20 + rng.IntN(800),
	}
	if rng.IntN(3) == 0 {
		r.Protocol = fleet.ProtocolOllama
	}
	tries := 1
	p := rng.Float64()
	switch {
	case p < 0.10:
		tries = 2
	case p < 0.12:
		tries = 3
	}
	failAll := p >= 0.11 && p < 0.12 // half the three-try requests: 1 % in all
	abort := p >= 0.99
	t := at
	for k := range tries {
		c := scaleCandidates[(first+k)%len(scaleCandidates)]
		a := fleet.Attempt{Candidate: c, StartedAt: t, Deadline: 30 * time.Second}
		last := k == tries-1
		switch {
		case last && abort:
			a.Outcome, a.Fault, a.Duration = fleet.OutcomeClientAbort, fleet.FaultClient, time.Duration(rng.IntN(2000))*time.Millisecond
		case last && !failAll:
			a.Outcome, a.TTFT = fleet.OutcomeSuccess, ttft()
			a.Duration = a.TTFT + time.Duration(rng.IntN(20000))*time.Millisecond
			a.Cold = rng.IntN(50) == 0
		case rng.IntN(3) == 0:
			a.Outcome, a.Fault, a.Duration = fleet.OutcomeTimeout, fleet.FaultServer, a.Deadline
			a.Error = "no first token within the deadline"
		default:
			a.Outcome, a.Fault, a.HTTPStatus = fleet.OutcomeError, fleet.FaultServer, 503
			a.Error, a.Duration = "HTTP 503: model is loading", time.Duration(5+rng.IntN(50))*time.Millisecond
		}
		r.Attempts = append(r.Attempts, a)
		t = t.Add(a.Duration)
	}
	last := r.Attempts[len(r.Attempts)-1]
	r.Latency = t.Sub(at)
	switch last.Outcome {
	case fleet.OutcomeSuccess:
		r.ServedCandidate, r.ServedModel, r.IsFallback = last.Candidate, last.Candidate, tries > 1
		r.TTFT = t.Sub(at) - last.Duration + last.TTFT
	case fleet.OutcomeClientAbort:
		r.Status, r.HTTPStatus, r.Failure = fleet.StatusClientAbort, 0, fleet.FailureClientGone
	default:
		r.Status, r.HTTPStatus, r.Failure, r.Error = fleet.StatusFailed, 503, fleet.FailureUnavailable, last.Error
	}
	return r
}

// AddScaleFrom adds the history-scale rows of an earlier run (make
// bench-history's) for the sizes this run did not measure, each saying
// where it comes from, so that one table holds the whole growth curve.
func (r *Report) AddScaleFrom(earlier *Report, name string) {
	for _, row := range earlier.Scale {
		if slices.ContainsFunc(r.Scale, func(x ScaleRow) bool { return x.Requests == row.Requests }) {
			continue
		}
		if row.From == "" {
			row.From = fmt.Sprintf("%s of %s", name, earlier.Started.Format("2006-01-02"))
		}
		r.Scale = append(r.Scale, row)
	}
	slices.SortFunc(r.Scale, func(a, b ScaleRow) int { return a.Requests - b.Requests })
}
