package bench

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
)

// path is one way to the same answer: a client, its base URL and the body
// it sends, asking for a stream or for one JSON answer.
type path struct {
	name   string
	client *experiment.Client
	body   []byte
	stream bool
	split  *split // nil: not split
}

// split records where the first token of each of a path's streams spent
// its time, from the upstream's marks (simfleet.Server.Marks): the way in,
// from the client sending the request to the upstream having read it, and
// the way out, from the upstream starting to write its first token to the
// client having read it. It records only while on, which is only while
// one request is in flight, so that the marks are that request's.
type split struct {
	marks   func() (arrived, firstToken time.Time)
	on      bool
	in, out []time.Duration
}

// note records a's split, when it has a first token and the upstream's
// marks fall within it.
func (s *split) note(a experiment.Answer) {
	arrived, first := s.marks()
	in, out := arrived.Sub(a.Sent), a.Sent.Add(a.TTFT).Sub(first)
	if a.Err != nil || a.TTFT <= 0 || in <= 0 || out <= 0 {
		return
	}
	s.in, s.out = append(s.in, in), append(s.out, out)
}

// newPath returns the path that asks client for model's answer, streamed
// or not; its name says which.
func newPath(name string, client *experiment.Client, model string, stream bool) path {
	return path{name: name + " (" + modeName(stream) + ")", client: client, body: experiment.ChatBody(model, stream), stream: stream}
}

// send sends the path's request and reads its answer.
func (p path) send(ctx context.Context) experiment.Answer {
	if !p.stream {
		return p.client.Complete(ctx, p.body)
	}
	a := p.client.Chat(ctx, p.body)
	if p.split != nil && p.split.on {
		p.split.note(a)
	}
	return a
}

// modes are the two ways a caller asks for an answer: streamed (true), and
// whole, as one JSON body (false).
var modes = []bool{true, false}

func modeName(stream bool) string {
	if stream {
		return "stream"
	}
	return "non-stream"
}

// interleave sends perPath requests through each path with conc requests
// in flight, interleaved request by request: the k-th request overall goes
// to the paths in an order that rotates every round, so every path meets
// the same machine noise and the same load from the others. It returns
// each path's answers in the order they were sent. It stops early, with
// what it has, when ctx ends.
func interleave(ctx context.Context, paths []path, conc, perPath int) [][]experiment.Answer {
	n := len(paths)
	out := make([][]experiment.Answer, n)
	for i := range out {
		out[i] = make([]experiment.Answer, perPath)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(conc, n*perPath)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= n*perPath {
					return
				}
				round, slot := k/n, k%n
				p := (slot + round) % n
				out[p][round] = paths[p].send(ctx)
			}
		})
	}
	wg.Wait()
	return out
}

// warm sends a few requests through every path so that connections are
// open and code paths are hot before anything is measured.
func warm(ctx context.Context, paths []path, conc int) {
	interleave(ctx, paths, conc, max(2*conc, 16))
}

// Dist summarises a sample of durations, in microseconds.
type Dist struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	Mean float64 `json:"mean_us"`
}

// dist summarises ds (unsorted; it is sorted in place).
func dist(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Dist{
		N:    len(ds),
		P50:  us(experiment.Percentile(ds, 50)),
		P99:  us(experiment.Percentile(ds, 99)),
		Mean: us(sum / time.Duration(len(ds))),
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Timing is what one path's answers looked like. A whole (non-stream)
// answer has no TTFT: its TTFT is empty (N 0).
type Timing struct {
	TTFT  Dist `json:"ttft"`
	Total Dist `json:"total"`
	// Errors counts answers that did not complete; they are left out of
	// the distributions.
	Errors int `json:"errors"`
}

// timing summarises the answers of a path that streams or not: a stream
// without a first token counts as an error.
func timing(answers []experiment.Answer, stream bool) Timing {
	var t Timing
	var ttft, total []time.Duration
	for _, a := range answers {
		if a.Err != nil || (stream && a.TTFT <= 0) {
			t.Errors++
			continue
		}
		if stream {
			ttft = append(ttft, a.TTFT)
		}
		total = append(total, a.Latency)
	}
	t.TTFT, t.Total = dist(ttft), dist(total)
	return t
}

// Added is the latency a path adds to another's, in microseconds, at the
// median and the 99th percentile (differences of percentiles).
type Added struct {
	P50 float64 `json:"p50_us"`
	P99 float64 `json:"p99_us"`
}

func added(a, base Dist) Added {
	return Added{P50: a.P50 - base.P50, P99: a.P99 - base.P99}
}

// ratio is a/b, or nil when b is not positive (no meaningful ratio); it
// is a pointer so that JSON says null rather than failing on NaN.
func ratio(a, b float64) *float64 {
	if b <= 0 || math.IsNaN(a) || math.IsInf(a, 0) {
		return nil
	}
	r := a / b
	return &r
}
