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
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
)

// OverheadRow is the overhead at one concurrency: each path's timings and
// what Switchyard and the bare proxy add to the direct path.
type OverheadRow struct {
	Concurrency int    `json:"concurrency"`
	Direct      Timing `json:"direct"`
	Proxy       Timing `json:"proxy"`
	Switchyard  Timing `json:"switchyard"`
	// Added latency, Switchyard − direct and proxy − direct.
	SwitchyardTTFT  Added `json:"switchyard_added_ttft"`
	ProxyTTFT       Added `json:"proxy_added_ttft"`
	SwitchyardTotal Added `json:"switchyard_added_total"`
	ProxyTotal      Added `json:"proxy_added_total"`
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
// proxy and through Switchyard.
type threePaths struct {
	paths []path // direct, proxy, switchyard
	close func()
}

func (b *bencher) startThreePaths(ctx context.Context, conns int) (*threePaths, error) {
	f, err := fastFleet()
	if err != nil {
		return nil, err
	}
	up := f.Server(upID)
	px, err := startProxy("http://" + hostOf(up.URL()))
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
	body := experiment.ChatBody(upID) // the upstream's model name, and Switchyard's candidate id
	tp := &threePaths{paths: []path{
		{name: "direct", client: experiment.NewClient(up.URL(), conns), body: body},
		{name: "proxy", client: experiment.NewClient(px.url()+"/v1", conns), body: body},
		{name: "switchyard", client: experiment.NewClient(sy.URL()+"/v1", conns), body: body},
	}}
	tp.close = func() {
		for _, p := range tp.paths {
			p.client.CloseIdle()
		}
		sy.Close()
		px.close()
		f.Close()
	}
	return tp, nil
}

// hostOf returns the host:port of an http URL.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Host
}

func (b *bencher) overhead(ctx context.Context) error {
	tp, err := b.startThreePaths(ctx, maxOf(b.sz.Concurrency))
	if err != nil {
		return err
	}
	defer tp.close()
	for _, c := range b.sz.Concurrency {
		warm(ctx, tp.paths, c)
		got := interleave(ctx, tp.paths, c, b.sz.Overhead)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		row := OverheadRow{Concurrency: c, Direct: timing(got[0]), Proxy: timing(got[1]), Switchyard: timing(got[2])}
		row.SwitchyardTTFT = added(row.Switchyard.TTFT, row.Direct.TTFT)
		row.ProxyTTFT = added(row.Proxy.TTFT, row.Direct.TTFT)
		row.SwitchyardTotal = added(row.Switchyard.Total, row.Direct.Total)
		row.ProxyTotal = added(row.Proxy.Total, row.Direct.Total)
		b.rep.Overhead = append(b.rep.Overhead, row)
		b.noteErrors(fmt.Sprintf("overhead c=%d", c), tp.paths, got)
		b.o.Logf("  c=%d: TTFT p50 direct %.0fµs proxy %+.0fµs switchyard %+.0fµs", c, row.Direct.TTFT.P50, row.ProxyTTFT.P50, row.SwitchyardTTFT.P50)
	}
	return nil
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

// ThroughputRow is requests per second at one concurrency.
type ThroughputRow struct {
	Concurrency int `json:"concurrency"`
	Rounds      int `json:"rounds"`
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
// path, all workers on one path at a time, rotating the order every round.
func (b *bencher) throughput(ctx context.Context) error {
	c := b.sz.ThroughputConcurrency
	tp, err := b.startThreePaths(ctx, c)
	if err != nil {
		return err
	}
	defer tp.close()
	warm(ctx, tp.paths, c)
	n := len(tp.paths)
	var took [3]time.Duration
	var count [3]int
	row := &ThroughputRow{Concurrency: c, Rounds: b.sz.ThroughputRounds}
	for round := range b.sz.ThroughputRounds {
		var rate [3]float64
		for slot := range n {
			i := (slot + round) % n
			one := []path{tp.paths[i]}
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
		if r := ratio(rate[2], rate[1]); r != nil {
			row.RoundRatios = append(row.RoundRatios, *r)
		}
	}
	total := func(i int) float64 { return float64(count[i]) / took[i].Seconds() }
	row.Direct, row.Proxy, row.Switchyard = total(0), total(1), total(2)
	if len(row.RoundRatios) > 0 {
		sorted := slices.Clone(row.RoundRatios)
		slices.Sort(sorted)
		m := sorted[len(sorted)/2]
		if len(sorted)%2 == 0 {
			m = (sorted[len(sorted)/2-1] + m) / 2
		}
		row.Ratio = &m
	}
	b.rep.Throughput = row
	return nil
}
