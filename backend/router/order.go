package router

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
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
// (open breaker, busy back-off, loading, model missing) keeps its place
// with the record of why it is skipped, so history lists attempts in the
// order the router went through them.
type entry struct {
	target  *Target // in the state's targets, which no one changes
	br      *breaker.Breaker
	demoted bool
	reading *fleet.GPUReading
	skip    *fleet.Attempt // set when excluded: the record of why
}

// plan is a request's ordered candidate list (docs/DESIGN.md, "Candidate
// order").
type plan struct {
	entries   []entry
	preferred string // the first choice before exclusion and demotion
	thinking  bool   // the request is in thinking mode
}

// resolve applies the request's model name: it returns the first-choice
// candidate id and whether the name turns thinking mode on.
func (st *state) resolve(model string, thinking bool) (first string, think bool, err error) {
	fl := st.fleet
	// Ollama's clients name models with their tag (/api/tags lists
	// "auto:latest"): an alias or id without one is the same name.
	if base, ok := strings.CutSuffix(model, ":latest"); ok {
		if _, id := st.byID[base]; id || base == AliasAuto || base == fl.DeepThinkingModel {
			model = base
		}
	}
	if _, id := st.byID[model]; !id && model != AliasAuto && model != fl.DeepThinkingModel {
		// Ollama matches names without regard to case, and its clients
		// show Switchyard's ids as model names: "QWEN3-8B" or
		// "Auto:latest" is the id or alias, an exact one first.
		model = st.foldName(model)
	}
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
		if fleet.SameModel(t.Candidate.Model, model) {
			return t.Candidate.ID, thinking, nil
		}
	}
	return "", false, st.unknownModel(model)
}

// foldName is the alias or candidate id that model names regardless of
// case and of a ":latest" tag, in priority order; else model.
func (st *state) foldName(model string) string {
	base := model
	if i := strings.LastIndexByte(model, ':'); i >= 0 && strings.EqualFold(model[i:], ":latest") {
		base = model[:i]
	}
	for _, n := range [...]string{AliasAuto, st.fleet.DeepThinkingModel} {
		if n != "" && strings.EqualFold(n, base) {
			return n
		}
	}
	for _, t := range st.targets {
		if strings.EqualFold(t.Candidate.ID, base) {
			return t.Candidate.ID
		}
	}
	return model
}

// plan orders the candidates for req (docs/DESIGN.md, "Candidate order"):
// filter, first choice, priority then id, exclusion of open breakers, busy
// and loading servers, missing models and capabilities, and demotion of
// candidates under GPU pressure. A server that is full keeps its place:
// the request waits in its queue up to the learned deadline, then moves on.
func (r *Router) plan(st *state, req *fleet.Request, now time.Time) (plan, error) {
	ordered, think, err := st.order(req)
	if err != nil {
		return plan{}, err
	}
	if st.fleet.Settings.Balance != BalanceOrdered {
		r.balance(st, req, ordered, now)
	}
	p := plan{thinking: think}
	if len(ordered) == 0 && think && slices.ContainsFunc(st.targets, func(t Target) bool { return eligible(t.Candidate, false) }) {
		// Candidates there are, none that reasons: no wait makes one, so
		// the caller is told, as Ollama tells it (400 "does not support
		// thinking"), not asked to retry.
		return plan{}, fmt.Errorf("%w: no candidate supports thinking (set supports_thinking: true on a candidate whose model reasons; an Ollama model's own capabilities are read from its server)", ErrUnsupported)
	}
	if len(ordered) == 0 {
		return plan{}, fleet.ErrNoCandidates
	}
	p.preferred = ordered[0].Candidate.ID

	// Demoted candidates go last; excluded ones keep their place, for
	// the record.
	// ready has room for all: demoted ones are appended to it.
	ready, demoted := make([]entry, 0, len(ordered)), []entry(nil)
	for _, t := range ordered {
		c := &t.Candidate
		br := st.breakers[c.ID]
		if skip := r.exclusion(t, br, req, think, now); skip != nil {
			ready = append(ready, entry{target: t, skip: skip})
			continue
		}
		e := entry{target: t, br: br}
		if r.deps.Pressure != nil {
			if rd := r.deps.Pressure.Pressure(*c); rd != nil {
				e.demoted, e.reading = true, rd
				demoted = append(demoted, e)
				continue
			}
		}
		if rm := r.remote(*c, now); rm.Suspect {
			// Demoted as GPU pressure is, the reason on record.
			e.demoted, e.reading = true, &fleet.GPUReading{GPU: -1, Source: TeamSource, Reason: rm.Reason}
			demoted = append(demoted, e)
			continue
		}
		ready = append(ready, e)
	}
	p.entries = append(ready, demoted...)
	return p, nil
}

// exclusion is the record of why t is skipped for req, nil when it may be
// tried: an open breaker, other nodes' reports, a missing model or
// capability, a loading or busy server. Apart from plan, which runs on
// the handler's goroutine: with the record built at each of its six
// reasons, plan's frame was 3.5 KiB, and it made the stack of every
// request outgrow 8 KiB, the stack an open stream then holds.
//
//go:noinline
func (r *Router) exclusion(t *Target, br *breaker.Breaker, req *fleet.Request, think bool, now time.Time) *fleet.Attempt {
	c := &t.Candidate
	var (
		o      fleet.Outcome
		f      fleet.Fault
		reason string
	)
	if !br.Ready() {
		o, reason = fleet.OutcomeSkippedOpen, "breaker "+string(br.Snapshot().State)
	} else if rm := r.remote(*c, now); rm.Out {
		a := &fleet.Attempt{Candidate: c.ID, Outcome: fleet.OutcomeSkippedOpen, StartedAt: now, Error: "other nodes report it failing: " + rm.Reason}
		a.Reading = &fleet.GPUReading{GPU: -1, Source: TeamSource, Reason: rm.Reason} // what Reason words
		return a
	} else {
		v := r.view(*c, now)
		switch {
		case v.missing != "" && now.Sub(r.missingSince(c.ID)) < MissingRecheck:
			o, f, reason = fleet.OutcomeError, fleet.FaultConfig, "skipped: "+v.missing
		case lacking(*c, v.lacks, req, think) != "":
			o, f, reason = fleet.OutcomeError, fleet.FaultCapability, "skipped: the model does not support "+lacking(*c, v.lacks, req, think)
		case refused(*t, req) != nil:
			o, f, reason = fleet.OutcomeError, fleet.FaultCapability, fmt.Sprintf("skipped: %v", refused(*t, req))
		case v.loading:
			o, f, reason = fleet.OutcomeBusy, fleet.FaultLoading, "skipped: the server is loading the model"
		case v.busyFor > 0:
			o, f, reason = fleet.OutcomeBusy, fleet.FaultBusy, fmt.Sprintf("busy back-off, %v left", v.busyFor.Round(time.Millisecond))
		default:
			return nil
		}
	}
	return &fleet.Attempt{Candidate: c.ID, Outcome: o, Fault: f, StartedAt: now, Error: reason}
}

// balance orders each band of ordered (candidates of equal priority, in
// id order) by the first token predicted soonest (docs/DESIGN.md,
// "Bands"). A first choice the request named by its id keeps its place; a
// first choice by alias or by model name shares it with the candidates of
// its priority that serve the same model. It reads memory only.
func (r *Router) balance(st *state, req *fleet.Request, ordered []*Target, now time.Time) {
	if len(ordered) < 2 {
		return
	}
	rest := ordered
	if _, named := st.byID[strings.TrimSuffix(req.Model, ":latest")]; named || req.KindOf() == fleet.KindEmbed {
		rest = ordered[1:]
	} else {
		// The first choice's band: its priority, its model.
		first := ordered[0].Candidate
		n := 1
		for i := 1; i < len(ordered); i++ {
			c := ordered[i].Candidate
			if c.Priority == first.Priority && fleet.SameModel(c.Model, first.Model) {
				ordered[n], ordered[i] = ordered[i], ordered[n]
				n++
			}
		}
		slices.SortStableFunc(ordered[1:n], func(a, b *Target) int { return cmp.Compare(a.Candidate.ID, b.Candidate.ID) })
		r.sortBand(ordered[:n], now)
		rest = ordered[n:]
	}
	for len(rest) > 0 {
		n := 1
		for n < len(rest) && rest[n].Candidate.Priority == rest[0].Candidate.Priority {
			n++
		}
		r.sortBand(rest[:n], now)
		rest = rest[n:]
	}
}

// sortBand orders band by the predicted time to its first token, the id
// order kept for ties. A member nobody has timed yet is predicted as fast
// as the fastest timed one, so it gets to show what it does, and no
// faster: its queue counts as any other's.
func (r *Router) sortBand(band []*Target, now time.Time) {
	if len(band) < 2 {
		return
	}
	type guess struct{ warm, load time.Duration }
	guesses := make(map[string]guess, len(band))
	var fastest time.Duration
	for _, t := range band {
		warm, load := r.deps.Deadlines.Predict(t.Candidate)
		guesses[t.Candidate.ID] = guess{warm, load}
		if warm > 0 && (fastest == 0 || warm < fastest) {
			fastest = warm
		}
	}
	eta := make(map[string]time.Duration, len(band))
	for _, t := range band {
		g := guesses[t.Candidate.ID]
		if g.warm == 0 {
			g.warm = fastest
		}
		eta[t.Candidate.ID] = r.predict(t.Candidate, now, g.warm, g.load)
	}
	slices.SortStableFunc(band, func(a, b *Target) int { return cmp.Compare(eta[a.Candidate.ID], eta[b.Candidate.ID]) })
}

// minService is the least a request ahead in a queue is taken to cost: a
// generation on a real server rarely ends within a second, and a request
// of another client, whose length nobody here knows, may run far longer.
const minService = time.Second

// predict is when c would give a new request its first token: the load
// of a model that is not resident, the wait for the requests ahead of it
// in its server's queue, from every client as far as the server shows it
// (Switchyard's own running requests, what the server reports running and
// waiting), then its warm TTFT. Each request ahead costs what c's answers
// take (marks.service), and at least minService; a server of unknown
// capacity is taken to run one at a time, so that among servers that say
// nothing the one with the fewest requests goes first.
func (r *Router) predict(c fleet.Candidate, now time.Time, warm, load time.Duration) time.Duration {
	v := r.view(c, now)
	running, waiting := v.inflight, 0
	if v.reported {
		running, waiting = max(running, v.running), v.waiting
	}
	slots := max(v.slots, 1)
	ahead := max(running+waiting-slots+1, 0)
	m := r.mark(c.ID)
	r.marksMu.Lock()
	service := max(m.service, minService)
	r.marksMu.Unlock()
	return load + time.Duration(ahead)*service/time.Duration(slots) + warm
}

func (r *Router) missingSince(id string) time.Time {
	m := r.mark(id)
	r.marksMu.Lock()
	defer r.marksMu.Unlock()
	return m.missingSince
}

// order is the candidates req may go to, first choice first, and whether
// it is routed in thinking mode. A chat or a generation goes to the first
// choice, then to every other enabled candidate that can answer it. An
// embedding goes only to candidates of the same model as the first choice:
// another model's vectors live in another space, and mixing them would
// spoil the caller's index.
func (st *state) order(req *fleet.Request) ([]*Target, bool, error) {
	if req.KindOf() == fleet.KindEmbed {
		return st.embedOrder(req.Model)
	}
	first, think, err := st.resolve(req.Model, req.Thinking)
	if err != nil {
		return nil, false, err
	}
	ordered := make([]*Target, 0, len(st.targets))
	if i, ok := st.byID[first]; ok {
		// Named, an embedding model keeps its place to be skipped with
		// the reason on record.
		if c := st.targets[i].Candidate; eligible(c, think) || (c.Enabled && c.EmbedOnly) {
			ordered = append(ordered, &st.targets[i])
		}
	}
	for i := range st.targets {
		if t := &st.targets[i]; t.Candidate.ID != first && eligible(t.Candidate, think) {
			ordered = append(ordered, t)
		}
	}
	return ordered, think, nil
}

// embedOrder is the order of an embedding request: for "auto" the first
// candidate known to embed, else the one named; then the other candidates
// serving the same model.
func (st *state) embedOrder(model string) ([]*Target, bool, error) {
	var first *Target
	if model == "" || model == AliasAuto {
		i := slices.IndexFunc(st.targets, func(t Target) bool { return t.Candidate.Enabled && t.Candidate.Embeds })
		if i < 0 {
			return nil, false, fmt.Errorf("%w: no candidate is known to make embeddings; name an embedding model, or set embeddings: true on its candidate", fleet.ErrNoCandidates)
		}
		first = &st.targets[i]
	} else {
		id, _, err := st.resolve(model, false)
		if err != nil {
			return nil, false, err
		}
		first = &st.targets[st.byID[id]]
	}
	ordered := []*Target{first}
	for i := range st.targets {
		t := &st.targets[i]
		c := t.Candidate
		if c.ID != first.Candidate.ID && c.Enabled && fleet.SameModel(c.Model, first.Candidate.Model) {
			ordered = append(ordered, t)
		}
	}
	if !first.Candidate.Enabled {
		ordered = ordered[1:]
	}
	return ordered, false, nil
}

// lacking returns what req needs that c's model lacks, as the config or
// its server said ("thinking", "tools", "vision", "embedding",
// "completion", "insert", or an endpoint: endpointOf), or "".
func lacking(c fleet.Candidate, lacks map[string]bool, req *fleet.Request, thinking bool) string {
	kind := req.KindOf()
	switch {
	case kind == fleet.KindEmbed:
		if lacks["embedding"] {
			return "embedding"
		}
		return ""
	case c.EmbedOnly || lacks["completion"]:
		return "completion (it makes embeddings only)"
	}
	switch {
	case thinking && lacks["thinking"]:
		return "thinking"
	case len(req.Tools) > 0 && lacks["tools"]:
		return "tools"
	case lacks["vision"] && hasImages(req):
		return "vision"
	case kind == fleet.KindGenerate && req.Suffix != "" && lacks["insert"]:
		return "insert (a suffix)"
	case lacks[endpointOf(kind)]:
		return string(kind) + " requests (its server has no endpoint for them)"
	}
	return ""
}

// refused is why t's adapter can't carry req to t's candidate unchanged
// (fleet.Checker), nil when it can.
func refused(t Target, req *fleet.Request) error {
	if ch, ok := t.Backend.(fleet.Checker); ok {
		return ch.Check(t.Candidate, req)
	}
	return nil
}

func hasImages(req *fleet.Request) bool {
	if len(req.Images) > 0 {
		return true
	}
	for _, m := range req.Messages {
		if len(m.Images) > 0 {
			return true
		}
	}
	return false
}

// eligible reports whether c is in the chain of a chat or a generation.
func eligible(c fleet.Candidate, thinking bool) bool {
	return c.Enabled && !c.EmbedOnly && (!thinking || c.SupportsThinking)
}
