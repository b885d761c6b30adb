package httpapi

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/schema"
)

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

func (s *Server) writeConfig(w http.ResponseWriter, r *http.Request) {
	if s.o.WriteConfig == nil {
		writeJSONError(w, http.StatusNotFound, "there is no config to write")
		return
	}
	path, err := s.o.WriteConfig()
	switch {
	case errors.Is(err, fs.ErrExist):
		writeJSONError(w, http.StatusConflict, err.Error())
	case err != nil:
		writeJSONError(w, http.StatusNotFound, err.Error())
	default:
		writeJSON(w, http.StatusOK, schema.ConfigWritten{Path: path})
	}
}

func (s *Server) team(w http.ResponseWriter, r *http.Request) {
	if s.o.Team == nil {
		writeJSONError(w, http.StatusNotFound, "not in a team (no team.database_env in the config)")
		return
	}
	writeJSON(w, http.StatusOK, s.o.Team.Doc())
}

func (s *Server) teamRequests(w http.ResponseWriter, r *http.Request) {
	if s.o.Team == nil {
		writeJSONError(w, http.StatusNotFound, "not in a team (no team.database_env in the config)")
		return
	}
	q := r.URL.Query()
	limit := history.DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeJSONError(w, http.StatusBadRequest, "limit must be a positive integer")
			return
		}
		limit = n
	}
	doc, err := s.o.Team.Requests(r.Context(), q.Get("node"), limit)
	if err != nil {
		writeJSONError(w, http.StatusServiceUnavailable, "team link offline: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, doc)
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
	if f.Status != "" && !slices.Contains(fleet.Statuses, f.Status) {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("status: %q is not a status (%s)", fleet.ClipTo(string(f.Status), 40), joinStatuses()))
		return
	}
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
	writeJSON(w, http.StatusOK, schema.NewRequests(recs))
}

// joinStatuses is fleet.Statuses, comma-separated.
func joinStatuses() string {
	names := make([]string, len(fleet.Statuses))
	for i, st := range fleet.Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

func (s *Server) request(w http.ResponseWriter, r *http.Request) {
	if s.o.History == nil {
		writeJSONError(w, http.StatusNotFound, "history is off")
		return
	}
	rec, err := s.o.History.Request(r.Context(), r.PathValue("id"))
	if errors.Is(err, history.ErrNotFound) {
		writeJSONError(w, http.StatusNotFound, "no request "+fleet.ClipTo(r.PathValue("id"), 100))
		return
	}
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, schema.NewRequest(rec))
}

// maxScannedWindow is the longest stats window whose bucket may be other
// than whole minutes.
const maxScannedWindow = time.Hour

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
	// A bucket of whole minutes is read from the roll-ups; any other reads
	// every request of the window (docs/DESIGN.md, "Growth and bounds"),
	// which a window of an hour keeps small.
	if bucket%time.Minute != 0 && since > maxScannedWindow {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("bucket: a whole number of minutes for a window over %v (one of seconds reads every request in it)", maxScannedWindow))
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
	writeJSON(w, http.StatusOK, schema.NewStats(series, rate))
}

func (s *Server) demo(w http.ResponseWriter, r *http.Request) {
	if s.o.Demo == nil {
		writeJSONError(w, http.StatusNotFound, "not in demo mode")
		return
	}
	writeJSON(w, http.StatusOK, s.o.Demo.Demo())
}

// openAPI serves the OpenAPI document of /switchyard/v1/.
func openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(schema.OpenAPIJSON())
}

func (s *Server) demoFault(w http.ResponseWriter, r *http.Request) {
	if s.o.Demo == nil {
		writeJSONError(w, http.StatusNotFound, "not in demo mode")
		return
	}
	var body schema.SetFault
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
