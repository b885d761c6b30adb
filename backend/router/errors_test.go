package router

import (
	"errors"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// An error names each attempt once: those its cause already names (a
// refused key, a failure the request's own) are not said again (u3
// review).
func TestErrorSaysEachAttemptOnce(t *testing.T) {
	skipped := fleet.Attempt{Candidate: "x", Outcome: fleet.OutcomeBusy, Fault: fleet.FaultBusy, Error: "busy"}
	for _, tt := range []struct {
		name string
		e    Error
		want string
	}{
		{"a refused key", Error{Failure: fleet.FailureUpstreamAuth, Err: errors.New("upstream a refused Switchyard's credentials (check its api_key_env): upstream HTTP 401: bad key"),
			Attempts: []fleet.Attempt{skipped, {Candidate: "a", Outcome: fleet.OutcomeNotRetryable, Fault: fleet.FaultConfig, Error: "upstream HTTP 401: bad key"}}},
			"upstream a refused Switchyard's credentials (check its api_key_env): upstream HTTP 401: bad key: x: busy"},
		{"the request's own failure", Error{Failure: fleet.FailureRequest, Err: errors.New("the request failed the same way on a and b: upstream HTTP 500: bad template"),
			Attempts: []fleet.Attempt{
				{Candidate: "a", Outcome: fleet.OutcomeError, Fault: fleet.FaultRequest, Error: "upstream HTTP 500: bad template"},
				{Candidate: "b", Outcome: fleet.OutcomeError, Fault: fleet.FaultRequest, Error: "upstream HTTP 500: bad template"},
			}},
			"the request failed the same way on a and b: upstream HTTP 500: bad template"},
		{"every candidate failed", Error{Failure: fleet.FailureUnavailable, Err: ErrAllFailed,
			Attempts: []fleet.Attempt{skipped, {Candidate: "a", Outcome: fleet.OutcomeError, Fault: fleet.FaultServer, Error: "refused"}}},
			"all candidates failed: x: busy; a: refused"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%s: Error() = %q; want %q", tt.name, got, tt.want)
		}
	}
}
