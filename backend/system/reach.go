package system

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// History files under $XDG_DATA_HOME/switchyard: the demo's simulated
// requests have their own, so that they never show among real ones.
const (
	HistoryFile     = "history.db"
	DemoHistoryFile = "demo-history.db"
)

func defaultHistoryFile(demo bool) string {
	if demo {
		return DemoHistoryFile
	}
	return HistoryFile
}

// HistoryPath is the history database's file.
func (s *System) HistoryPath() string { return s.historyPath }

// unreachableWords says in a few plain words why a server did not answer:
// "connection refused", "host not found", "no answer in time"; "" when it
// did answer (an HTTP status, whatever it was, is an answer).
func unreachableWords(err error) string {
	var se *fleet.StatusError
	var dns *net.DNSError
	var ne net.Error
	switch {
	case err == nil, errors.As(err, &se):
		return ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dns):
		return "host not found"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	}
	return err.Error()
}

// unreachable says why candidate id's server does not answer its polls,
// and since when; "" while it answers.
func (s *System) unreachable(c fleet.Candidate) (why string, since time.Time) {
	err, since := s.poller.Unreachable(c)
	if why = unreachableWords(err); why == "" {
		return "", time.Time{}
	}
	return why, since
}

// CandidateLines says, one line per enabled candidate, whether its server
// answers and serves its model, asking each server at once (in parallel,
// each bounded by the check's timeouts): what `serve` prints at start-up.
func (s *System) CandidateLines(ctx context.Context) []string {
	var cands []fleet.Candidate
	for _, t := range s.router.Fleet().Targets {
		if t.Candidate.Enabled {
			cands = append(cands, t.Candidate)
		}
	}
	if len(cands) == 0 {
		// Every chat would get 503 "no candidate can serve this request":
		// say why at the start.
		return []string{"no candidate is enabled: nothing can be routed until chat.candidates holds an enabled one (docs/CONFIG.md)"}
	}
	lines := make([]string, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Go(func() {
			r := checkCandidate(ctx, s.ollama, s.openai, c)
			state := "answers and serves its model"
			switch {
			case !r.Answered:
				state = "unreachable (" + unreachableWords(r.Err) + ")"
				if unreachableWords(r.Err) == "" {
					state = "answers with an error (" + r.Detail + ")"
				}
			case !r.OK:
				state = "model not found: " + r.Detail
			}
			lines[i] = fmt.Sprintf("candidate %s (%s %s, model %s): %s", c.ID, c.Provider, c.URL, c.Model, state)
		})
	}
	wg.Wait()
	return lines
}
