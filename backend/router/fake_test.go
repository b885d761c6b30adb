package router

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// step is one scripted upstream event.
type step struct {
	wait  time.Duration // pause before it (fake time under synctest)
	block bool          // never deliver: wait until the attempt is cancelled
	// ping: during the wait, the upstream sends a keep-alive comment this
	// often (its reader waits again after each: BeforeWait's f runs).
	ping  time.Duration
	chunk fleet.Chunk
	err   error
}

// script is what one candidate's upstream does on every call.
type script struct {
	openWait time.Duration // delay before the response headers
	openHang bool          // never answer headers
	openErr  error         // answer with this error instead of a stream
	steps    []step        // after the last step Recv returns io.EOF
}

func tok(s string) step { return step{chunk: fleet.Chunk{Content: s}} }
func finish() step      { return step{chunk: fleet.Chunk{FinishReason: "stop"}} }
func role() step        { return step{chunk: fleet.Chunk{Role: "assistant"}} }
func fail(err error) step {
	return step{err: err}
}

// answer is a complete, healthy stream of tokens.
func answer(tokens ...string) script {
	var s script
	s.steps = append(s.steps, role())
	for _, t := range tokens {
		s.steps = append(s.steps, tok(t))
	}
	s.steps = append(s.steps, finish())
	return s
}

// fakeBackend serves scripted streams, keyed by candidate id, and counts
// what the router opened and closed.
type fakeBackend struct {
	mu      sync.Mutex
	scripts map[string]script
	opened  map[string]int
	closed  map[string]int
}

func newFake(scripts map[string]script) *fakeBackend {
	return &fakeBackend{scripts: scripts, opened: map[string]int{}, closed: map[string]int{}}
}

func (f *fakeBackend) set(id string, s script) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts[id] = s
}

func (f *fakeBackend) counts(id string) (opened, closed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened[id], f.closed[id]
}

func (f *fakeBackend) Open(ctx context.Context, c fleet.Candidate, _ *fleet.Request) (fleet.Stream, error) {
	f.mu.Lock()
	sc, ok := f.scripts[c.ID]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no script for %s", c.ID)
	}
	if sc.openHang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if sc.openWait > 0 {
		if err := sleep(ctx, sc.openWait); err != nil {
			return nil, err
		}
	}
	if sc.openErr != nil {
		return nil, sc.openErr
	}
	f.mu.Lock()
	f.opened[c.ID]++
	f.mu.Unlock()
	return &fakeStream{f: f, id: c.ID, ctx: ctx, steps: sc.steps, done: make(chan struct{})}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type fakeStream struct {
	f     *fakeBackend
	id    string
	ctx   context.Context
	steps []step
	once  sync.Once
	done  chan struct{}
	// before: set by BeforeWait (fleet.Waiter), called before a step
	// that waits.
	before func()
}

func (s *fakeStream) BeforeWait(f func()) { s.before = f }

func (s *fakeStream) Recv() (fleet.Chunk, error) {
	if len(s.steps) == 0 {
		return fleet.Chunk{}, io.EOF
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	if st.block {
		select {
		case <-s.ctx.Done():
			return fleet.Chunk{}, s.ctx.Err()
		case <-s.done:
			return fleet.Chunk{}, io.ErrClosedPipe
		}
	}
	if st.wait > 0 {
		if s.before != nil {
			s.before()
		}
		for left := st.wait; left > 0; {
			d := left
			if st.ping > 0 {
				d = min(left, st.ping)
			}
			if err := sleep(s.ctx, d); err != nil {
				return fleet.Chunk{}, err
			}
			left -= d
			if left > 0 && s.before != nil {
				s.before() // a comment was read; the reader waits again
			}
		}
	}
	select {
	case <-s.done:
		return fleet.Chunk{}, io.ErrClosedPipe
	default:
	}
	if s.ctx.Err() != nil {
		return fleet.Chunk{}, s.ctx.Err()
	}
	return st.chunk, st.err
}

func (s *fakeStream) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.f.mu.Lock()
		s.f.closed[s.id]++
		s.f.mu.Unlock()
	})
	return nil
}

// memRecorder keeps request records in memory.
type memRecorder struct {
	mu   sync.Mutex
	recs []fleet.RequestRecord
}

func (m *memRecorder) Record(_ context.Context, rec fleet.RequestRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, rec)
	return nil
}

func (m *memRecorder) last() fleet.RequestRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.recs) == 0 {
		return fleet.RequestRecord{}
	}
	return m.recs[len(m.recs)-1]
}

func (m *memRecorder) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// memObserver keeps events in memory.
type memObserver struct {
	mu     sync.Mutex
	events []fleet.Event
}

func (m *memObserver) Observe(e fleet.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e.Clone())
}

func (m *memObserver) breakerChanges() []fleet.BreakerChange {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []fleet.BreakerChange
	for _, e := range m.events {
		if e.Type == fleet.EventBreaker {
			out = append(out, *e.Breaker)
		}
	}
	return out
}

// testFleet builds candidates a, b, c (priorities 1, 2, 3) on one fake.
func testFleet(f *fakeBackend, s Settings) Fleet {
	var ts []Target
	for i, id := range []string{"a", "b", "c"} {
		ts = append(ts, Target{Candidate: fleet.Candidate{
			ID: id, Provider: fleet.ProviderOpenAI, Model: "model-" + id, Priority: i + 1,
			Enabled: true, SupportsThinking: id != "a",
		}, Backend: f})
	}
	return Fleet{Targets: ts, DefaultModel: "a", DeepThinkingModel: "b", Settings: s}
}

// drain reads a stream to its end and returns the content and the error
// that ended it (nil for a clean end).
func drain(s *Stream) (string, error) {
	var out []byte
	for {
		ch, err := s.Recv()
		if err == io.EOF {
			return string(out), nil
		}
		if err != nil {
			return string(out), err
		}
		out = append(out, ch.Content...)
	}
}
