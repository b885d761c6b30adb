package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// fakeStream is the ResponseWriter of an events stream in a synctest
// bubble. It takes each write after delay, as a caller that reads slowly
// does, or, stuck, lets each write wait for its deadline, as a socket does
// whose buffers are full because nobody reads it.
type fakeStream struct {
	h        http.Header
	delay    time.Duration
	mu       sync.Mutex
	stuck    bool
	deadline time.Time
	got      bytes.Buffer
}

func (f *fakeStream) Header() http.Header { return f.h }
func (f *fakeStream) WriteHeader(int)     {}
func (f *fakeStream) Flush()              {}

func (f *fakeStream) SetWriteDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline = t
	return nil
}

func (f *fakeStream) Write(p []byte) (int, error) {
	f.mu.Lock()
	stuck, deadline := f.stuck, f.deadline
	f.mu.Unlock()
	if stuck {
		time.Sleep(time.Until(deadline))
		return 0, os.ErrDeadlineExceeded
	}
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got.Write(p)
}

func (f *fakeStream) setStuck() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stuck = true
}

func (f *fakeStream) text() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got.String()
}

// subscribeFake runs an events stream into f; the returned channel is
// closed when its handler returns.
func subscribeFake(t *testing.T, s *Server, f *fakeStream) (cancel func(), ended <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, "GET", "/switchyard/v1/events", nil)
	req.Host = "127.0.0.1:8484"
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServeHTTP(f, req)
	}()
	synctest.Wait()
	return cancel, done
}

// requestEvents are the events the router sends for one request served
// at once.
func requestEvents(id string) []fleet.Event {
	a := &fleet.Attempt{Candidate: "m1", Outcome: fleet.OutcomeSuccess}
	return []fleet.Event{
		{Type: fleet.EventRequestStarted, RequestID: id},
		{Type: fleet.EventAttemptStarted, RequestID: id, Attempt: a},
		{Type: fleet.EventAttempt, RequestID: id, Attempt: a},
		{Type: fleet.EventCommit, RequestID: id, Attempt: a},
		{Type: fleet.EventRequestDone, RequestID: id, Request: &fleet.RequestRecord{ID: id, Status: fleet.StatusOK}},
	}
}

// A subscriber that reads, however slowly, is never dropped by a burst:
// what it has not read yet is coalesced, and every request's end reaches
// it (issue 24: the UI's live view was dropped 2–6 times per burst of 200
// requests).
func TestEventBurstIsCoalescedNotDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := NewHub()
		s := New(Options{Hub: hub, Listen: "127.0.0.1:8484"})
		f := &fakeStream{h: http.Header{}, delay: 50 * time.Millisecond}
		cancel, ended := subscribeFake(t, s, f)
		defer func() { cancel(); <-ended }()

		hub.Observe(fleet.Event{Type: fleet.EventRequestStarted, RequestID: "still-running"})
		const burst = 1000
		for i := range burst {
			for _, e := range requestEvents(fmt.Sprint("r", i)) {
				hub.Observe(e)
			}
		}
		synctest.Wait()
		time.Sleep(time.Second) // a few slow writes
		synctest.Wait()
		if hub.subscribers() != 1 || hub.Dropped() != 0 {
			t.Fatalf("Subscribers() = %d, Dropped() = %d; want the subscriber that reads kept", hub.subscribers(), hub.Dropped())
		}
		got := f.text()
		if n := strings.Count(got, "event: request_done"); n != burst {
			t.Errorf("%d request_done events; want %d, one per request", n, burst)
		}
		if !strings.Contains(got, `"request_id":"still-running"`) {
			t.Error("the start of a request still running was coalesced away")
		}
		if n := strings.Count(got, "event: commit"); n >= burst {
			t.Errorf("%d commit events; want those of finished requests coalesced", n)
		}
	})
}

// A subscriber that reads nothing is dropped within the write timeout,
// whatever the kernel buffers, and at once when its queue passes
// MaxPending (issue 20, item 9).
func TestEventSubscriberThatReadsNothingIsDropped(t *testing.T) {
	t.Run("time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			hub := NewHub()
			s := New(Options{Hub: hub, Listen: "127.0.0.1:8484", WriteTimeout: 10 * time.Second})
			f := &fakeStream{h: http.Header{}}
			cancel, ended := subscribeFake(t, s, f)
			defer cancel()
			f.setStuck()
			start := time.Now()
			hub.Observe(requestEvents("r")[0])
			<-ended
			if waited := time.Since(start); waited > 10*time.Second {
				t.Errorf("dropped after %v; want within the write timeout, 10s", waited)
			}
			if hub.subscribers() != 0 || hub.Dropped() != 1 {
				t.Errorf("Subscribers() = %d, Dropped() = %d; want it dropped and counted", hub.subscribers(), hub.Dropped())
			}
		})
	})
	t.Run("queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			hub := NewHub()
			s := New(Options{Hub: hub, Listen: "127.0.0.1:8484", WriteTimeout: time.Hour})
			f := &fakeStream{h: http.Header{}}
			cancel, ended := subscribeFake(t, s, f)
			defer cancel()
			f.setStuck()
			hub.Observe(fleet.Event{Type: fleet.EventRequestStarted, RequestID: "first"})
			synctest.Wait()                    // its write is stuck
			for i := 0; i <= MaxPending; i++ { // requests that never end: nothing to coalesce
				hub.Observe(fleet.Event{Type: fleet.EventRequestStarted, RequestID: fmt.Sprint("r", i)})
			}
			if hub.subscribers() != 0 || hub.Dropped() != 1 {
				t.Errorf("Subscribers() = %d, Dropped() = %d; want it dropped once %d events wait", hub.subscribers(), hub.Dropped(), MaxPending)
			}
			cancel()
			<-ended
		})
	})
}

// subscribers is how many subscribers there are now.
func (h *Hub) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
