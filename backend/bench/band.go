package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// Band servers: two simulated servers of one model at one priority, the
// one whose id sorts first the slower (docs/DESIGN.md, "Bands").
const (
	bandSlow, bandFast = "band-a-slow", "band-b-fast"
	bandModel          = "same-model"
	bandSlowTTFT       = 12 * time.Millisecond
	bandFastTTFT       = 3 * time.Millisecond
	bandConcurrency    = 4
)

// BandRow is one balance of a band of two servers of one model: the
// requests per second and the TTFT callers saw, and how many each server
// served.
type BandRow struct {
	Balance string  `json:"balance"`
	RPS     float64 `json:"rps"`
	TTFT    Dist    `json:"ttft"`
	Errors  int     `json:"errors"`
	// Served counts the answers by the server that gave them.
	Served map[string]int `json:"served"`
	// Queued counts the attempts recorded as waits behind other work
	// (fault queued): a liveness check ran for each. None is expected:
	// requests that commit before their deadline cost no check.
	Queued int `json:"queued"`
}

// band measures a band with balance ordered and fastest, one after the
// other, each through a Switchyard of its own in front of the same two
// servers.
func (b *bencher) band(ctx context.Context) error {
	member := func(id string, ttft time.Duration) simfleet.Member {
		return simfleet.Member{ID: id, Priority: 1, Config: simfleet.Config{
			Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: bandModel}},
			TTFT: ttft, Tokens: upTokens,
		}}
	}
	f, err := simfleet.StartFleet([]simfleet.Member{member(bandSlow, bandSlowTTFT), member(bandFast, bandFastTTFT)})
	if err != nil {
		return err
	}
	defer f.Close()
	for _, balance := range []string{"ordered", "fastest"} {
		sy, err := experiment.StartSwitchyard(ctx, experiment.Setup{
			Selection:    map[string]string{"balance": balance, "failure_threshold": neverOpen},
			DefaultModel: bandSlow, Candidates: f.Candidates(), TempDir: b.o.TempDir,
		})
		if err != nil {
			return err
		}
		c := experiment.NewClient(sy.URL()+"/v1", bandConcurrency)
		p := newPath(balance, c, bandModel, true)
		warm(ctx, []path{p}, bandConcurrency)
		start := time.Now()
		got := interleave(ctx, []path{p}, bandConcurrency, b.sz.Failover)[0]
		elapsed := time.Since(start)
		row := BandRow{Balance: balance, Served: map[string]int{}}
		var ttfts []time.Duration
		for _, a := range got {
			if a.Err != nil || a.TTFT == 0 {
				row.Errors++
				continue
			}
			ttfts = append(ttfts, a.TTFT)
			row.Served[a.Served]++
		}
		row.TTFT = dist(ttfts)
		row.RPS = float64(len(got)) / elapsed.Seconds()
		err = eachRecord(ctx, sy, start, func(rec fleet.RequestRecord) {
			for _, at := range rec.Attempts {
				if at.Fault == fleet.FaultQueued {
					row.Queued++
				}
			}
		})
		sy.Close()
		if err != nil {
			return err
		}
		b.rep.Band = append(b.rep.Band, row)
	}
	return nil
}

// bandTable is the band section's table.
func (r *Report) bandTable() table {
	t := table{title: fmt.Sprintf("Bands: two simulated servers of one model at one priority (TTFT %v and %v), streams at concurrency %d, balance ordered against fastest",
		bandSlowTTFT, bandFastTTFT, bandConcurrency),
		head: []string{"balance", "n", "requests/s", "TTFT p50", "TTFT p99", "served by the slow", "served by the fast", "liveness checks", "errors"}}
	for _, row := range r.Band {
		t.rows = append(t.rows, []string{row.Balance, fmt.Sprint(row.TTFT.N), fmt.Sprintf("%.0f", row.RPS), fmtUS(row.TTFT.P50), fmtUS(row.TTFT.P99),
			fmt.Sprint(row.Served[bandSlow]), fmt.Sprint(row.Served[bandFast]), fmt.Sprint(row.Queued), fmt.Sprint(row.Errors)})
	}
	return t
}
