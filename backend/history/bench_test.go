package history

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// BenchmarkRecord measures Record as the router sees it: callers
// goroutines each record a request with two attempts and wait for its
// commit, then record the next. ns/op is the time per record over all
// callers; p50-µs and p99-µs are the latency of one Record call, what an
// answer's end waits for (docs/DESIGN.md, "Durability").
func BenchmarkRecord(b *testing.B) {
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s := openAt(b, filepath.Join(b.TempDir(), "history.db"), Options{})
			benchRecord(b, s.Record, s.Commits, callers)
		})
	}
}

// benchRecord calls record b.N times from callers goroutines and reports
// the latency of one call and the records per commit.
func benchRecord(b *testing.B, record func(context.Context, fleet.RequestRecord) error, commits func() int64, callers int) {
	recs := make([]fleet.RequestRecord, b.N)
	for i := range recs {
		r := rec(fmt.Sprint("b", i), t0)
		r.Attempts = append([]fleet.Attempt{{
			Candidate: "b", Outcome: fleet.OutcomeError, Fault: fleet.FaultServer, StartedAt: t0,
			Deadline: time.Second, Duration: time.Millisecond, Error: "upstream HTTP 500", HTTPStatus: 500,
		}}, r.Attempts...)
		recs[i] = r
	}
	took := make([][]time.Duration, callers)
	ctx := context.Background()
	before := commits()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for c := range callers {
		took[c] = make([]time.Duration, 0, b.N/callers+1)
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				start := time.Now()
				if err := record(ctx, recs[i]); err != nil {
					b.Error(err)
					return
				}
				took[c] = append(took[c], time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(took...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
	b.ReportMetric(float64(b.N)/float64(max(commits()-before, 1)), "records/commit")
}

// BenchmarkRecordCPU measures what a record costs the machine, the writer
// goroutine's commit and move included: one caller records b.N requests,
// then the writer commits and moves what waits, and the benchmark waits
// for all of them to be in the tables. cpu-µs/record is
// the process's CPU time (user and system) per record, on every core.
func BenchmarkRecordCPU(b *testing.B) {
	s := openAt(b, filepath.Join(b.TempDir(), "history.db"), Options{})
	recs := make([]fleet.RequestRecord, b.N)
	for i := range recs {
		recs[i] = rec(fmt.Sprint("b", i), t0)
	}
	ctx := context.Background()
	b.ReportAllocs()
	before := cpuTime()
	b.ResetTimer()
	for i := range recs {
		if err := s.Record(ctx, recs[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.do(ctx, func() error { s.move(); return nil }); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/record")
}

// BenchmarkQuery measures a query that reads little, where what the query
// does around its SQL shows: a filter that matches nothing, a request's
// detail, and the first page, with nothing waiting beside the tables and
// with a commit's worth waiting in the inbox.
func BenchmarkQuery(b *testing.B) {
	for _, waiting := range []int{0, 64} {
		s := openAt(b, filepath.Join(b.TempDir(), "history.db"), Options{}, hooks{moveAt: -1, moveDelay: -1, viaInbox: true})
		ctx := context.Background()
		if err := s.Import(ctx, randomRecords(1000, 3)); err != nil {
			b.Fatal(err)
		}
		for i := range waiting {
			mustRecord(b, s, rec(fmt.Sprint("w", i), t0))
		}
		s.do(ctx, func() error { return nil }) // into the inbox
		for _, q := range []struct {
			name string
			f    func() error
		}{
			{"nothing", func() error {
				_, err := s.Requests(ctx, Filter{Status: "none", Limit: 50})
				return err
			}},
			{"detail", func() error { _, err := s.Request(ctx, "r00010"); return err }},
			{"first page", func() error { _, err := s.Requests(ctx, Filter{Limit: 50}); return err }},
		} {
			b.Run(fmt.Sprintf("%s/waiting=%d", q.name, waiting), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := q.f(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
