package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
)

// AttemptJSON is an attempt as the API shows it (docs/API.md).
type AttemptJSON struct {
	Order      int               `json:"order"`
	Candidate  string            `json:"candidate"`
	Outcome    fleet.Outcome     `json:"outcome"`
	Fault      fleet.Fault       `json:"fault"`
	Error      string            `json:"error"`
	HTTPStatus int               `json:"http_status"`
	StartedAt  time.Time         `json:"started_at"`
	DeadlineMS int64             `json:"deadline_ms"`
	TTFTMS     int64             `json:"ttft_ms"`
	DurationMS int64             `json:"duration_ms"`
	Cold       bool              `json:"cold"`
	Demoted    bool              `json:"demoted"`
	Reading    *fleet.GPUReading `json:"reading"`
}

// RequestJSON is a request record as the API shows it (docs/API.md).
type RequestJSON struct {
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
	Attempts         []AttemptJSON  `json:"attempts"`
}

// AttemptView converts an attempt for the API.
func AttemptView(a fleet.Attempt) AttemptJSON {
	return AttemptJSON{
		Order: a.Order, Candidate: a.Candidate, Outcome: a.Outcome, Fault: a.Fault, Error: a.Error, HTTPStatus: a.HTTPStatus,
		StartedAt: a.StartedAt, DeadlineMS: a.Deadline.Milliseconds(), TTFTMS: a.TTFT.Milliseconds(),
		DurationMS: a.Duration.Milliseconds(), Cold: a.Cold, Demoted: a.Demoted, Reading: a.Reading,
	}
}

// RequestView converts a request record for the API.
func RequestView(r fleet.RequestRecord) RequestJSON {
	out := RequestJSON{
		ID: r.ID, StartedAt: r.StartedAt, Protocol: r.Protocol, Stream: r.Stream, Thinking: r.Thinking,
		RequestedModel: r.RequestedModel, ServedCandidate: r.ServedCandidate, ServedModel: r.ServedModel,
		IsFallback: r.IsFallback, Status: r.Status, HTTPStatus: r.HTTPStatus, Error: r.Error, Failure: r.Failure,
		TTFTMS: r.TTFT.Milliseconds(), LatencyMS: r.Latency.Milliseconds(),
		PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
		Attempts: make([]AttemptJSON, 0, len(r.Attempts)),
	}
	for _, a := range r.Attempts {
		out.Attempts = append(out.Attempts, AttemptView(a))
	}
	return out
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if s.o.Status == nil {
		writeJSONError(w, http.StatusNotFound, "status is not available")
		return
	}
	writeJSON(w, http.StatusOK, s.o.Status())
}

func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	if s.o.Config == nil {
		writeJSONError(w, http.StatusNotFound, "config is not available")
		return
	}
	writeJSON(w, http.StatusOK, s.o.Config())
}

func (s *Server) requests(w http.ResponseWriter, r *http.Request) {
	if s.o.History == nil {
		writeJSONError(w, http.StatusNotFound, "history is off")
		return
	}
	q := r.URL.Query()
	var f history.Filter
	var err error
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 {
			writeJSONError(w, http.StatusBadRequest, "limit: expected a positive integer")
			return
		}
	}
	f.Before = q.Get("before")
	f.ServedCandidate = q.Get("served")
	f.Status = fleet.Status(q.Get("status"))
	if v := q.Get("fallback"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, "fallback: expected true or false")
			return
		}
		f.Fallback = &b
	}
	for key, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(key); v != "" {
			if *dst, err = time.Parse(time.RFC3339, v); err != nil {
				writeJSONError(w, http.StatusBadRequest, key+": expected an RFC 3339 time")
				return
			}
		}
	}
	recs, err := s.o.History.Requests(r.Context(), f)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := make([]RequestJSON, 0, len(recs))
	for _, rec := range recs {
		out = append(out, RequestView(rec))
	}
	writeJSON(w, http.StatusOK, map[string]any{"requests": out})
}

func (s *Server) request(w http.ResponseWriter, r *http.Request) {
	if s.o.History == nil {
		writeJSONError(w, http.StatusNotFound, "history is off")
		return
	}
	rec, err := s.o.History.Request(r.Context(), r.PathValue("id"))
	if errors.Is(err, history.ErrNotFound) {
		writeJSONError(w, http.StatusNotFound, "no request "+r.PathValue("id"))
		return
	}
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, RequestView(rec))
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	if s.o.History == nil {
		writeJSONError(w, http.StatusNotFound, "history is off")
		return
	}
	since, bucket := time.Hour, time.Minute
	for key, dst := range map[string]*time.Duration{"since": &since, "bucket": &bucket} {
		if v := r.URL.Query().Get(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				writeJSONError(w, http.StatusBadRequest, key+": expected a positive duration like 1h or 30s")
				return
			}
			*dst = d
		}
	}
	if bucket < time.Second || since/bucket > 10000 {
		writeJSONError(w, http.StatusBadRequest, "bucket: at least 1s and at most 10000 buckets")
		return
	}
	from := time.Now().Add(-since)
	series, err := s.o.History.TTFTSeries(r.Context(), from, bucket)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rate, err := s.o.History.FailoverRate(r.Context(), from, bucket)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	type ttftPoint struct {
		At        time.Time `json:"at"`
		Candidate string    `json:"candidate"`
		P50MS     int64     `json:"p50_ms"`
		P95MS     int64     `json:"p95_ms"`
		N         int       `json:"n"`
	}
	type ratePoint struct {
		At        time.Time `json:"at"`
		Requests  int       `json:"requests"`
		Fallbacks int       `json:"fallbacks"`
		Errors    int       `json:"errors"`
	}
	ttft := make([]ttftPoint, 0, len(series))
	for _, p := range series {
		ttft = append(ttft, ttftPoint{p.At, p.Candidate, p.P50.Milliseconds(), p.P95.Milliseconds(), p.N})
	}
	fail := make([]ratePoint, 0, len(rate))
	for _, p := range rate {
		fail = append(fail, ratePoint{p.At, p.Requests, p.Fallbacks, p.Errors})
	}
	writeJSON(w, http.StatusOK, map[string]any{"ttft": ttft, "failover": fail})
}

func (s *Server) demo(w http.ResponseWriter, r *http.Request) {
	if s.o.Demo == nil {
		writeJSONError(w, http.StatusNotFound, "not in demo mode")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": s.o.Demo.Servers(), "faults": s.o.Demo.Faults()})
}

func (s *Server) demoFault(w http.ResponseWriter, r *http.Request) {
	if s.o.Demo == nil {
		writeJSONError(w, http.StatusNotFound, "not in demo mode")
		return
	}
	var body struct {
		Candidate string `json:"candidate"`
		Fault     string `json:"fault"`
	}
	if status, err := s.decodeBody(w, r, &body); err != nil {
		writeJSONError(w, status, err.Error())
		return
	}
	srv, err := s.o.Demo.SetFault(body.Candidate, body.Fault)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, srv)
}
