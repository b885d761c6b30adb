package router

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// The verdict table, row by row (docs/DESIGN.md, "Fault values"): a pure
// function, so no clock and no upstream.
func TestJudge(t *testing.T) {
	st := func(code int) *fleet.StatusError { return &fleet.StatusError{StatusCode: code, Message: "m"} }
	alive := &Pulse{Evidence: "alive: /api/ps answered in 1 ms"}
	for _, tc := range []struct {
		name string
		e    ending
		want verdict // only the fields compared below
	}{
		{"refused connection", ending{err: errors.New("dial tcp: connection refused")},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer}},
		{"the caller left, whatever the error", ending{err: st(500), callerGone: true},
			verdict{outcome: fleet.OutcomeClientAbort, fault: fleet.FaultClient, tell: hearIgnore, haltFailure: fleet.FailureClientGone}},
		{"shutting down", ending{err: st(500), callerGone: true, shutdown: true},
			verdict{outcome: fleet.OutcomeShutdown, tell: hearIgnore, haltFailure: fleet.FailureShutdown}},
		{"hedge lost", ending{err: fleet.ErrHedgeLost},
			verdict{outcome: fleet.OutcomeHedgeLost, tell: hearIgnore}},
		{"503 busy", ending{err: &fleet.StatusError{StatusCode: 503, Busy: true}},
			verdict{outcome: fleet.OutcomeBusy, fault: fleet.FaultBusy, tell: hearIgnore, mark: markBusy}},
		{"429", ending{err: st(429)},
			verdict{outcome: fleet.OutcomeBusy, fault: fleet.FaultBusy, tell: hearIgnore, mark: markBusy}},
		{"loading", ending{err: &fleet.StatusError{StatusCode: 503, Loading: true}},
			verdict{outcome: fleet.OutcomeBusy, fault: fleet.FaultLoading, tell: hearIgnore, mark: markLoading}},
		{"can't think", ending{err: &fleet.StatusError{StatusCode: 400, Unsupported: "thinking"}},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultCapability, tell: hearIgnore, mark: markUnsupported}},
		{"401", ending{err: st(401)},
			verdict{outcome: fleet.OutcomeNotRetryable, fault: fleet.FaultConfig, tell: hearIgnore, haltFailure: fleet.FailureUpstreamAuth}},
		{"404 model not found", ending{err: st(404)},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultConfig, tell: hearIgnore, mark: markMissing}},
		{"400", ending{err: st(400)},
			verdict{outcome: fleet.OutcomeNotRetryable, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, haltFailure: fleet.FailureRejected}},
		{"a 500 that says the request is invalid", ending{err: &fleet.StatusError{StatusCode: 500, Invalid: true}},
			verdict{outcome: fleet.OutcomeNotRetryable, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, haltFailure: fleet.FailureRejected}},
		{"413", ending{err: st(413)},
			verdict{outcome: fleet.OutcomeNotRetryable, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, haltFailure: fleet.FailureRejected}},
		{"422", ending{err: st(422)},
			verdict{outcome: fleet.OutcomeNotRetryable, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, haltFailure: fleet.FailureRejected}},
		{"405", ending{err: st(405)},
			verdict{outcome: fleet.OutcomeNotRetryable, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, haltFailure: fleet.FailureRejected}},
		{"403", ending{err: st(403)},
			verdict{outcome: fleet.OutcomeNotRetryable, fault: fleet.FaultConfig, tell: hearIgnore, haltFailure: fleet.FailureUpstreamAuth}},
		// A server with no endpoint for a prompt completion or an
		// embedding lacks that kind of request, not its model: chat
		// still goes to it (u3 review, item 1).
		{"404 of a missing endpoint, generate", ending{err: &fleet.StatusError{StatusCode: 404, Message: "Not Found"}, kind: fleet.KindGenerate},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultCapability, tell: hearIgnore, mark: markUnsupported, lacks: "endpoint:generate"}},
		{"404 of a missing endpoint, embed", ending{err: &fleet.StatusError{StatusCode: 404, Message: "File Not Found"}, kind: fleet.KindEmbed},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultCapability, tell: hearIgnore, mark: markUnsupported, lacks: "embedding"}},
		{"404 of a missing model, generate", ending{err: &fleet.StatusError{StatusCode: 404, Message: "model 'tiny' not found"}, kind: fleet.KindGenerate},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultConfig, tell: hearIgnore, mark: markMissing}},
		{"404 of a chat: the candidate's url or model", ending{err: &fleet.StatusError{StatusCode: 404, Message: "Not Found"}, kind: fleet.KindChat},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultConfig, tell: hearIgnore, mark: markMissing}},
		{"a wrapped 404", ending{err: fmt.Errorf("ollama chat: %w", st(404))},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultConfig, tell: hearIgnore, mark: markMissing}},
		{"409 is the server's", ending{err: st(409)},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer}},
		{"425 is the server's", ending{err: st(425)},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer}},
		{"an error event may be the request's: held", ending{err: &fleet.EventError{Message: "boom"}},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, hold: true, settle: settleServer}},
		{"408 is the server's", ending{err: st(408)},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer}},
		{"a 500 may be the request's: held", ending{err: st(500)},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, hold: true, settle: settleServer}},
		{"the same 500 on a second server", ending{err: st(500), suspect: "HTTP 500: m"},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleRequest, haltFailure: fleet.FailureRequest}},
		{"output that does not parse", ending{err: &fleet.StatusError{StatusCode: 500, Output: true}},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, parsed: true}},
		{"output that does not parse, twice", ending{err: &fleet.StatusError{StatusCode: 500, Output: true}, unparsed: true},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, parsed: true, haltFailure: fleet.FailureRequest}},
		{"a runner crash", ending{err: &fleet.StatusError{StatusCode: 500, Crash: true}, crash: true},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, crashed: true}},
		{"a crash on another request", ending{err: &fleet.StatusError{StatusCode: 500, Crash: true}, crash: true, crashRepeat: true},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer, crashed: true}},
		{"empty without a finish marker", ending{err: fleet.ErrNoContent},
			verdict{outcome: fleet.OutcomeNoContent, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer}},
		{"an empty answer", ending{err: fleet.ErrNoContent, finish: "stop"},
			verdict{outcome: fleet.OutcomeNoContent, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, firstEmpty: true}},
		{"a second empty answer", ending{err: fleet.ErrNoContent, finish: "stop", emptySeen: true},
			verdict{outcome: fleet.OutcomeNoContent, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, haltEmpty: true}},
		{"timeout", ending{err: fleet.ErrFirstTokenTimeout},
			verdict{outcome: fleet.OutcomeTimeout, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer}},
		{"timeout on a full server", ending{err: fleet.ErrFirstTokenTimeout, queued: true},
			verdict{outcome: fleet.OutcomeBusy, fault: fleet.FaultQueued, tell: hearIgnore}},
		{"timeout on a live, working server", ending{err: fleet.ErrFirstTokenTimeout, alive: alive},
			verdict{outcome: fleet.OutcomeBusy, fault: fleet.FaultQueued, tell: hearIgnore}},
		{"timeout on a server that does not answer", ending{err: fleet.ErrFirstTokenTimeout, alive: &Pulse{Err: io.ErrUnexpectedEOF}},
			verdict{outcome: fleet.OutcomeTimeout, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer}},
		{"timeout on an idle server", ending{err: fleet.ErrFirstTokenTimeout, alive: &Pulse{Idle: true}},
			verdict{outcome: fleet.OutcomeTimeout, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer}},
		{"timeout on a live server nothing answers", ending{err: fleet.ErrFirstTokenTimeout, alive: alive, stuck: 61e9},
			verdict{outcome: fleet.OutcomeTimeout, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer}},
		{"committed: a clean end", ending{err: io.EOF, committed: true},
			verdict{outcome: fleet.OutcomeSuccess, tell: hearSuccess, sample: true}},
		{"committed: the caller closed it", ending{err: errClosed, committed: true, closed: true},
			verdict{outcome: fleet.OutcomeClientAbort, fault: fleet.FaultClient, tell: hearIgnore, sample: true}},
		{"committed: cut by the shutdown", ending{err: errClosed, committed: true, callerGone: true, shutdown: true},
			verdict{outcome: fleet.OutcomeShutdown, tell: hearIgnore, sample: true}},
		{"committed: a stall", ending{err: fleet.ErrStalled, committed: true},
			verdict{outcome: fleet.OutcomeFailedAfterCommit, fault: fleet.FaultServer, tell: hearFailure}},
		{"committed: output that does not parse", ending{err: &fleet.EventError{Output: true}, committed: true},
			verdict{outcome: fleet.OutcomeFailedAfterCommit, fault: fleet.FaultRequest, tell: hearIgnore}},
		{"a whole answer broke after its first token", ending{err: fleet.ErrTruncated, committed: true, aggregate: true},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultServer, tell: hearFailure, settle: settleServer, retry: true}},
		{"a whole answer that does not parse", ending{err: &fleet.EventError{Output: true}, committed: true, aggregate: true},
			verdict{outcome: fleet.OutcomeError, fault: fleet.FaultRequest, tell: hearIgnore, settle: settleServer, parsed: true, retry: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judge(tc.e)
			if g, w := brief(got), brief(tc.want); g != w {
				t.Errorf("judge() = %s; want %s", g, w)
			}
		})
	}
}

// brief is the part of a verdict the table pins.
func brief(v verdict) string {
	return fmt.Sprintf("%s/%s tell=%d settle=%d hold=%v mark=%d lacks=%q halt=%q empty=%v/%v sample=%v parsed=%v retry=%v crashed=%v",
		v.outcome, v.fault, v.tell, v.settle, v.hold, v.mark, v.lacks, v.haltFailure, v.firstEmpty, v.haltEmpty, v.sample, v.parsed, v.retry, v.crashed)
}
