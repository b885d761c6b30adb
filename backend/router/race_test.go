package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/breaker"
	"github.com/switchyard/switchyard/backend/fleet"
)

// randomBackend answers every call with a freshly randomized script:
// random pauses, and random failures before or after the first token.
// Every token names its candidate and its position: "b:3|".
type randomBackend struct {
	mu  sync.Mutex
	rng *rand.Rand
}

const answerLen = 8

func (f *randomBackend) Open(ctx context.Context, c fleet.Candidate, _ *fleet.Request) (fleet.Stream, error) {
	f.mu.Lock()
	mode, waits := f.rng.IntN(6), make([]time.Duration, answerLen+2)
	for i := range waits {
		waits[i] = time.Duration(f.rng.IntN(50)) * time.Millisecond
	}
	dieAt := f.rng.IntN(answerLen)
	f.mu.Unlock()
	if mode == 0 {
		return nil, errRefused
	}
	steps := []step{{wait: waits[0], chunk: fleet.Chunk{Role: "assistant"}}}
	switch mode {
	case 1: // error before the first token
		steps = append(steps, step{wait: waits[1], err: &fleet.EventError{Message: "boom"}})
	case 2: // empty answer
		steps = append(steps, step{wait: waits[1], chunk: fleet.Chunk{FinishReason: "stop"}})
	default: // tokens, dying part-way in mode 3
		for i := range answerLen {
			if mode == 3 && i == dieAt {
				steps = append(steps, step{wait: waits[i+1], err: fleet.ErrTruncated})
				break
			}
			steps = append(steps, step{wait: waits[i+1], chunk: fleet.Chunk{Content: fmt.Sprintf("%s:%d|", c.ID, i)}})
		}
		if mode != 3 {
			steps = append(steps, step{chunk: fleet.Chunk{FinishReason: "stop"}})
		}
	}
	return &fakeStream{f: newFake(nil), id: c.ID, ctx: ctx, steps: steps, done: make(chan struct{})}, nil
}

func TestRandomizedCommitDeliversEachChunkOnceInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		b := &randomBackend{rng: rand.New(rand.NewPCG(seed, 1))}
		var ts []Target
		for i, id := range []string{"a", "b", "c", "d"} {
			ts = append(ts, Target{Candidate: fleet.Candidate{ID: id, Priority: i, Enabled: true}, Backend: b})
		}
		// A high threshold keeps every candidate in play.
		r := New(Fleet{Targets: ts, DefaultModel: "a", Settings: Settings{
			FirstTokenTimeout: time.Second,
			Breaker:           breaker.Settings{FailureThreshold: 1 << 30},
		}}, Deps{})

		var wg sync.WaitGroup
		for n := range 300 {
			wg.Go(func() {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if n%7 == 0 { // some callers leave at a random moment
					time.AfterFunc(time.Duration(n%90)*time.Millisecond, cancel)
				}
				s, err := r.Stream(ctx, &fleet.Request{})
				if err != nil {
					var e *Error
					if !errors.As(err, &e) {
						t.Errorf("request %d: error %v is not an *Error", n, err)
					}
					return
				}
				defer s.Close()
				served := s.Meta().Candidate.ID
				want := 0
				for {
					ch, err := s.Recv()
					if err == io.EOF {
						// Every candidate that answered answered empty:
						// the empty answer is the answer.
						if want != answerLen && (!s.empty || want != 0) {
							t.Errorf("request %d: clean end after %d tokens; want %d", n, want, answerLen)
						}
						return
					}
					if err != nil {
						return // died after commit, or the caller left: a prefix is fine
					}
					if ch.Content == "" {
						continue
					}
					if got, exp := ch.Content, fmt.Sprintf("%s:%d|", served, want); got != exp {
						t.Errorf("request %d served by %s: chunk %q; want %q (mixed, lost or repeated output)", n, served, got, exp)
						return
					}
					want++
				}
			})
		}
		wg.Wait()
	})
}
