package httpapi

import (
	"context"
	"net/http"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// StatusClientClosed is the status recorded for a caller that went away
// before its answer (nginx's 499).
const StatusClientClosed = 499

// failureStatus is the one table from why a request got no answer to the
// HTTP status the caller gets in either protocol and the history keeps.
func failureStatus(f fleet.Failure, attempts []fleet.Attempt) int {
	switch f {
	case fleet.FailureNone:
		return http.StatusOK
	case fleet.FailureUnknownModel:
		return http.StatusNotFound
	case fleet.FailureNoCandidates, fleet.FailureUnavailable:
		return http.StatusServiceUnavailable
	case fleet.FailureRejected, fleet.FailureRequest:
		// The upstream's own 4xx says what is wrong with the request; a
		// 5xx that every server gives this request is a bad answer from
		// upstream.
		if st := lastUpstreamStatus(attempts); st >= 400 && st < 500 {
			return st
		}
		if f == fleet.FailureRejected {
			return http.StatusBadRequest
		}
		return http.StatusBadGateway
	case fleet.FailureUnsupported:
		return http.StatusBadRequest
	case fleet.FailureUpstreamAuth:
		return http.StatusBadGateway // Switchyard's credentials, not the caller's
	case fleet.FailureClientGone:
		return StatusClientClosed
	case fleet.FailureShutdown:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// lastUpstreamStatus is the HTTP status of the last attempt that got one.
func lastUpstreamStatus(attempts []fleet.Attempt) int {
	for i := len(attempts) - 1; i >= 0; i-- {
		if attempts[i].HTTPStatus != 0 {
			return attempts[i].HTTPStatus
		}
	}
	return 0
}

// RecordStatus is the HTTP status a finished request was answered with, as
// the history keeps it: 200 for an answer (also one that broke after its
// first token), else by failureStatus.
func RecordStatus(rec fleet.RequestRecord) int {
	switch rec.Status {
	case fleet.StatusOK, fleet.StatusUpstreamErrorAfterCommit:
		return http.StatusOK
	case fleet.StatusShutdown:
		if rec.ServedCandidate != "" {
			return http.StatusOK // answered, then cut short
		}
	case fleet.StatusClientAbort:
		return StatusClientClosed
	}
	return failureStatus(rec.Failure, rec.Attempts)
}

// StatusRecorder writes records through Next with their HTTP status set by
// RecordStatus, so the router, which knows no HTTP, records what the
// caller got.
type StatusRecorder struct{ Next router.Recorder }

// Record implements router.Recorder.
func (s StatusRecorder) Record(ctx context.Context, rec fleet.RequestRecord) error {
	rec.HTTPStatus = RecordStatus(rec)
	return s.Next.Record(ctx, rec)
}
