package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
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
// each subscriber has its own queue of the events it has not been sent,
// which its goroutine writes out in batches. A queue that grows past
// SubscriberQueue while the subscriber is slow (a burst of requests) is
// coalesced: the newest GPU reading and config event stand for the older
// ones, and a request that is done keeps only its failed attempts and its
// end. A subscriber whose queue passes MaxPending even so, or whose
// writes stall for the write timeout, reads nothing and is dropped (its
// events stream ends; the UI reconnects and catches up from the status
// snapshot) rather than hold events, and memory, for nobody. Safe for
// concurrent use; the zero value is not usable, call NewHub.
type Hub struct {
	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	n       atomic.Int32 // len(subs), read without mu
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

const (
	// SubscriberQueue is how many events wait for one subscriber before
	// they are coalesced.
	SubscriberQueue = 256
	// MaxPending is how many events, coalesced, wait for one subscriber
	// before it is dropped as one that reads nothing.
	MaxPending = 4096
)

// subscriber is the queue of one events stream.
type subscriber struct {
	mu         sync.Mutex
	pending    []hubEvent    // not sent yet, in order
	coalesceAt int           // the length at which pending is coalesced next
	gone       bool          // dropped: the stream ends
	ready      chan struct{} // one signal: pending has events, or gone
}

// add queues e; false means the subscriber is dropped.
func (sub *subscriber) add(e hubEvent) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.pending = append(sub.pending, e)
	if len(sub.pending) > max(sub.coalesceAt, SubscriberQueue) {
		// Again once the queue has doubled: coalescing costs the
		// queue's length, which the request path must not pay per event.
		sub.pending = coalesce(sub.pending)
		sub.coalesceAt = 2 * len(sub.pending)
	}
	if len(sub.pending) > MaxPending {
		sub.pending, sub.gone = nil, true
	}
	select {
	case sub.ready <- struct{}{}:
	default:
	}
	return !sub.gone
}

// take returns the events not sent yet, emptying the queue into spare's
// storage; ok is false once the subscriber is dropped.
func (sub *subscriber) take(spare []hubEvent) (events []hubEvent, ok bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	events, sub.pending, sub.coalesceAt = sub.pending, spare[:0], 0
	return events, !sub.gone
}

// coalesce shortens q, the events a subscriber has not been sent, to what
// its views still need: the newest GPU reading and config event; of a
// request whose end is in q, its failed attempts and its end (its start,
// waits, commit and successful attempt would be undone by the end).
// Breaker changes and the events of requests still running stay.
func coalesce(q []hubEvent) []hubEvent {
	lastGPU, lastConfig := -1, -1
	done := make(map[string]bool)
	for i, e := range q {
		switch {
		case e.gpu != nil:
			lastGPU = i
		case e.config != nil:
			lastConfig = i
		case e.router.Type == fleet.EventRequestDone:
			done[e.router.RequestID] = true
		}
	}
	out := q[:0]
	for i, e := range q {
		switch {
		case e.gpu != nil:
			if i != lastGPU {
				continue
			}
		case e.config != nil:
			if i != lastConfig {
				continue
			}
		case done[e.router.RequestID]:
			switch r := e.router; r.Type {
			case fleet.EventRequestStarted, fleet.EventAttemptStarted, fleet.EventCommit:
				continue
			case fleet.EventAttempt:
				if r.Attempt == nil || r.Attempt.Outcome == fleet.OutcomeSuccess {
					continue
				}
			}
		}
		out = append(out, e)
	}
	clear(q[len(out):])
	return out
}

// NewHub returns a hub without subscribers.
func NewHub() *Hub { return &Hub{subs: make(map[*subscriber]struct{})} }

// Observe implements router.Observer.
//
// With nobody subscribed it returns at once: a request's events cost no
// lock and no copy on the heap (TestObserveUnsubscribedIsFree).
func (h *Hub) Observe(e fleet.Event) {
	if h.n.Load() == 0 {
		return
	}
	h.observe(e)
}

// observe publishes e's Clone: what e points to is the router's, lent for
// the call (fleet.Event), and the subscribers read it later.
func (h *Hub) observe(e fleet.Event) {
	c := e.Clone()
	h.publish(hubEvent{router: &c})
}

// PublishGPU sends a GPU and host reading.
func (h *Hub) PublishGPU(s gpu.Sample) { h.publish(hubEvent{gpu: &s}) }

// PublishConfig says a config edit was applied (err nil) or rejected.
func (h *Hub) PublishConfig(err error) {
	ev := schema.ConfigEvent{OK: err == nil}
	if err != nil {
		ev.Error = fleet.ClipTo(err.Error(), maxErrorBody)
	}
	h.publish(hubEvent{config: &ev})
}

func (h *Hub) publish(e hubEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if !sub.add(e) {
			delete(h.subs, sub)
			h.n.Store(int32(len(h.subs)))
			h.dropped.Add(1)
		}
	}
}

// Dropped counts subscribers dropped for reading nothing.
func (h *Hub) Dropped() int64 { return h.dropped.Load() }

// subscribe returns a new subscriber and the function that ends its
// subscription; stalled says it ended because its writes stalled.
func (h *Hub) subscribe() (*subscriber, func(stalled bool)) {
	sub := &subscriber{ready: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[sub] = struct{}{}
	h.n.Store(int32(len(h.subs)))
	h.mu.Unlock()
	return sub, func(stalled bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[sub]; ok {
			delete(h.subs, sub)
			h.n.Store(int32(len(h.subs)))
			if stalled {
				h.dropped.Add(1)
			}
		}
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

// eventsSendBuffer is the socket send buffer of an events stream: small,
// so that a subscriber that reads nothing stalls the writes (and is
// dropped at the write timeout) after this much, not after the megabytes
// the kernel would otherwise let pile up for it.
const eventsSendBuffer = 64 << 10

// events streams live events as SSE, with the whole status document at
// connect and then every second.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	sub, stop := s.o.Hub.subscribe()
	stalled := false
	defer func() { stop(stalled) }()
	if c, ok := r.Context().Value(connKey{}).(interface{ SetWriteBuffer(int) error }); ok {
		c.SetWriteBuffer(eventsSendBuffer)
	}
	startSSE(w)
	cw := newChunkWriter(w, s.o.WriteTimeout)
	add := func(typ schema.EventType, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		cw.buf = append(cw.hold(), "event: "...)
		cw.buf = append(cw.buf, typ...)
		cw.buf = append(cw.buf, "\ndata: "...)
		cw.buf = append(cw.buf, b...)
		cw.buf = append(cw.buf, "\n\n"...)
	}
	var diff statusDiff
	addStatus := func() {
		if s.o.Status == nil {
			return
		}
		st := s.o.Status()
		if delta, changed, first := diff.next(st); first {
			add(schema.EventStatus, st)
		} else if changed {
			add(schema.EventStatusDelta, delta)
		}
	}
	addStatus()
	if err := cw.flush(); err != nil {
		stalled = errors.Is(err, os.ErrDeadlineExceeded)
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	var batch []hubEvent
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			return // shutting down: an open UI must not hold the server up
		case <-sub.ready:
			var ok bool
			if batch, ok = sub.take(batch); !ok {
				return // dropped: it read nothing
			}
			for i, e := range batch {
				if typ, doc, ok := e.document(); ok {
					add(typ, doc)
				}
				batch[i] = hubEvent{}
			}
		case <-tick.C:
			addStatus()
		case <-ping.C:
			cw.buf = append(cw.hold(), ": ping\n\n"...)
		}
		if len(cw.buf) == 0 {
			continue
		}
		if err := cw.flush(); err != nil {
			stalled = errors.Is(err, os.ErrDeadlineExceeded)
			return
		}
	}
}

// statusDiff remembers what one events subscriber was last sent of the
// status, so that each second it is sent only what changed: with 200
// candidates the whole status is about 95 KB, and most of it stays the
// same from one second to the next.
type statusDiff struct {
	sent  bool
	rest  []byte            // the status without its candidates, as JSON
	cands map[string][]byte // each candidate, as JSON, by id
	order []string
}

// next takes the status st. first is true the first time (send st
// whole); else delta is what changed since, and changed says whether
// anything did.
func (d *statusDiff) next(st schema.Status) (delta schema.StatusDelta, changed, first bool) {
	delta = schema.StatusDelta{Candidates: []schema.Candidate{}, Removed: []string{}, Order: []string{}}
	cands := st.Candidates
	st.Candidates = nil
	rest, _ := json.Marshal(st)
	now := make(map[string][]byte, len(cands))
	order := make([]string, len(cands))
	for i, c := range cands {
		b, _ := json.Marshal(c)
		now[c.ID], order[i] = b, c.ID
		if d.sent && !bytes.Equal(d.cands[c.ID], b) {
			delta.Candidates = append(delta.Candidates, c)
		}
	}
	if d.sent {
		if !bytes.Equal(d.rest, rest) {
			delta.Rest = &st
		}
		for id := range d.cands {
			if _, ok := now[id]; !ok {
				delta.Removed = append(delta.Removed, id)
			}
		}
		slices.Sort(delta.Removed)
		if !slices.Equal(d.order, order) && len(order) > 0 {
			delta.Order = order
		}
	}
	first = !d.sent
	d.sent, d.rest, d.cands, d.order = true, rest, now, order
	changed = delta.Rest != nil || len(delta.Candidates) > 0 || len(delta.Removed) > 0 || len(delta.Order) > 0
	return delta, changed, first
}
