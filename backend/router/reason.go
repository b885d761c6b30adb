package router

import (
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Reason says in plain words, naming the candidate, why an attempt did not
// serve its request: "qwen3-8b: GPU 0 had 0.6 GiB free (below 1 GiB),
// tried last", "qwen3-8b stopped before finishing its answer",
// "qwen3-8b was busy with other work", "qwen3-8b: no first token in 2.1s".
// The attempt's Error keeps the raw words for those who want them. It
// decides by the attempt's outcome and fault, never by its error text; a
// successful attempt "answered".
func Reason(a fleet.Attempt) string {
	c := a.Candidate
	switch a.Outcome {
	case fleet.OutcomeSuccess:
		return c + " answered"
	case fleet.OutcomeDemoted:
		return c + ": " + readingWords(a.Reading) + ", tried last"
	case fleet.OutcomeTimeout:
		return fmt.Sprintf("%s: no first token in %v", c, roundDuration(a.Duration))
	case fleet.OutcomeNoContent:
		if a.Fault == fleet.FaultRequest {
			return c + " had nothing to say to this request"
		}
		return c + " sent an empty answer"
	case fleet.OutcomeSkippedOpen:
		if a.Reading != nil && a.Reading.Source == TeamSource {
			return c + " was skipped: other Switchyards of the team see its server failing"
		}
		return c + " was skipped: it failed repeatedly and is cooling down"
	case fleet.OutcomeClientAbort:
		return "the caller went away while " + c + " was answering"
	case fleet.OutcomeFailedAfterCommit:
		return c + " stopped before finishing its answer"
	case fleet.OutcomeHedgeLost:
		return c + " was slower than another candidate asked at the same time"
	case fleet.OutcomeShutdown:
		return c + " was cut short: Switchyard was shutting down"
	}
	switch a.Fault {
	case fleet.FaultQueued:
		return c + " was busy with other work"
	case fleet.FaultBusy:
		return c + " was busy with other work" + httpWords(a.HTTPStatus)
	case fleet.FaultLoading:
		return c + " was still loading its model"
	case fleet.FaultConfig:
		if a.Outcome == fleet.OutcomeNotRetryable {
			return c + " refused Switchyard's credentials"
		}
		return c + ": its server does not have the model"
	case fleet.FaultCapability:
		return c + " can't do what this request asks"
	case fleet.FaultRequest:
		return c + " refused this request" + httpWords(a.HTTPStatus)
	case fleet.FaultClient:
		return "the caller went away while " + c + " was answering"
	}
	switch {
	case a.HTTPStatus > 0:
		return fmt.Sprintf("%s answered with an error (HTTP %d)", c, a.HTTPStatus)
	case a.TTFT > 0:
		// A whole answer that broke after its first token: the request
		// went on, as nothing had reached the caller.
		return c + " stopped before finishing its answer"
	}
	return c + " failed before its first token"
}

// TeamSource is the Source of the reading that demotes or skips a
// candidate for what other nodes of the team report of its server.
const TeamSource = "team"

// readingWords is a demotion's reading in words: the reading's own reason,
// which says what was measured against which limit.
func readingWords(r *fleet.GPUReading) string {
	switch {
	case r == nil:
		return "GPU memory pressure"
	case r.Reason != "":
		return r.Reason
	case r.GPU >= 0:
		return fmt.Sprintf("GPU %d was short of memory", r.GPU)
	}
	return "its server reported memory pressure"
}

// httpWords is " (HTTP 503)", or "" without a status.
func httpWords(status int) string {
	if status == 0 {
		return ""
	}
	return fmt.Sprintf(" (HTTP %d)", status)
}

// FallbackReasonLimit bounds the X-Switchyard-Fallback-Reason header.
const FallbackReasonLimit = 400

// FallbackReason is why a request was served by another than its first
// choice, one line in plain words: the Reason of each attempt that failed
// or was skipped before the serving one, and of each demoted candidate
// whose turn never came, joined by "; "; when none did, that the first
// choice lost a hedge. It is "" when nothing stood in the way. Control characters are spaces; the line is clipped to
// FallbackReasonLimit bytes.
func (m Meta) FallbackReason() string {
	var parts, slower []string
	for _, a := range append(append([]fleet.Attempt(nil), m.Attempts...), m.Demoted...) {
		switch a.Outcome {
		case fleet.OutcomeSuccess:
		case fleet.OutcomeHedgeLost:
			slower = append(slower, Reason(a))
		default:
			parts = append(parts, Reason(a))
		}
	}
	if len(parts) == 0 {
		// Nothing failed: the first choice was only slower than a
		// candidate asked beside it (a hedge), and that is the reason.
		parts = slower
	}
	line := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.Join(parts, "; "))
	if len(line) <= FallbackReasonLimit {
		return line
	}
	return fleet.ClipTo(line, FallbackReasonLimit-len("…"))
}

// demoted are the attempts of the candidates demoted for memory pressure
// whose turn has not come (another serves first), as recordUntried will
// record them.
func (ru *run) demoted() []fleet.Attempt {
	var out []fleet.Attempt
	for _, e := range ru.plan.entries[ru.next:] {
		if e.skip == nil && e.demoted {
			out = append(out, ru.untriedDemoted(e))
		}
	}
	return out
}

// unknownModel is the error for a model name that is neither a candidate,
// a served model nor an alias; it lists the names that are.
func (st *state) unknownModel(model string) error {
	names := []string{AliasAuto}
	for _, t := range st.targets {
		names = append(names, t.Candidate.ID)
	}
	return fmt.Errorf("%w %q: use %s, or a candidate's model name", fleet.ErrUnknownModel, model, strings.Join(names, ", "))
}
