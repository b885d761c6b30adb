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

// intoStream is a memStream that reads into its reader's chunk
// (fleet.IntoReceiver) and keeps the chunks it was given.
type intoStream struct {
	memStream
	got []*fleet.Chunk
}

func (s *intoStream) RecvInto(c *fleet.Chunk) error {
	s.got = append(s.got, c)
	var err error
	*c, err = s.Recv()
	return err
}

type intoBackend struct{ s *intoStream }

func (b intoBackend) Open(context.Context, fleet.Candidate, *fleet.Request) (fleet.Stream, error) {
	return b.s, nil
}

// After the probe's chunks, Stream.RecvInto hands its reader's own chunk
// to an upstream stream that can read into it: no chunk is copied
// through the frames of the read, which are the stack an open stream
// holds while it waits.
func TestRecvIntoReadsIntoTheReadersChunk(t *testing.T) {
	up := &intoStream{memStream: memStream{chunks: []fleet.Chunk{{Role: "assistant"}, {Content: "a"}, {Content: "b"}, {FinishReason: "stop"}}}}
	r := New(Fleet{Targets: []Target{{Candidate: fleet.Candidate{ID: "a", Enabled: true}, Backend: intoBackend{up}}}, DefaultModel: "a"}, Deps{})
	s, err := r.Stream(context.Background(), &fleet.Request{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ch fleet.Chunk
	var text string
	for {
		if err := s.RecvInto(&ch); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		text += ch.Content
	}
	if text != "ab" {
		t.Errorf("read %q; want ab", text)
	}
	if len(up.got) == 0 {
		t.Fatal("the upstream stream was never read into")
	}
	for i, c := range up.got { // the probe reads with Recv, into chunks of its own
		if c != &ch {
			t.Errorf("read %d went into %p, not the reader's chunk %p", i, c, &ch)
		}
	}
}
