package router

import (
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// probed is the end of one attempt's probe.
type probed struct {
	a   *attempt
	err error
}

// hedge probes a; when a has no first token by its learned p95 (docs/DESIGN.md,
// "Hedged first token"),
// it starts the next candidate in parallel. The first attempt to produce a
// first token wins; the other is cancelled at once and recorded as
// hedge_lost. At most one hedge per request. It returns the winner, or nil
// when every attempt it ran failed (the caller goes on with the next
// candidate), or a halt when routing must stop. Every attempt it started
// has ended and is recorded when it returns.
func (ru *run) hedge(a *attempt) (*attempt, *halt) {
	after, ok := ru.r.deps.Deadlines.HedgeAfter(a.e.target.Candidate)
	if !ok || after >= a.rec.Deadline {
		if err := a.probe(&ru.req); err != nil {
			return nil, ru.failAttempt(a, err)
		}
		return a, nil
	}
	results := make(chan probed, 2)
	live := []*attempt{a}
	launch := func(x *attempt) { go func() { results <- probed{x, x.probe(&ru.req)} }() }
	launch(a)
	timer := time.NewTimer(after)
	defer timer.Stop()
	hedgeC := timer.C

	var winner *attempt
	var stop *halt
	cancelOthers := func(keep *attempt, cause error) {
		for _, x := range live {
			if x != keep {
				x.cancel(cause)
			}
		}
	}
	for len(live) > 0 {
		select {
		case <-hedgeC:
			hedgeC = nil
			for ru.next < len(ru.plan.entries) && ru.plan.entries[ru.next].skip != nil {
				ru.addAttempt(*ru.plan.entries[ru.next].skip)
				ru.next++
			}
			if ru.next >= len(ru.plan.entries) {
				continue
			}
			e := &ru.plan.entries[ru.next]
			t, ok := e.br.Allow()
			if !ok {
				continue
			}
			ru.next++
			ru.hedged = true
			b := ru.startAttempt(e, t)
			live = append(live, b)
			launch(b)
		case p := <-results:
			live = remove(live, p.a)
			switch {
			case winner != nil || stop != nil:
				// Cancelled by us: it lost the race, or the request stopped.
				ru.failAttempt(p.a, fleet.ErrHedgeLost)
			case p.err == nil:
				winner = p.a
				// Its first token is in: its deadline must not fire while
				// the loser is being shut down.
				winner.stopDeadline()
				cancelOthers(winner, fleet.ErrHedgeLost)
			default:
				if h := ru.failAttempt(p.a, p.err); h != nil {
					stop = h
					cancelOthers(nil, errAttemptOver)
				}
			}
		}
	}
	if stop != nil {
		if winner != nil {
			winner.release()
		}
		return nil, stop
	}
	return winner, nil
}

func remove(live []*attempt, a *attempt) []*attempt {
	for i, x := range live {
		if x == a {
			return append(live[:i], live[i+1:]...)
		}
	}
	return live
}
