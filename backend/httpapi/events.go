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
// Observe never blocks: each subscriber has a queue of SubscriberQueue
// events, and one that lets its queue fill up is dropped (its events
// stream ends; the UI reconnects and catches up from the status snapshot)
// rather than hold events, and memory, for a reader that is not reading.
// Safe for concurrent use; the zero value is not usable, call NewHub.
type Hub struct {
	mu      sync.Mutex
	subs    map[chan fleet.Event]struct{}
	dropped atomic.Int64
}

// SubscriberQueue is how many events wait for one subscriber before it is
// dropped as too slow.
const SubscriberQueue = 256

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
			delete(h.subs, c)
			close(c)
			h.dropped.Add(1)
		}
	}
}

// Dropped counts subscribers dropped for not keeping up.
func (h *Hub) Dropped() int64 { return h.dropped.Load() }

// Subscribers is how many subscribers there are now.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Subscribe returns a channel of events, closed when the subscriber is
// dropped, and the function that ends the subscription.
func (h *Hub) Subscribe() (<-chan fleet.Event, func()) {
	c := make(chan fleet.Event, SubscriberQueue)
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
		case e, ok := <-events:
			if !ok {
				return // dropped: it fell behind
			}
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
