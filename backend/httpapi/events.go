package httpapi

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Hub fans live events out to the subscribers of GET /switchyard/v1/events.
// Observe never blocks: a subscriber that falls behind loses events (and
// catches up through the next status snapshot). Safe for concurrent use;
// the zero value is not usable, call NewHub.
type Hub struct {
	mu      sync.Mutex
	subs    map[chan fleet.Event]struct{}
	dropped atomic.Int64
}

// NewHub returns a hub without subscribers.
func NewHub() *Hub { return &Hub{subs: make(map[chan fleet.Event]struct{})} }

// Observe implements router.Observer.
func (h *Hub) Observe(e fleet.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- e:
		default:
			h.dropped.Add(1)
		}
	}
}

// Dropped counts events lost to slow subscribers.
func (h *Hub) Dropped() int64 { return h.dropped.Load() }

// Subscribe returns a channel of events and the function that ends the
// subscription.
func (h *Hub) Subscribe() (<-chan fleet.Event, func()) {
	c := make(chan fleet.Event, 256)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs, c)
		h.mu.Unlock()
	}
}

// eventJSON is an event as the events stream sends it (docs/API.md).
type eventJSON struct {
	RequestID string               `json:"request_id,omitempty"`
	Attempt   *AttemptJSON         `json:"attempt,omitempty"`
	Request   *RequestJSON         `json:"request,omitempty"`
	Breaker   *fleet.BreakerChange `json:"breaker,omitempty"`
	Data      any                  `json:"data,omitempty"`
}

func eventView(e fleet.Event) eventJSON {
	v := eventJSON{RequestID: e.RequestID, Breaker: e.Breaker, Data: e.Data}
	if e.Attempt != nil {
		a := AttemptView(*e.Attempt)
		v.Attempt = &a
	}
	if e.Request != nil {
		r := RequestView(*e.Request)
		v.Request = &r
	}
	return v
}

// events streams live events as SSE, with the whole status document at
// connect and then every second.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	events, stop := s.o.Hub.Subscribe()
	defer stop()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	cw := newChunkWriter(w, s.o.WriteTimeout)
	send := func(typ string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		cw.buf = append(cw.buf, "event: "...)
		cw.buf = append(cw.buf, typ...)
		cw.buf = append(cw.buf, "\ndata: "...)
		cw.buf = append(cw.buf, b...)
		cw.buf = append(cw.buf, "\n\n"...)
		return cw.flush()
	}
	sendStatus := func() error {
		if s.o.Status == nil {
			return nil
		}
		return send("status", s.o.Status())
	}
	if sendStatus() != nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			return // shutting down: an open UI must not hold the server up
		case e := <-events:
			err = send(string(e.Type), eventView(e))
		case <-tick.C:
			err = sendStatus()
		case <-ping.C:
			cw.buf = append(cw.buf, ": ping\n\n"...)
			err = cw.flush()
		}
		if err != nil {
			return
		}
	}
}
