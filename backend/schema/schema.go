// Package schema is the one home of the JSON documents of Switchyard's own
// API (/switchyard/v1/: status, config, requests, stats, events, demo):
// their Go types, the functions that build them from the domain's values,
// and the OpenAPI document made from those types (OpenAPI). The OpenAPI
// document is served at /switchyard/v1/openapi.json, committed as
// docs/openapi.json, and the UI's TypeScript types are generated from it,
// so the UI cannot drift from these types without a failing build.
//
// Times are RFC 3339 strings, durations integer milliseconds in fields
// ending _ms, byte counts integers in fields ending _bytes. Lists are never
// null. Domain types (fleet, gpu, router) carry no JSON tags: their shape
// on the wire is decided here.
package schema

import (
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/router"
)

// Error is the body of an error answer of /switchyard/v1/.
type Error struct {
	Error string `json:"error"`
}

// Attempt is one try of one candidate for one request.
type Attempt struct {
	Order     int           `json:"order"`
	Candidate string        `json:"candidate"`
	Outcome   fleet.Outcome `json:"outcome"`
	Fault     fleet.Fault   `json:"fault"`
	// Reason says in plain words why the attempt did not serve
	// (router.Reason); Error keeps the raw error.
	Reason     string    `json:"reason"`
	Error      string    `json:"error"`
	HTTPStatus int       `json:"http_status"`
	StartedAt  time.Time `json:"started_at"`
	DeadlineMS int64     `json:"deadline_ms"`
	TTFTMS     int64     `json:"ttft_ms"`
	DurationMS int64     `json:"duration_ms"`
	Cold       bool      `json:"cold"`
	Demoted    bool      `json:"demoted"`
	Reading    *Reading  `json:"reading"`
}

// Reading is the GPU or server reading that demoted a candidate.
type Reading struct {
	GPU        int    `json:"gpu"` // index, -1 for a server's own report
	Source     string `json:"source"`
	FreeBytes  uint64 `json:"free_bytes"`
	UsedBytes  uint64 `json:"used_bytes"`
	TotalBytes uint64 `json:"total_bytes"`
	Reason     string `json:"reason"`
}

// Request is one request's record with its attempts.
type Request struct {
	ID               string         `json:"id"`
	StartedAt        time.Time      `json:"started_at"`
	Protocol         fleet.Protocol `json:"protocol"`
	Stream           bool           `json:"stream"`
	Thinking         bool           `json:"thinking"`
	RequestedModel   string         `json:"requested_model"`
	ServedCandidate  string         `json:"served_candidate"`
	ServedModel      string         `json:"served_model"`
	IsFallback       bool           `json:"is_fallback"`
	Status           fleet.Status   `json:"status"`
	HTTPStatus       int            `json:"http_status"`
	Error            string         `json:"error"`
	Failure          fleet.Failure  `json:"failure"`
	TTFTMS           int64          `json:"ttft_ms"`
	LatencyMS        int64          `json:"latency_ms"`
	PromptTokens     int            `json:"prompt_tokens"`
	CompletionTokens int            `json:"completion_tokens"`
	Attempts         []Attempt      `json:"attempts"`
}

// Requests is GET /switchyard/v1/requests.
type Requests struct {
	Requests []Request `json:"requests"`
}

// BreakerChange is one transition of a candidate's circuit breaker.
type BreakerChange struct {
	Candidate string             `json:"candidate"`
	From      fleet.BreakerState `json:"from"`
	To        fleet.BreakerState `json:"to"`
	At        time.Time          `json:"at"`
	Cause     string             `json:"cause"`
}

// Stats is GET /switchyard/v1/stats: TTFT percentiles per candidate and
// failover rates, per time bucket.
type Stats struct {
	TTFT     []TTFTPoint `json:"ttft"`
	Failover []RatePoint `json:"failover"`
}

// TTFTPoint is one candidate's TTFT percentiles in one bucket.
type TTFTPoint struct {
	At        time.Time `json:"at"` // the bucket's start
	Candidate string    `json:"candidate"`
	P50MS     int64     `json:"p50_ms"`
	P95MS     int64     `json:"p95_ms"`
	N         int       `json:"n"`
}

// RatePoint is one bucket's requests, fallbacks and errors.
type RatePoint struct {
	At        time.Time `json:"at"` // the bucket's start
	Requests  int       `json:"requests"`
	Fallbacks int       `json:"fallbacks"`
	Errors    int       `json:"errors"`
}

// NewAttempt is a as the API shows it.
func NewAttempt(a fleet.Attempt) Attempt {
	return Attempt{
		Order: a.Order, Candidate: a.Candidate, Outcome: a.Outcome, Fault: a.Fault, Reason: router.Reason(a), Error: a.Error, HTTPStatus: a.HTTPStatus,
		StartedAt: a.StartedAt, DeadlineMS: a.Deadline.Milliseconds(), TTFTMS: a.TTFT.Milliseconds(),
		DurationMS: a.Duration.Milliseconds(), Cold: a.Cold, Demoted: a.Demoted, Reading: NewReading(a.Reading),
	}
}

// NewReading is r as the API shows it; nil for nil.
func NewReading(r *fleet.GPUReading) *Reading {
	if r == nil {
		return nil
	}
	return &Reading{GPU: r.GPU, Source: r.Source, FreeBytes: r.FreeBytes, UsedBytes: r.UsedBytes, TotalBytes: r.TotalBytes, Reason: r.Reason}
}

// NewRequest is r as the API shows it.
func NewRequest(r fleet.RequestRecord) Request {
	out := Request{
		ID: r.ID, StartedAt: r.StartedAt, Protocol: r.Protocol, Stream: r.Stream, Thinking: r.Thinking,
		RequestedModel: r.RequestedModel, ServedCandidate: r.ServedCandidate, ServedModel: r.ServedModel,
		IsFallback: r.IsFallback, Status: r.Status, HTTPStatus: r.HTTPStatus, Error: r.Error, Failure: r.Failure,
		TTFTMS: r.TTFT.Milliseconds(), LatencyMS: r.Latency.Milliseconds(),
		PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
		Attempts: make([]Attempt, 0, len(r.Attempts)),
	}
	for _, a := range r.Attempts {
		out.Attempts = append(out.Attempts, NewAttempt(a))
	}
	return out
}

// NewRequests is a page of records as the API shows it.
func NewRequests(recs []fleet.RequestRecord) Requests {
	out := Requests{Requests: make([]Request, 0, len(recs))}
	for _, r := range recs {
		out.Requests = append(out.Requests, NewRequest(r))
	}
	return out
}

// NewBreakerChange is c as the API shows it.
func NewBreakerChange(c fleet.BreakerChange) BreakerChange {
	return BreakerChange{Candidate: c.Candidate, From: c.From, To: c.To, At: c.At, Cause: c.Cause}
}

// NewStats is the history's series as the API shows them.
func NewStats(series []history.SeriesPoint, rate []history.RatePoint) Stats {
	out := Stats{TTFT: make([]TTFTPoint, 0, len(series)), Failover: make([]RatePoint, 0, len(rate))}
	for _, p := range series {
		out.TTFT = append(out.TTFT, TTFTPoint{p.At, p.Candidate, p.P50.Milliseconds(), p.P95.Milliseconds(), p.N})
	}
	for _, p := range rate {
		out.Failover = append(out.Failover, RatePoint{p.At, p.Requests, p.Fallbacks, p.Errors})
	}
	return out
}
