package httpapi

import (
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// The one table from why a request got no answer to the status the caller
// gets and the history keeps.
func TestFailureStatus(t *testing.T) {
	upstream := func(status int) []fleet.Attempt {
		return []fleet.Attempt{{Outcome: fleet.OutcomeError}, {Outcome: fleet.OutcomeNotRetryable, HTTPStatus: status}}
	}
	for _, tt := range []struct {
		failure  fleet.Failure
		attempts []fleet.Attempt
		want     int
	}{
		{fleet.FailureNone, nil, 200},
		{fleet.FailureUnknownModel, nil, 404},
		{fleet.FailureNoCandidates, nil, 503},
		{fleet.FailureUnavailable, upstream(500), 503},
		{fleet.FailureRejected, upstream(413), 413},
		{fleet.FailureRejected, upstream(422), 422},
		{fleet.FailureRejected, nil, 400},
		{fleet.FailureRequest, upstream(400), 400},
		{fleet.FailureRequest, upstream(500), 502},
		{fleet.FailureUpstreamAuth, upstream(401), 502},
		{fleet.FailureClientGone, nil, StatusClientClosed},
	} {
		if got := failureStatus(tt.failure, tt.attempts); got != tt.want {
			t.Errorf("failureStatus(%q, %v) = %d; want %d", tt.failure, tt.attempts, got, tt.want)
		}
	}
	for _, tt := range []struct {
		rec  fleet.RequestRecord
		want int
	}{
		{fleet.RequestRecord{Status: fleet.StatusOK}, 200},
		{fleet.RequestRecord{Status: fleet.StatusUpstreamErrorAfterCommit}, 200},
		{fleet.RequestRecord{Status: fleet.StatusClientAbort, Failure: fleet.FailureClientGone}, 499},
		{fleet.RequestRecord{Status: fleet.StatusFailed, Failure: fleet.FailureUnavailable}, 503},
	} {
		if got := RecordStatus(tt.rec); got != tt.want {
			t.Errorf("RecordStatus(%s/%s) = %d; want %d", tt.rec.Status, tt.rec.Failure, got, tt.want)
		}
	}
}
