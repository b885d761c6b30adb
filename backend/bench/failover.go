package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// fastFaults are the faults that strike before the first token and end
// the attempt at once.
var fastFaults = []string{"refuse", "status:500", "error_event", "close_before_first"}

// afterFirstFault strikes after the first token: final for a stream (the
// caller has its first tokens), failed over for a whole answer, of which
// the caller has seen nothing yet (docs/DESIGN.md, "Non-streaming
// requests"). The upstream sends upTokens tokens; it dies halfway.
var afterFirstFault = fmt.Sprintf("die_after:%d", upTokens/2)

// FailoverRow is the cost of one fault to streamed or whole answers: the
// latency of requests whose primary has it, against that of the fallback
// serving as first choice through the same Switchyard, interleaved. Costs
// are of the TTFT for a stream and of the total latency for a whole
// answer, which has no TTFT.
type FailoverRow struct {
	Fault  string `json:"fault"`
	Stream bool   `json:"stream"`
	// DeadlineMS is Switchyard's first-token deadline for a primary that
	// never sends a first token (hang_first_token), 0 for the faults that
	// end an attempt by themselves.
	DeadlineMS float64 `json:"deadline_ms,omitempty"`
	Failover   Timing  `json:"failover"`
	Direct     Timing  `json:"fallback_first"`
	// Cost is Failover − Direct − the deadline: what failing over costs
	// on top of any wait for the deadline.
	Cost Added `json:"cost"`
	// NotFallback counts answers the fallback did not serve.
	NotFallback int `json:"not_fallback"`
}

// failoverPaths are, for each mode, requests that meet the failing
// primary first and requests that name the fallback as their first
// choice.
func failoverPaths(sy *experiment.Switchyard, conns int, modes ...bool) []path {
	c := experiment.NewClient(sy.URL()+"/v1", conns)
	var ps []path
	for _, stream := range modes {
		ps = append(ps, newPath("failover", c, "auto", stream), newPath("fallback first", c, upID, stream))
	}
	return ps
}

// failoverRows turns the answers to failoverPaths into one row per mode.
func failoverRows(fault string, deadline time.Duration, paths []path, got [][]experiment.Answer) []FailoverRow {
	var rows []FailoverRow
	for i := 0; i+1 < len(paths); i += 2 {
		stream := paths[i].stream
		row := FailoverRow{Fault: fault, Stream: stream, DeadlineMS: float64(deadline) / float64(time.Millisecond),
			Failover: timing(got[i], stream), Direct: timing(got[i+1], stream)}
		if stream {
			row.Cost = added(row.Failover.TTFT, row.Direct.TTFT)
		} else {
			row.Cost = added(row.Failover.Total, row.Direct.Total)
		}
		row.Cost.P50 -= us(deadline)
		row.Cost.P99 -= us(deadline)
		for _, a := range got[i] {
			if a.Served != upID || !a.Fallback {
				row.NotFallback++
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func (b *bencher) failover(ctx context.Context) error {
	f, err := fastFleet()
	if err != nil {
		return err
	}
	defer f.Close()
	sy, err := b.switchyard(ctx, f, map[string]string{"failure_threshold": neverOpen})
	if err != nil {
		return err
	}
	defer sy.Close()
	both := failoverPaths(sy, 1, modes...)
	defer both[0].client.CloseIdle()
	for _, name := range append(slices.Clone(fastFaults), afterFirstFault) {
		paths := both
		if name == afterFirstFault {
			paths = both[2:] // whole answers only
		}
		if err := setFault(f, badID, name); err != nil {
			return err
		}
		warm(ctx, paths, 1)
		got := interleave(ctx, paths, 1, b.sz.Failover)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, row := range failoverRows(name, 0, paths, got) {
			b.rep.Failover = append(b.rep.Failover, row)
			b.o.Logf("  %s %s: failover cost p50 %+.0fµs p99 %+.0fµs", name, modeName(row.Stream), row.Cost.P50, row.Cost.P99)
		}
		b.noteErrors("failover "+name, paths, got)
	}
	return setFault(f, badID, "healthy")
}

func setFault(f *simfleet.Fleet, id, name string) error {
	fault, err := simfleet.ParseFault(name)
	if err != nil {
		return err
	}
	return f.SetFault(id, fault)
}

// hang is a primary that sends headers and then nothing: the first token
// comes from the fallback once the first-token deadline ran out. Its rows
// join the failover rows.
func (b *bencher) hang(ctx context.Context) error {
	f, err := fastFleet()
	if err != nil {
		return err
	}
	defer f.Close()
	d := b.sz.HangDeadline
	sy, err := b.switchyard(ctx, f, map[string]string{
		"failure_threshold": neverOpen, "first_token_timeout": d.String(), "deadline_floor": d.String(),
	})
	if err != nil {
		return err
	}
	defer sy.Close()
	conc := min(hangConcurrency, b.sz.Hang)
	paths := failoverPaths(sy, conc, modes...)
	defer paths[0].client.CloseIdle()
	warm(ctx, []path{paths[1], paths[3]}, conc)
	if err := setFault(f, badID, "hang_first_token"); err != nil {
		return err
	}
	got := interleave(ctx, paths, conc, b.sz.Hang)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b.noteErrors("hang", paths, got)
	b.rep.Failover = append(b.rep.Failover, failoverRows("hang_first_token", d, paths, got)...)
	return nil
}

// hangConcurrency is the most requests in flight in the hang section, so
// that it waits for the deadline a few times at once.
const hangConcurrency = 8

// BreakerResult is a primary failing fast (HTTP 500) with a breaker that
// opens at the second failure and cools down for OpenDuration: requests
// whose primary the open breaker skipped, against requests that name the
// fallback first, interleaved, for a few cool-downs.
type BreakerResult struct {
	OpenDurationMS float64 `json:"open_duration_ms"`
	RanS           float64 `json:"ran_s"`
	// Skipped are the requests whose primary was skipped (skipped_open);
	// Probed the ones that tried it (the half-open probes).
	Skipped Timing `json:"skipped"`
	Probed  int    `json:"probed"`
	Direct  Timing `json:"fallback_first"`
	// Extra is Skipped − Direct TTFT.
	Extra Added `json:"extra_ttft"`
	// PrimaryRequests is what the primary server received while the run
	// went on; CoolDowns the cool-downs that ended in that time, each of
	// which admits one probe.
	PrimaryRequests int `json:"primary_requests"`
	CoolDowns       int `json:"cool_downs"`
}

// breakerConcurrency is the requests in flight in the breaker section.
const breakerConcurrency = 4

func (b *bencher) breaker(ctx context.Context) error {
	f, err := fastFleet()
	if err != nil {
		return err
	}
	defer f.Close()
	sy, err := b.switchyard(ctx, f, map[string]string{
		"failure_threshold": "2", "open_duration": b.sz.OpenDuration.String(),
	})
	if err != nil {
		return err
	}
	defer sy.Close()
	paths := failoverPaths(sy, breakerConcurrency, true)
	defer paths[0].client.CloseIdle()
	warm(ctx, paths[1:], breakerConcurrency)
	if err := setFault(f, badID, "status:500"); err != nil {
		return err
	}
	// Two failures open the breaker.
	for range 2 {
		paths[0].send(ctx)
	}
	if st := breakerState(sy, badID); st == fleet.BreakerClosed {
		return fmt.Errorf("the primary's breaker is %s after two failures; want it open", st)
	}
	before := f.Server(badID).Stats().Requests
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, b.sz.BreakerFor)
	var got [][]experiment.Answer
	for runCtx.Err() == nil {
		// Rounds of a bounded size, until the time is up.
		g := interleave(runCtx, paths, breakerConcurrency, 50)
		if got == nil {
			got = g
			continue
		}
		for i := range g {
			got[i] = append(got[i], g[i]...)
		}
	}
	cancel()
	ran := time.Since(start)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	res := &BreakerResult{
		OpenDurationMS:  float64(b.sz.OpenDuration) / float64(time.Millisecond),
		RanS:            ran.Seconds(),
		PrimaryRequests: f.Server(badID).Stats().Requests - before,
		CoolDowns:       int(ran / b.sz.OpenDuration),
		Direct:          timing(finished(got[1]), true),
	}
	first, err := firstOutcomes(ctx, sy, start)
	if err != nil {
		return err
	}
	var skipped []experiment.Answer
	for _, a := range finished(got[0]) {
		switch first[a.RequestID] {
		case fleet.OutcomeSkippedOpen:
			skipped = append(skipped, a)
		case "":
			return fmt.Errorf("request %s is not in the history", a.RequestID)
		default:
			res.Probed++
		}
	}
	res.Skipped = timing(skipped, true)
	res.Extra = added(res.Skipped.TTFT, res.Direct.TTFT)
	b.rep.Breaker = res
	return nil
}

// finished drops the answers cut short by the end of the run (or never
// sent).
func finished(answers []experiment.Answer) []experiment.Answer {
	var out []experiment.Answer
	for _, a := range answers {
		if a.Err == nil && a.Latency > 0 {
			out = append(out, a)
		}
	}
	return out
}

// breakerState is a candidate's breaker state as the status shows it.
func breakerState(sy *experiment.Switchyard, id string) fleet.BreakerState {
	for _, c := range sy.Status().Candidates {
		if c.ID == id {
			return c.Breaker.State
		}
	}
	return ""
}

// firstOutcomes returns the outcome of the first attempt of every request
// the history recorded since since, by request id.
func firstOutcomes(ctx context.Context, sy *experiment.Switchyard, since time.Time) (map[string]fleet.Outcome, error) {
	out := make(map[string]fleet.Outcome)
	err := eachRecord(ctx, sy, since, func(r fleet.RequestRecord) {
		if len(r.Attempts) > 0 {
			out[r.ID] = r.Attempts[0].Outcome
		}
	})
	return out, err
}

// eachRecord calls fn with every request the history recorded since since.
func eachRecord(ctx context.Context, sy *experiment.Switchyard, since time.Time, fn func(fleet.RequestRecord)) error {
	before := ""
	for {
		recs, err := sy.Requests(ctx, history.Filter{Limit: history.MaxLimit, Before: before, Since: since.Add(-time.Second)})
		if err != nil {
			return fmt.Errorf("read history: %w", err)
		}
		for _, r := range recs {
			fn(r)
		}
		if len(recs) < history.MaxLimit {
			return nil
		}
		before = recs[len(recs)-1].ID
	}
}
