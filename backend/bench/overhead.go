package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// OverheadRow is the overhead at one concurrency for streamed or whole
// answers: each path's timings and what Switchyard (its history on) and
// the bare proxy add to the direct path.
type OverheadRow struct {
	Concurrency int    `json:"concurrency"`
	Stream      bool   `json:"stream"`
	Direct      Timing `json:"direct"`
	Proxy       Timing `json:"proxy"`
	Switchyard  Timing `json:"switchyard"`
	// Added latency, Switchyard − direct and proxy − direct. The TTFT is
	// nil for whole answers, which have none.
	SwitchyardTTFT  *Added `json:"switchyard_added_ttft,omitempty"`
	ProxyTTFT       *Added `json:"proxy_added_ttft,omitempty"`
	SwitchyardTotal Added  `json:"switchyard_added_total"`
	ProxyTotal      Added  `json:"proxy_added_total"`
}

// overheadRow derives the added latencies from the three paths' timings.
func overheadRow(c int, stream bool, direct, proxy, sy Timing) OverheadRow {
	row := OverheadRow{Concurrency: c, Stream: stream, Direct: direct, Proxy: proxy, Switchyard: sy,
		SwitchyardTotal: added(sy.Total, direct.Total), ProxyTotal: added(proxy.Total, direct.Total)}
	if stream {
		syTTFT, pxTTFT := added(sy.TTFT, direct.TTFT), added(proxy.TTFT, direct.TTFT)
		row.SwitchyardTTFT, row.ProxyTTFT = &syTTFT, &pxTTFT
	}
	return row
}

// proxy is a bare httputil.ReverseProxy on 127.0.0.1 that forwards
// everything to target, flushing every write: the baseline any Go router
// in front of an upstream pays. It reads each request body whole before
// forwarding it (see Rewrite).
type proxy struct {
	srv       *http.Server
	ln        net.Listener
	transport *http.Transport
}

func startProxy(target string) (*proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	return startProxyFunc(func(out *url.URL) { out.Scheme, out.Host = u.Scheme, u.Host })
}

// startProxyFunc starts a proxy that forwards each request to the URL
// route makes of the incoming one.
func startProxyFunc(route func(out *url.URL)) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// The same transport settings as Switchyard's upstream pool, minus its
	// cap on connections per host.
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			route(pr.Out.URL)
			pr.Out.Host = pr.Out.URL.Host
			// Forward the body from memory, as Switchyard does. Streaming
			// the caller's body through (the default) makes about one
			// streamed POST in 300 fail under concurrency on Go 1.26: the
			// transport closes the upstream connection mid-answer ("use
			// of closed network connection"); a GET never does.
			if body, err := io.ReadAll(pr.In.Body); err == nil {
				pr.Out.Body = io.NopCloser(bytes.NewReader(body))
				pr.Out.ContentLength = int64(len(body))
			}
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p := &proxy{srv: &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}, ln: ln, transport: tr}
	go p.srv.Serve(ln)
	return p, nil
}

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) close() {
	p.srv.Close()
	p.transport.CloseIdleConnections()
}

// threePaths are the same upstream model straight, through the bare
// proxy and through Switchyard, each with its own client.
type threePaths struct {
	clients [3]*experiment.Client // direct, bare proxy, switchyard
	up      *simfleet.Server      // the upstream of all three
	close   func()
}

// pathNames name threePaths' clients, in order.
var pathNames = [3]string{"direct", "bare proxy", "switchyard"}

func (b *bencher) startThreePaths(ctx context.Context, conns int) (*threePaths, error) {
	f, err := fastFleet()
	if err != nil {
		return nil, err
	}
	up := f.Server(upID)
	px, err := startProxy("http://" + up.Addr())
	if err != nil {
		f.Close()
		return nil, err
	}
	sy, err := b.switchyard(ctx, f, nil)
	if err != nil {
		px.close()
		f.Close()
		return nil, err
	}
	tp := &threePaths{up: up, clients: [3]*experiment.Client{
		experiment.NewClient(up.URL(), conns),
		experiment.NewClient(px.url()+"/v1", conns),
		experiment.NewClient(sy.URL()+"/v1", conns),
	}}
	tp.close = func() {
		for _, c := range tp.clients {
			c.CloseIdle()
		}
		sy.Close()
		px.close()
		f.Close()
	}
	return tp, nil
}

// paths are the three paths for each mode, the streamed ones first:
// direct, bare proxy, switchyard, then the same asking for whole answers.
// The model is the upstream's name, and Switchyard's candidate id.
func (tp *threePaths) paths() []path {
	var ps []path
	for _, stream := range modes {
		for i, c := range tp.clients {
			p := newPath(pathNames[i], c, upID, stream)
			if stream {
				p.split = &split{marks: tp.up.Marks}
			}
			ps = append(ps, p)
		}
	}
	return ps
}

// overhead measures the three paths in both modes, all six interleaved
// request by request, at each concurrency.
func (b *bencher) overhead(ctx context.Context) error {
	tp, err := b.startThreePaths(ctx, maxOf(b.sz.Concurrency))
	if err != nil {
		return err
	}
	defer tp.close()
	paths := tp.paths()
	for _, c := range b.sz.Concurrency {
		warm(ctx, paths, c)
		splitting(paths, c == 1)
		got := interleave(ctx, paths, c, b.sz.Overhead)
		splitting(paths, false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c == 1 {
			b.rep.Split = splitRows(paths)
		}
		for m, stream := range modes {
			i := 3 * m
			row := overheadRow(c, stream, timing(got[i], stream), timing(got[i+1], stream), timing(got[i+2], stream))
			b.rep.Overhead = append(b.rep.Overhead, row)
			b.o.Logf("  c=%d %s: total p50 direct %.0fµs proxy %+.0fµs switchyard %+.0fµs", c, modeName(stream),
				row.Direct.Total.P50, row.ProxyTotal.P50, row.SwitchyardTotal.P50)
		}
		b.noteErrors(fmt.Sprintf("overhead c=%d", c), paths, got)
	}
	return nil
}

// splitting turns the paths' splits on or off.
func splitting(paths []path, on bool) {
	for _, p := range paths {
		if p.split != nil {
			p.split.on = on
		}
	}
}

// SplitRow is where a path's first tokens spent their time at
// concurrency 1: the way in (the client sends the request → the upstream
// has read it) and the way out (the upstream starts writing its first
// token → the client has read it).
type SplitRow struct {
	Path string `json:"path"`
	In   Dist   `json:"in"`
	Out  Dist   `json:"out"`
}

// splitRows are the splits the paths recorded, in their order.
func splitRows(paths []path) []SplitRow {
	var rows []SplitRow
	for _, p := range paths {
		if p.split != nil && len(p.split.in) > 0 {
			rows = append(rows, SplitRow{Path: strings.TrimSuffix(p.name, " (stream)"), In: dist(p.split.in), Out: dist(p.split.out)})
		}
	}
	return rows
}

// noteErrors adds a note for every path some of whose requests failed.
// The paths are healthy, so a failure is a bug or an exhausted machine;
// failed requests are left out of the timings, and the note says how many.
func (b *bencher) noteErrors(section string, paths []path, got [][]experiment.Answer) {
	for i, answers := range got {
		n := 0
		var first error
		for _, a := range answers {
			if a.Err != nil {
				n++
				first = cmp.Or(first, a.Err)
			}
		}
		if n > 0 {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("%s: %d of %d requests through %s failed (first: %v)", section, n, len(answers), paths[i].name, first))
		}
	}
}

func maxOf(xs []int) int {
	m := 1
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// ThroughputRow is requests per second at one concurrency, streamed or
// whole answers.
type ThroughputRow struct {
	Concurrency int  `json:"concurrency"`
	Stream      bool `json:"stream"`
	Rounds      int  `json:"rounds"`
	// Requests per second of each path, over all its rounds.
	Direct     float64 `json:"direct_rps"`
	Proxy      float64 `json:"proxy_rps"`
	Switchyard float64 `json:"switchyard_rps"`
	// RoundRatios are Switchyard's rate over the proxy's, round by round;
	// Ratio is their median, which a burst of noise in one round moves
	// less than the ratio of the totals.
	RoundRatios []float64 `json:"round_ratios"`
	Ratio       *float64  `json:"ratio"`
}

// throughput alternates rounds of requests at one concurrency through each
// path in each mode, all workers on one path at a time, rotating the order
// every round.
func (b *bencher) throughput(ctx context.Context) error {
	c := b.sz.ThroughputConcurrency
	tp, err := b.startThreePaths(ctx, c)
	if err != nil {
		return err
	}
	defer tp.close()
	paths := tp.paths()
	warm(ctx, paths, c)
	n := len(paths)
	took := make([]time.Duration, n)
	count := make([]int, n)
	rows := make([]ThroughputRow, len(modes))
	for m, stream := range modes {
		rows[m] = ThroughputRow{Concurrency: c, Stream: stream, Rounds: b.sz.ThroughputRounds}
	}
	for round := range b.sz.ThroughputRounds {
		rate := make([]float64, n)
		for slot := range n {
			i := (slot + round) % n
			one := paths[i : i+1]
			start := time.Now()
			got := interleave(ctx, one, c, b.sz.ThroughputRequests)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d := time.Since(start)
			ok := 0
			for _, a := range got[0] {
				if a.Err == nil {
					ok++
				}
			}
			took[i] += d
			count[i] += ok
			rate[i] = float64(ok) / d.Seconds()
			b.noteErrors("throughput", one, got)
		}
		for m := range modes {
			if r := ratio(rate[3*m+2], rate[3*m+1]); r != nil {
				rows[m].RoundRatios = append(rows[m].RoundRatios, *r)
			}
		}
	}
	total := func(i int) float64 { return float64(count[i]) / took[i].Seconds() }
	for m := range rows {
		row := &rows[m]
		row.Direct, row.Proxy, row.Switchyard = total(3*m), total(3*m+1), total(3*m+2)
		row.Ratio = median(row.RoundRatios)
	}
	b.rep.Throughput = rows
	return nil
}

// median is the median of xs, nil when there are none.
func median(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	m := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		m = (sorted[len(sorted)/2-1] + m) / 2
	}
	return &m
}
