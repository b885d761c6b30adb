package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// copyAnswer copies an upstream's answer to the caller, flushing as it
// comes (an NDJSON or SSE stream stays a stream). Switchyard's own
// security headers stay (admit set them), the upstream's cookies do not
// come to Switchyard's origin, and whatever the answer is, a browser
// opening it runs nothing on that origin: an HTML page from a model
// server is sandboxed, as a page of its own origin with no script.
func (s *Server) copyAnswer(w http.ResponseWriter, resp *http.Response) {
	for k, v := range resp.Header {
		if hopHeader(k) || !passedHeader(k) {
			continue
		}
		w.Header()[k] = v
	}
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'; frame-ancestors 'none'")
	w.WriteHeader(resp.StatusCode)
	cw := newChunkWriter(w, s.o.WriteTimeout)
	var buf [32 << 10]byte
	for {
		n, err := resp.Body.Read(buf[:])
		if n > 0 {
			cw.buf = append(cw.hold(), buf[:n]...)
			if cw.flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// passedHeader reports whether an upstream's answer header is passed on
// to the caller: not CORS (admit answers for Switchyard's origin), not
// Switchyard's security headers, not a cookie.
func passedHeader(k string) bool {
	k = http.CanonicalHeaderKey(k)
	switch k {
	case "X-Frame-Options", "Content-Security-Policy", "Content-Security-Policy-Report-Only",
		"X-Content-Type-Options", "Referrer-Policy", "Set-Cookie", "Set-Cookie2", "Strict-Transport-Security":
		return false
	}
	return !strings.HasPrefix(k, "Access-Control-")
}

// hopHeader reports whether a header belongs to one connection only
// (RFC 9110, 7.6.1) or is Switchyard's to set.
func hopHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length":
		return true
	}
	return false
}

// passThrough handles an /api/* or /v1/* path that Switchyard does not
// speak itself: it goes, unchanged but for the model's name, to the first
// candidate that may take a request now and serves the named model (or
// the default), so that endpoints newer than Switchyard work
// (docs/API.md, "Pass-through"). No routing: no failover, no history.
func (s *Server) passThrough(writeErr func(http.ResponseWriter, int, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.Upstreams == nil {
			writeErr(w, http.StatusNotFound, "no such endpoint: "+fleet.ClipTo(r.Method, maxMethod)+" "+fleet.ClipTo(r.URL.Path, 200))
			return
		}
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(s.o.BodyReadTimeout))
		body, err := readBody(r)
		if err != nil {
			status, err := s.bodyError(err)
			writeErr(w, status, err.Error())
			return
		}
		rc.SetReadDeadline(time.Time{})
		var fields map[string]json.RawMessage
		var model string
		if json.Unmarshal(body, &fields) == nil {
			json.Unmarshal(fields["model"], &model)
		}
		if err := checkModel(model); err != nil {
			writeErr(w, http.StatusBadRequest, err.Error())
			return
		}
		cands, err := s.o.Router.Available(model)
		if err != nil {
			if errors.Is(err, fleet.ErrUnknownModel) {
				writeErr(w, http.StatusNotFound, err.Error())
				return
			}
			writeErr(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		ollamaPath := strings.HasPrefix(r.URL.Path, "/api/")
		i := 0
		for i < len(cands) && ollamaPath && cands[i].Provider != fleet.ProviderOllama {
			i++
		}
		if i == len(cands) {
			w.Header().Set("Retry-After", "1")
			writeErr(w, http.StatusServiceUnavailable, fmt.Sprintf("no candidate that serves %s is available now", fleet.ClipTo(r.URL.Path, 200)))
			return
		}
		c := cands[i]
		if _, ok := fields["model"]; ok {
			fields["model"], _ = json.Marshal(c.Model)
			body, _ = json.Marshal(fields)
		}
		h := r.Header.Clone()
		for k := range h {
			if hopHeader(k) || passHidden(k) {
				h.Del(k)
			}
		}
		path := r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			path += "?" + r.URL.RawQuery
		}
		resp, err := s.o.Upstreams.Do(r.Context(), c, r.Method, path, h, bytes.NewReader(body))
		if err != nil {
			writeErr(w, http.StatusBadGateway, fmt.Sprintf("the server of candidate %s did not answer: %v", c.ID, fleet.ClipTo(err.Error(), 300)))
			return
		}
		defer resp.Body.Close()
		first, _ := s.o.Router.Resolve(model, false)
		routeHeaders(w.Header(), &router.Meta{RequestID: router.NewID(), Candidate: c, Fallback: c.ID != first.ID})
		s.copyAnswer(w, resp)
	}
}

// passHidden reports whether a caller's header stays with Switchyard: its
// own key, the browser's, and Switchyard's.
func passHidden(k string) bool {
	k = http.CanonicalHeaderKey(k)
	switch k {
	case "Host", "Authorization", "Cookie", "Origin", "Referer":
		return true
	}
	return strings.HasPrefix(k, "Sec-") || strings.HasPrefix(k, "X-Switchyard-")
}
