package router

import (
	"fmt"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

// Aliases a request may name instead of a candidate id.
const (
	// AliasAuto routes through the default chain.
	AliasAuto = "auto"
)

// entry is one candidate in a request's order. An excluded candidate
// (open breaker, busy back-off) keeps its place with the record of why it
// is skipped, so history lists attempts in the order the router went
// through them.
type entry struct {
	target  Target
	br      *breaker.Breaker
	demoted bool
	reading *fleet.GPUReading
	skip    *fleet.Attempt // set when excluded: the skipped_open or busy record
}

// plan is a request's ordered candidate list (SPEC 2.1).
type plan struct {
	entries   []entry
	preferred string // the first choice before exclusion and demotion
}

// resolve applies the request's model name: it returns the first-choice
// candidate id and whether the name turns thinking mode on.
func (st *state) resolve(model string, thinking bool) (first string, think bool, err error) {
	fl := st.fleet
	switch {
	case model == "" || model == AliasAuto:
		if thinking && fl.DeepThinkingModel != "" {
			return fl.DeepThinkingModel, true, nil
		}
		return fl.DefaultModel, thinking, nil
	case model == fl.DeepThinkingModel:
		return model, true, nil
	}
	if _, ok := st.byID[model]; ok {
		return model, thinking, nil
	}
	// Apps written for one server name its model ("qwen3:8b"); take the
	// first candidate serving it, in priority order.
	for _, t := range st.targets {
		if t.Candidate.Model == model {
			return t.Candidate.ID, thinking, nil
		}
	}
	return "", false, fmt.Errorf("%w %q", fleet.ErrUnknownModel, model)
}

// plan orders the candidates for req (SPEC 2.1): filter, first choice,
// priority then id, exclusion of open breakers and busy back-offs, and
// demotion of candidates under GPU pressure. It sets req.Thinking when the
// model name asks for thinking.
func (r *Router) plan(st *state, req *fleet.Request, now time.Time) (plan, error) {
	first, think, err := st.resolve(req.Model, req.Thinking)
	if err != nil {
		return plan{}, err
	}
	req.Thinking = think

	var p plan
	ordered := make([]Target, 0, len(st.targets))
	if i, ok := st.byID[first]; ok && eligible(st.targets[i].Candidate, think) {
		ordered = append(ordered, st.targets[i])
	}
	for _, t := range st.targets {
		if t.Candidate.ID != first && eligible(t.Candidate, think) {
			ordered = append(ordered, t)
		}
	}
	if len(ordered) == 0 {
		return plan{}, fleet.ErrNoCandidates
	}
	p.preferred = ordered[0].Candidate.ID

	var healthy, demoted []entry
	for _, t := range ordered {
		id := t.Candidate.ID
		br := st.breakers[id]
		if !br.Ready() {
			healthy = append(healthy, entry{target: t, skip: &fleet.Attempt{
				Candidate: id, Outcome: fleet.OutcomeSkippedOpen, StartedAt: now,
				Error: fmt.Sprintf("breaker %s", br.Snapshot().State),
			}})
			continue
		}
		if until, ok := r.busy(id, now); ok {
			healthy = append(healthy, entry{target: t, skip: &fleet.Attempt{
				Candidate: id, Outcome: fleet.OutcomeBusy, StartedAt: now,
				Error: fmt.Sprintf("busy back-off, %v left", until.Sub(now).Round(time.Millisecond)),
			}})
			continue
		}
		e := entry{target: t, br: br}
		if r.deps.Pressure != nil {
			if rd := r.deps.Pressure.Pressure(t.Candidate); rd != nil {
				e.demoted, e.reading = true, rd
				demoted = append(demoted, e)
				continue
			}
		}
		healthy = append(healthy, e)
	}
	p.entries = append(healthy, demoted...)
	return p, nil
}

func eligible(c fleet.Candidate, thinking bool) bool {
	return c.Enabled && (!thinking || c.SupportsThinking)
}
