package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/httpapi"
	"github.com/switchyard/switchyard/backend/router"
	"github.com/switchyard/switchyard/backend/upstream"
	"github.com/switchyard/switchyard/backend/upstream/openai"
)

// HistoryResult is what the history costs.
type HistoryResult struct {
	// Writers goroutines call Store.Record directly, Records records in
	// all, each a request row and two attempt rows.
	Writers       int     `json:"writers"`
	Records       int     `json:"records"`
	RecordsPerSec float64 `json:"records_per_s"`
	RowsPerSec    float64 `json:"rows_per_s"`
	Commits       int64   `json:"commits"`
	// Latency is request latency with the history on and off, one row per
	// concurrency and mode.
	Latency []HistoryLatency `json:"latency"`
}

// HistoryLatency compares two Switchyards built alike (router, API,
// upstream pool; no metrics or events) but for the recorder: the SQLite
// history, or none. Requests alternate between them.
type HistoryLatency struct {
	Concurrency int    `json:"concurrency"`
	Stream      bool   `json:"stream"`
	On          Timing `json:"history_on"`
	Off         Timing `json:"history_off"`
	// Added is On − Off total latency.
	Added Added `json:"added_total"`
	// Record is the time spent inside Store.Record per request, and
	// RecordShare its mean over the mean total latency with history on.
	Record      Dist    `json:"record"`
	RecordShare float64 `json:"record_share"`
}

func (b *bencher) history(ctx context.Context) error {
	res := &HistoryResult{}
	if err := b.historyRate(ctx, res); err != nil {
		return err
	}
	b.rep.History = res
	return b.historyLatency(ctx, res)
}

// tempStore opens a history store in a new temporary directory; done
// closes it and removes the directory.
func (b *bencher) tempStore() (_ *history.Store, done func(), err error) {
	dir, err := os.MkdirTemp(b.o.TempDir, "switchyard-history-")
	if err != nil {
		return nil, nil, err
	}
	store, err := history.Open(filepath.Join(dir, "history.db"), history.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return store, func() {
		store.Close()
		os.RemoveAll(dir)
	}, nil
}

// historyRate writes records straight to a fresh store from many
// goroutines, and then reads one: the rate at which records go through
// the journal and the group-committing writer into the tables.
func (b *bencher) historyRate(ctx context.Context, res *HistoryResult) error {
	store, closeStore, err := b.tempStore()
	if err != nil {
		return err
	}
	defer closeStore()
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for range b.sz.HistoryWriters {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1))
				if i > b.sz.HistoryRecords {
					return
				}
				if err := store.Record(ctx, syntheticRecord(fmt.Sprintf("%s-%d", run, i))); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	// Until every record is in the tables: Close commits what the
	// journal holds and moves the inbox. (A query reads what waits
	// beside the tables, and no longer has it moved.)
	if err := store.Close(); err != nil {
		first = cmpErr(first, err)
	}
	took := time.Since(start)
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	res.Writers, res.Records = b.sz.HistoryWriters, b.sz.HistoryRecords
	res.RecordsPerSec = float64(res.Records) / took.Seconds()
	res.RowsPerSec = 3 * res.RecordsPerSec
	res.Commits = store.Commits()
	return nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// syntheticRecord is a fallback request: a failed attempt and a served one.
func syntheticRecord(id string) fleet.RequestRecord {
	now := time.Now()
	return fleet.RequestRecord{
		ID: id, StartedAt: now, Protocol: fleet.ProtocolOpenAI, Stream: true, RequestedModel: "auto",
		ServedCandidate: upID, ServedModel: upID, IsFallback: true, Status: fleet.StatusOK, HTTPStatus: 200,
		TTFT: 3 * time.Millisecond, Latency: 40 * time.Millisecond, PromptTokens: 12, CompletionTokens: 24,
		Attempts: []fleet.Attempt{
			{Candidate: badID, Outcome: fleet.OutcomeError, Error: "HTTP 500: simulated", HTTPStatus: 500, StartedAt: now, Deadline: time.Minute, Duration: time.Millisecond},
			{Candidate: upID, Outcome: fleet.OutcomeSuccess, StartedAt: now, Deadline: time.Minute, TTFT: 2 * time.Millisecond, Duration: 39 * time.Millisecond},
		},
	}
}

// timedRecorder records into a store and keeps how long each Record took,
// for streamed requests and for the others apart.
type timedRecorder struct {
	store *history.Store
	mu    sync.Mutex
	took  map[bool][]time.Duration // by RequestRecord.Stream
}

func (t *timedRecorder) Record(ctx context.Context, rec fleet.RequestRecord) error {
	start := time.Now()
	err := t.store.Record(ctx, rec)
	d := time.Since(start)
	t.mu.Lock()
	t.took[rec.Stream] = append(t.took[rec.Stream], d)
	t.mu.Unlock()
	return err
}

// reset returns the times kept since the last reset, by mode.
func (t *timedRecorder) reset() map[bool][]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	took := t.took
	t.took = make(map[bool][]time.Duration)
	return took
}

// historyLatency compares request latency through two Switchyards that
// differ only in their recorder.
func (b *bencher) historyLatency(ctx context.Context, res *HistoryResult) error {
	f, err := fastFleet()
	if err != nil {
		return err
	}
	defer f.Close()
	store, closeStore, err := b.tempStore()
	if err != nil {
		return err
	}
	defer closeStore()
	timed := &timedRecorder{store: store, took: make(map[bool][]time.Duration)}
	cand := f.Server(upID).Candidate(upID, 1)
	on, err := startComposed(cand, timed)
	if err != nil {
		return err
	}
	defer on.close()
	off, err := startComposed(cand, nil)
	if err != nil {
		return err
	}
	defer off.close()

	for _, c := range []int{1, 8} {
		onClient, offClient := experiment.NewClient(on.url+"/v1", c), experiment.NewClient(off.url+"/v1", c)
		var paths []path
		for _, stream := range modes {
			paths = append(paths, newPath("history on", onClient, upID, stream), newPath("history off", offClient, upID, stream))
		}
		warm(ctx, paths, c)
		timed.reset()
		got := interleave(ctx, paths, c, b.sz.HistoryRequests)
		onClient.CloseIdle()
		offClient.CloseIdle()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.noteErrors(fmt.Sprintf("history c=%d", c), paths, got)
		took := timed.reset()
		for m, stream := range modes {
			row := HistoryLatency{Concurrency: c, Stream: stream, On: timing(got[2*m], stream), Off: timing(got[2*m+1], stream), Record: dist(took[stream])}
			row.Added = added(row.On.Total, row.Off.Total)
			if row.On.Total.Mean > 0 {
				row.RecordShare = row.Record.Mean / row.On.Total.Mean
			}
			res.Latency = append(res.Latency, row)
		}
	}
	return nil
}

// composed is a Switchyard assembled here from its parts (upstream pool,
// OpenAI adapter, router, API) with one candidate and a chosen recorder,
// for comparisons system.New cannot make.
type composed struct {
	url   string
	close func()
}

func startComposed(c fleet.Candidate, rec router.Recorder) (*composed, error) {
	pool := upstream.NewPool(upstream.Settings{})
	r := router.New(router.Fleet{
		Targets:      []router.Target{{Candidate: c, Backend: openai.New(pool)}},
		DefaultModel: c.ID,
	}, router.Deps{Recorder: rec})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	api := httpapi.New(httpapi.Options{Router: r, Listen: ln.Addr().String()})
	srv := api.HTTPServer()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return &composed{url: "http://" + ln.Addr().String(), close: func() {
		srv.Close()
		<-done // http.ErrServerClosed
		pool.CloseIdle()
	}}, nil
}
