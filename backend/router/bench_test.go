package router

import (
	"context"
	"io"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// memBackend serves a fixed answer from memory with no pauses, so the
// benchmark measures the router alone.
type memBackend struct{ chunks []fleet.Chunk }

type memStream struct {
	chunks []fleet.Chunk
	i      int
}

func (m *memBackend) Open(context.Context, fleet.Candidate, *fleet.Request) (fleet.Stream, error) {
	return &memStream{chunks: m.chunks}, nil
}

func (s *memStream) Recv() (fleet.Chunk, error) {
	if s.i == len(s.chunks) {
		return fleet.Chunk{}, io.EOF
	}
	s.i++
	return s.chunks[s.i-1], nil
}

func (s *memStream) Close() error { return nil }

// BenchmarkCommittedStream measures the router's own cost of one streamed
// request (ordering, breaker, probe, commit, record) with n chunks. The
// per-chunk cost is the slope between the two sizes; allocs/op should not
// grow with n.
func BenchmarkCommittedStream(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(map[int]string{1: "chunks=1", 100: "chunks=100"}[n], func(b *testing.B) {
			chunks := []fleet.Chunk{{Role: "assistant"}}
			for range n {
				chunks = append(chunks, fleet.Chunk{Content: "tok"})
			}
			chunks = append(chunks, fleet.Chunk{FinishReason: "stop"})
			be := &memBackend{chunks: chunks}
			r := New(Fleet{Targets: []Target{{Candidate: fleet.Candidate{ID: "a", Enabled: true}, Backend: be}}, DefaultModel: "a"}, Deps{NewID: func() string { return "id" }})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				streamOnce(b, r, ctx)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n+2), "ns/chunk")
		})
	}
}

// streamOnce streams one request through r and reads it to the end.
func streamOnce(tb testing.TB, r *Router, ctx context.Context) {
	s, err := r.Stream(ctx, &fleet.Request{ID: "id"})
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := s.Recv(); err != nil {
			break
		}
	}
	s.Close()
}

// countObserver counts events and keeps none.
type countObserver struct{ n int }

func (c *countObserver) Observe(fleet.Event) { c.n++ }

// A request's live events cost no allocation: they point into the run's
// own memory (fleet.Event), so a streamed request through one candidate,
// observed, allocates only what routing it needs: the run and its plan,
// the attempt with its context, timer and probe buffer, the stream, the
// record's attempts and the copy the recorder gets.
func TestStreamAllocations(t *testing.T) {
	const budget = 15
	obs := &countObserver{}
	be := &memBackend{chunks: []fleet.Chunk{{Role: "assistant"}, {Content: "tok"}, {FinishReason: "stop"}}}
	r := New(Fleet{Targets: []Target{{Candidate: fleet.Candidate{ID: "a", Enabled: true}, Backend: be}}, DefaultModel: "a"},
		Deps{Observer: obs, NewID: func() string { return "id" }})
	ctx := context.Background()
	n := testing.AllocsPerRun(100, func() { streamOnce(t, r, ctx) })
	if obs.n == 0 {
		t.Fatal("the observer saw no events")
	}
	if n > budget {
		t.Errorf("a streamed request allocated %.0f times; want at most %d (did an event copy its attempt again?)", n, budget)
	}
}
