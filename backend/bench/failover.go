package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// fastFaults are the faults that strike before the first token and end
// the attempt at once.
var fastFaults = []string{"refuse", "status:500", "error_event", "close_before_first"}

// FailoverRow is the cost of one fault: the TTFT of requests whose
// primary has it, against the TTFT of the fallback serving as first
// choice through the same Switchyard, interleaved.
type FailoverRow struct {
	Fault    string `json:"fault"`
	Failover Timing `json:"failover"`
	Direct   Timing `json:"fallback_first"`
	// Cost is Failover − Direct TTFT.
	Cost Added `json:"cost_ttft"`
	// NotFallback counts answers the fallback did not serve.
	NotFallback int `json:"not_fallback"`
}

// failoverPaths are requests that meet the failing primary first, and
// requests that name the fallback as their first choice.
func failoverPaths(sy *experiment.Switchyard, conns int) []path {
	c := experiment.NewClient(sy.URL()+"/v1", conns)
	return []path{
		{name: "failover", client: c, body: experiment.ChatBody("auto")},
		{name: "fallback first", client: c, body: experiment.ChatBody(upID)},
	}
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
	paths := failoverPaths(sy, 1)
	defer paths[0].client.CloseIdle()
	for _, name := range fastFaults {
		if err := setFault(f, badID, name); err != nil {
			return err
		}
		warm(ctx, paths, 1)
		got := interleave(ctx, paths, 1, b.sz.Failover)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		row := FailoverRow{Fault: name, Failover: timing(got[0]), Direct: timing(got[1])}
		row.Cost = added(row.Failover.TTFT, row.Direct.TTFT)
		for _, a := range got[0] {
			if a.Served != upID || !a.Fallback {
				row.NotFallback++
			}
		}
		b.rep.Failover = append(b.rep.Failover, row)
		b.noteErrors("failover "+name, paths, got)
		b.o.Logf("  %s: failover cost p50 %+.0fµs p99 %+.0fµs", name, row.Cost.P50, row.Cost.P99)
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

// HangResult is a primary that sends headers and then nothing: the first
// token comes from the fallback once the first-token deadline ran out.
type HangResult struct {
	DeadlineMS float64 `json:"deadline_ms"`
	Failover   Timing  `json:"failover"`
	Direct     Timing  `json:"fallback_first"`
	// Beyond is Failover TTFT − deadline − Direct TTFT: what failing over
	// costs on top of the wait itself.
	Beyond      Added `json:"beyond_deadline_ttft"`
	NotFallback int   `json:"not_fallback"`
}

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
	conc := min(8, b.sz.Hang)
	paths := failoverPaths(sy, conc)
	defer paths[0].client.CloseIdle()
	warm(ctx, paths[1:], conc)
	if err := setFault(f, badID, "hang_first_token"); err != nil {
		return err
	}
	got := interleave(ctx, paths, conc, b.sz.Hang)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b.noteErrors("hang", paths, got)
	res := &HangResult{DeadlineMS: float64(d) / float64(time.Millisecond), Failover: timing(got[0]), Direct: timing(got[1])}
	res.Beyond = added(res.Failover.TTFT, res.Direct.TTFT)
	res.Beyond.P50 -= us(d)
	res.Beyond.P99 -= us(d)
	for _, a := range got[0] {
		if a.Served != upID || !a.Fallback {
			res.NotFallback++
		}
	}
	b.rep.Hang = res
	return nil
}

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
	const conc = 4
	paths := failoverPaths(sy, conc)
	defer paths[0].client.CloseIdle()
	warm(ctx, paths[1:], conc)
	if err := setFault(f, badID, "status:500"); err != nil {
		return err
	}
	// Two failures open the breaker.
	for range 2 {
		paths[0].client.Chat(ctx, paths[0].body)
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
		g := interleave(runCtx, paths, conc, 50)
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
		Direct:          timing(finished(got[1])),
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
	res.Skipped = timing(skipped)
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

// firstOutcomes returns the outcome of the first attempt of every request
// the history recorded since since, by request id.
// breakerState is a candidate's breaker state as the status shows it.
func breakerState(sy *experiment.Switchyard, id string) fleet.BreakerState {
	for _, c := range sy.Status().Candidates {
		if c.ID == id {
			return c.Breaker.State
		}
	}
	return ""
}

func firstOutcomes(ctx context.Context, sy *experiment.Switchyard, since time.Time) (map[string]fleet.Outcome, error) {
	out := make(map[string]fleet.Outcome)
	before := ""
	for {
		recs, err := sy.Requests(ctx, history.Filter{Limit: history.MaxLimit, Before: before, Since: since.Add(-time.Second)})
		if err != nil {
			return nil, fmt.Errorf("read history: %w", err)
		}
		for _, r := range recs {
			if len(r.Attempts) > 0 {
				out[r.ID] = r.Attempts[0].Outcome
			}
		}
		if len(recs) < history.MaxLimit {
			return out, nil
		}
		before = recs[len(recs)-1].ID
	}
}
