package httpapi

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

func routerEvent() fleet.Event {
	return fleet.Event{Type: fleet.EventCommit, At: time.Unix(1, 0), RequestID: "r", Attempt: &fleet.Attempt{RequestID: "r", Candidate: "a"}}
}

// A request's events cost nothing while nobody subscribes, and reach a
// subscriber once there is one.
func TestObserveUnsubscribedIsFree(t *testing.T) {
	hub := NewHub()
	ev := routerEvent()
	if n := testing.AllocsPerRun(100, func() { hub.Observe(ev) }); n != 0 {
		t.Errorf("Observe without subscribers: %v allocations; want 0", n)
	}
	sub, end := hub.subscribe()
	defer end(false)
	hub.Observe(ev)
	select {
	case <-sub.ready:
	default:
		t.Fatal("the subscriber was not told of the event")
	}
	end(false)
	if n := testing.AllocsPerRun(100, func() { hub.Observe(ev) }); n != 0 {
		t.Errorf("Observe after the last subscriber left: %v allocations; want 0", n)
	}
}

// BenchmarkObserveUnsubscribed is a request event's cost on the hub when
// nobody watches the live view.
func BenchmarkObserveUnsubscribed(b *testing.B) {
	hub := NewHub()
	ev := routerEvent()
	b.ReportAllocs()
	for b.Loop() {
		hub.Observe(ev)
	}
}
