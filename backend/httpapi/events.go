package httpapi

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/schema"
)

// Hub fans live events out to the subscribers of GET /switchyard/v1/events:
// the router's events (Observe), GPU readings (PublishGPU) and config
// reloads (PublishConfig). Observe and the Publish methods never block:
// each subscriber has a queue of SubscriberQueue events, and one that lets
// its queue fill up is dropped (its events stream ends; the UI reconnects
// and catches up from the status snapshot) rather than hold events, and
// memory, for a reader that is not reading. Safe for concurrent use; the
// zero value is not usable, call NewHub.
type Hub struct {
	mu      sync.Mutex
	subs    map[chan hubEvent]struct{}
	dropped atomic.Int64
}

// hubEvent is one event on its way to the subscribers: a router event, a
// GPU reading or a config reload. It is turned into its JSON document by
// each subscriber's own goroutine, never on the request path.
type hubEvent struct {
	router *fleet.Event
	gpu    *gpu.Sample
	config *schema.ConfigEvent
}

// SubscriberQueue is how many events wait for one subscriber before it is
// dropped as too slow.
const SubscriberQueue = 256

// NewHub returns a hub without subscribers.
func NewHub() *Hub { return &Hub{subs: make(map[chan hubEvent]struct{})} }

// Observe implements router.Observer.
func (h *Hub) Observe(e fleet.Event) { h.publish(hubEvent{router: &e}) }

// PublishGPU sends a GPU and host reading.
func (h *Hub) PublishGPU(s gpu.Sample) { h.publish(hubEvent{gpu: &s}) }

// PublishConfig says a config edit was applied (err nil) or rejected.
func (h *Hub) PublishConfig(err error) {
	ev := schema.ConfigEvent{OK: err == nil}
	if err != nil {
		ev.Error = clipText(err.Error(), maxErrorBody)
	}
	h.publish(hubEvent{config: &ev})
}

func (h *Hub) publish(e hubEvent) {
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

// subscribe returns a channel of events, closed when the subscriber is
// dropped, and the function that ends the subscription.
func (h *Hub) subscribe() (<-chan hubEvent, func()) {
	c := make(chan hubEvent, SubscriberQueue)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs, c)
		h.mu.Unlock()
	}
}

// document is e's event type and its JSON document; ok is false for a
// router event the stream does not carry.
func (e hubEvent) document() (typ schema.EventType, doc any, ok bool) {
	switch {
	case e.gpu != nil:
		return schema.EventGPU, schema.NewGPUEvent(*e.gpu), true
	case e.config != nil:
		return schema.EventConfig, *e.config, true
	}
	r := *e.router
	switch r.Type {
	case fleet.EventRequestStarted:
		return schema.EventRequestStarted, schema.RequestStarted{RequestID: r.RequestID}, true
	case fleet.EventAttemptStarted:
		return schema.EventAttemptStarted, schema.NewAttemptStarted(r), true
	case fleet.EventAttempt:
		return schema.EventAttempt, schema.NewAttemptEvent(r), true
	case fleet.EventCommit:
		return schema.EventCommit, schema.NewAttemptEvent(r), true
	case fleet.EventRequestDone:
		return schema.EventRequestDone, schema.NewRequestDone(r), true
	case fleet.EventBreaker:
		return schema.EventBreaker, schema.BreakerEvent{Breaker: schema.NewBreakerChange(*r.Breaker)}, true
	}
	return "", nil, false
}

// events streams live events as SSE, with the whole status document at
// connect and then every second.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	events, stop := s.o.Hub.subscribe()
	defer stop()
	startSSE(w)
	cw := newChunkWriter(w, s.o.WriteTimeout)
	send := func(typ schema.EventType, v any) error {
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
		return send(schema.EventStatus, s.o.Status())
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
			if typ, doc, ok := e.document(); ok {
				err = send(typ, doc)
			}
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
