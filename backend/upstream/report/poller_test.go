package report

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/simfleet"
	"github.com/switchyard/switchyard/backend/upstream"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
)

// clock is a settable clock for a Poller's Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeServer is a scripted model server: each path answers with a status
// and body the test sets, and every request is recorded.
type fakeServer struct {
	*httptest.Server
	mu      sync.Mutex
	answers map[string]answer
	hits    []string // paths, in order
	auth    []string // Authorization headers, in order
}

type answer struct {
	status int
	body   string
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{answers: map[string]answer{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits = append(f.hits, r.URL.Path)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		a, ok := f.answers[r.URL.Path]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) answer(path string, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[path] = answer{status, body}
}

func (f *fakeServer) paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hits)
}

func (f *fakeServer) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hits, f.auth = nil, nil
}

// newTestPoller returns a Poller on a pool of its own, closed after the
// test, with a settable clock.
func newTestPoller(t *testing.T, cands ...fleet.Candidate) (*Poller, *clock) {
	t.Helper()
	pool := upstream.NewPool(upstream.Settings{})
	t.Cleanup(pool.CloseIdle)
	clk := newClock()
	p := NewPoller(pool, PollerSettings{Now: clk.now})
	p.Update(cands)
	return p, clk
}

func openaiCand(id, url, model string) fleet.Candidate {
	return fleet.Candidate{ID: id, Provider: fleet.ProviderOpenAI, URL: url, Model: model, Enabled: true}
}

const gib = 1 << 30

func TestPollerOllamaPS(t *testing.T) {
	srv := newFakeServer(t)
	srv.answer("/api/ps", 200, `{"models":[
		{"name":"qwen3:32b","model":"qwen3:32b","size":21474836480,"size_vram":12884901888,"expires_at":"2026-08-01T12:05:00Z"},
		{"name":"llama3.2:latest","model":"llama3.2:latest","size":3221225472,"size_vram":3221225472}]}`)
	big := fleet.Candidate{ID: "big", Provider: fleet.ProviderOllama, URL: srv.URL, Model: "qwen3:32b", Enabled: true}
	small := fleet.Candidate{ID: "small", Provider: fleet.ProviderOllama, URL: srv.URL + "/", Model: "llama3.2", Enabled: true}
	cold := fleet.Candidate{ID: "cold", Provider: fleet.ProviderOllama, URL: srv.URL, Model: "phi4", Enabled: true}
	p, _ := newTestPoller(t, big, small, cold)

	if _, known, _ := p.Residency(big); known {
		t.Error("Residency() before the first poll: known; want unknown")
	}
	p.Poll(t.Context())
	if got := srv.paths(); !slices.Equal(got, []string{"/api/ps"}) {
		t.Errorf("requests = %q; want one /api/ps for the three candidates of one server", got)
	}
	for _, tt := range []struct {
		c               fleet.Candidate
		resident, known bool
	}{{big, true, true}, {small, true, true}, {cold, false, true}} {
		if resident, known, _ := p.Residency(tt.c); resident != tt.resident || known != tt.known {
			t.Errorf("Residency(%s) = %v, %v; want %v, %v", tt.c.ID, resident, known, tt.resident, tt.known)
		}
	}
	if r, ok := p.Spill(big); !ok || r.Size != 20*gib || r.SizeVRAM != 12*gib {
		t.Errorf("Spill(big) = %+v, %v; want 12 of 20 GiB in VRAM", r, ok)
	}
	if _, ok := p.Spill(cold); ok {
		t.Error("Spill(cold) found a model that is not loaded")
	}
	if got := p.SeenSize(small); got != 3*gib {
		t.Errorf("SeenSize(small) = %d; want 3 GiB", got)
	}
	if got := p.SeenSize(cold); got != 0 {
		t.Errorf("SeenSize(cold) = %d; want 0", got)
	}
	other := fleet.Candidate{ID: "x", Provider: fleet.ProviderOllama, URL: "http://127.0.0.1:1", Model: "qwen3:32b", Enabled: true}
	if _, known, _ := p.Residency(other); known {
		t.Error("Residency() of an endpoint never polled: known; want unknown")
	}
}

func TestPollerVLLMMetrics(t *testing.T) {
	const model = "Qwen/Qwen3-32B"
	series := func(name string, v float64) string {
		return fmt.Sprintf("%s{engine=\"0\",model_name=%q} %v\n", name, model, v)
	}
	tests := []struct {
		name    string
		metrics string
		want    VLLM
	}{{
		name:    "kv cache full, requests waiting",
		metrics: "# TYPE vllm:kv_cache_usage_perc gauge\n" + series("vllm:kv_cache_usage_perc", 0.97) + series("vllm:num_requests_waiting", 4) + series("vllm:num_requests_running", 9),
		want:    VLLM{KVCache: 0.97, KVCacheKnown: true, Waiting: 4, Running: 9},
	}, {
		name:    "kv cache fine",
		metrics: series("vllm:kv_cache_usage_perc", 0.5) + series("vllm:num_requests_waiting", 40),
		want:    VLLM{KVCache: 0.5, KVCacheKnown: true, Waiting: 40},
	}, {
		name:    "only the deprecated name",
		metrics: series("vllm:gpu_cache_usage_perc", 0.99),
		want:    VLLM{KVCache: 0.99, KVCacheKnown: true},
	}, {
		name:    "the current name wins over the deprecated one",
		metrics: series("vllm:gpu_cache_usage_perc", 0.99) + series("vllm:kv_cache_usage_perc", 0.5),
		want:    VLLM{KVCache: 0.5, KVCacheKnown: true},
	}, {
		name:    "another model_name: every series counts",
		metrics: "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"qwen\"} 0.2\nvllm:kv_cache_usage_perc{engine=\"1\",model_name=\"qwen\"} 0.98\n",
		want:    VLLM{KVCache: 0.98, KVCacheKnown: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t)
			srv.answer("/metrics", 200, "# HELP python_gc_objects_collected_total Objects collected during gc\n"+tt.metrics)
			c := openaiCand("vllm", srv.URL+"/v1", model)
			p, _ := newTestPoller(t, c)
			p.Poll(t.Context())
			if got, ok := p.VLLM(c); !ok || got != tt.want {
				t.Errorf("VLLM() = %+v, %v; want %+v", got, ok, tt.want)
			}
			if paths := srv.paths(); !slices.Equal(paths, []string{"/metrics"}) {
				t.Errorf("requests = %q; want /metrics only", paths)
			}
			if _, known, _ := p.Residency(c); known {
				t.Error("Residency() of a vLLM candidate: known; want unknown")
			}
		})
	}
}

func TestPollerLlamaCPP(t *testing.T) {
	slot := func(busy bool) string {
		return fmt.Sprintf(`{"id":0,"id_task":-1,"n_ctx":4096,"is_processing":%v}`, busy)
	}
	tests := []struct {
		name    string
		base    string // the candidate's URL path
		answers map[string]answer
		paths   []string
		slots   int
		waiting bool
		loading bool
	}{{
		name:    "metrics off, all slots busy",
		answers: map[string]answer{"/slots": {200, "[" + slot(true) + "," + slot(true) + "]"}},
		paths:   []string{"/metrics", "/slots"},
		slots:   2,
	}, {
		name:    "a slot free",
		answers: map[string]answer{"/slots": {200, "[" + slot(true) + "," + slot(false) + "]"}},
		paths:   []string{"/metrics", "/slots"},
		slots:   2,
	}, {
		name:    "old slots with state",
		answers: map[string]answer{"/slots": {200, `[{"id":0,"state":1},{"id":1,"state":1}]`}},
		paths:   []string{"/metrics", "/slots"},
		slots:   2,
	}, {
		name: "metrics on: deferred requests",
		answers: map[string]answer{"/metrics": {200, "# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 3\nllamacpp:requests_processing 4\n"},
			"/slots": {200, "[" + slot(false) + "]"}},
		paths:   []string{"/metrics"},
		waiting: true,
	}, {
		name:    "metrics on, nothing deferred",
		answers: map[string]answer{"/metrics": {200, "llamacpp:requests_deferred 0\n"}},
		paths:   []string{"/metrics"},
	}, {
		name:    "slots disabled (--no-slots answers 501)",
		answers: map[string]answer{"/slots": {501, `{"error":{"code":501,"message":"This server does not support slots endpoint."}}`}},
		paths:   []string{"/metrics", "/slots"},
	}, {
		name:    "behind a proxy prefix",
		base:    "/llama",
		answers: map[string]answer{"/llama/slots": {200, "[" + slot(true) + "]"}},
		paths:   []string{"/llama/metrics", "/llama/slots"},
		slots:   1,
	}, {
		name:    "loading its model",
		answers: map[string]answer{"/metrics": {503, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`}},
		paths:   []string{"/metrics"},
		loading: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t)
			for path, a := range tt.answers {
				srv.answer(path, a.status, a.body)
			}
			c := openaiCand("llama", srv.URL+tt.base+"/v1", "mistral-7b")
			c.APIKey = "sk-local"
			p, clk := newTestPoller(t, c)
			p.Poll(t.Context())
			l, _ := p.LlamaCPP(c)
			if l.Slots != tt.slots {
				t.Errorf("LlamaCPP().Slots = %d; want %d", l.Slots, tt.slots)
			}
			if waiting := l.Deferred > 0; waiting != tt.waiting {
				t.Errorf("LlamaCPP().Deferred = %v; want requests deferred %v", l.Deferred, tt.waiting)
			}
			if got, at, _ := p.Loading(c); got != tt.loading || at.IsZero() {
				t.Errorf("Loading() = %v at %v; want %v at the poll", got, at, tt.loading)
			}
			if paths := srv.paths(); !slices.Equal(paths, tt.paths) {
				t.Errorf("requests = %q; want %q", paths, tt.paths)
			}
			srv.mu.Lock()
			for _, a := range srv.auth {
				if a != "Bearer sk-local" {
					t.Errorf("Authorization = %q; want the candidate's key", a)
				}
			}
			srv.mu.Unlock()
			// 404 and 501 are "off", not errors: no back-off.
			srv.reset()
			clk.advance(5 * time.Second)
			p.Poll(t.Context())
			if len(srv.paths()) == 0 {
				t.Error("no poll 5s later; want the normal interval")
			}
		})
	}
}

// TestPollerNothingReported: a server without /metrics or /slots (LM
// Studio, or a bare proxy) is polled at the normal interval and reports
// nothing.
func TestPollerNothingReported(t *testing.T) {
	srv := newFakeServer(t)
	c := openaiCand("lmstudio", srv.URL+"/v1", "qwen3-8b")
	p, clk := newTestPoller(t, c)
	for range 3 {
		p.Poll(t.Context())
		clk.advance(5 * time.Second)
	}
	if got := srv.paths(); len(got) != 6 {
		t.Errorf("requests = %q; want /metrics and /slots at 0, 5 and 10s", got)
	}
	if _, ok := p.VLLM(c); ok {
		t.Error("VLLM() of a server that reports nothing: ok")
	}
	_, rep := p.lookup(c)
	if rep == nil || rep.err != nil {
		t.Errorf("report = %+v; want a poll without error", rep)
	}
}

// TestPollerBackoff: failed polls double the interval from 5s up to 60s;
// a success resets it. While polls fail nothing is known about the server.
func TestPollerBackoff(t *testing.T) {
	srv := newFakeServer(t)
	srv.answer("/api/ps", 500, `{"error":"boom"}`)
	c := fleet.Candidate{ID: "o", Provider: fleet.ProviderOllama, URL: srv.URL, Model: "qwen3:8b", Enabled: true}
	p, clk := newTestPoller(t, c)
	start := clk.now()
	var at []time.Duration // when polls happened (a new report), since start
	pollFor := func(d time.Duration) {
		for end := clk.now().Add(d); clk.now().Before(end); clk.advance(time.Second) {
			_, before := p.lookup(c)
			p.Poll(t.Context())
			if _, after := p.lookup(c); after != before {
				at = append(at, clk.now().Sub(start))
			}
		}
	}
	pollFor(190 * time.Second)
	want := []time.Duration{0, 10 * time.Second, 30 * time.Second, 70 * time.Second, 130 * time.Second}
	if !slices.Equal(at, want) {
		t.Errorf("failing polls at %v; want %v", at, want)
	}
	if n := len(srv.paths()); n != len(want) {
		t.Errorf("requests = %d; want %d", n, len(want))
	}
	if _, known, _ := p.Residency(c); known {
		t.Error("Residency() while polls fail: known; want unknown")
	}
	_, rep := p.lookup(c)
	if rep == nil || rep.err == nil || !strings.Contains(rep.err.Error(), "boom") {
		t.Errorf("report = %+v; want the error", rep)
	}
	if err, since := p.Unreachable(c); err == nil || !since.Equal(start) {
		t.Errorf("Unreachable() = %v, %v; want the error since the first failed poll %v", err, since, start)
	}

	srv.answer("/api/ps", 200, `{"models":[{"name":"qwen3:8b","size":5000,"size_vram":5000}]}`)
	at = nil
	pollFor(11 * time.Second)
	want = []time.Duration{190 * time.Second, 195 * time.Second, 200 * time.Second}
	if !slices.Equal(at, want) {
		t.Errorf("polls after recovery at %v; want %v", at, want)
	}
	if resident, known, _ := p.Residency(c); !resident || !known {
		t.Errorf("Residency() after recovery = %v, %v; want true, true", resident, known)
	}
	if err, _ := p.Unreachable(c); err != nil {
		t.Errorf("Unreachable() after recovery = %v; want nil", err)
	}

	// A dead port is an error like any other.
	srv.Close()
	at = nil
	pollFor(20 * time.Second)
	want = []time.Duration{205 * time.Second, 215 * time.Second}
	if !slices.Equal(at, want) {
		t.Errorf("polls of a dead server at %v; want %v", at, want)
	}
	if _, known, _ := p.Residency(c); known {
		t.Error("Residency() of a dead server: known; want unknown")
	}
	if err, since := p.Unreachable(c); err == nil || !since.Equal(start.Add(205*time.Second)) {
		t.Errorf("Unreachable() of a dead server = %v, %v; want failing since its first failed poll", err, since)
	}
}

// TestPollerSimfleet polls simulated servers: Ollama's /api/ps follows
// SetResident, vLLM's /metrics follows SetKVCacheUsage and SetWaiting.
func TestPollerSimfleet(t *testing.T) {
	osrv, err := simfleet.Start(simfleet.Config{Name: "alpha", Models: []simfleet.Model{{Name: "qwen3:8b", SizeBytes: 5 * gib}}})
	if err != nil {
		t.Fatal(err)
	}
	defer osrv.Close()
	vsrv, err := simfleet.Start(simfleet.Config{Name: "beta", Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "Qwen/Qwen3-32B"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer vsrv.Close()
	oc, vc := osrv.Candidate("qwen3-8b", 0), vsrv.Candidate("qwen3-32b-vllm", 1)
	p, clk := newTestPoller(t, oc, vc)
	poll := func() {
		p.Poll(t.Context())
		clk.advance(5 * time.Second)
	}

	poll()
	if resident, known, _ := p.Residency(oc); !resident || !known {
		t.Errorf("Residency() = %v, %v; want true, true", resident, known)
	}
	osrv.SetResident("qwen3:8b", false)
	poll()
	if resident, known, _ := p.Residency(oc); resident || !known {
		t.Errorf("Residency() after unload = %v, %v; want false, true", resident, known)
	}
	if got := p.SeenSize(oc); got != 5*gib {
		t.Errorf("SeenSize() = %d; want the 5 GiB /api/ps showed", got)
	}
	vsrv.SetKVCacheUsage(0.97)
	vsrv.SetWaiting(3)
	poll()
	if got, ok := p.VLLM(vc); !ok || got.KVCache != 0.97 || got.Waiting != 3 {
		t.Errorf("VLLM(vllm) = %+v, %v; want the cache 97%% full and 3 waiting", got, ok)
	}
	if _, ok := p.VLLM(oc); ok {
		t.Error("VLLM(ollama): ok")
	}
}

// TestPollerUpdate: candidates of one server share it; a server that
// stays keeps its readings; disabled candidates are not polled.
func TestPollerUpdate(t *testing.T) {
	ps := &fakePS{}
	ps.set(nil, ollama.Running{Name: "qwen3:8b", Size: 1, SizeVRAM: 1})
	a := fleet.Candidate{ID: "a", Provider: fleet.ProviderOllama, URL: "http://127.0.0.1:11434", Model: "qwen3:8b", Enabled: true}
	b := a
	b.ID, b.Model = "b", "llama3.2:3b"
	off := a
	off.ID, off.URL, off.Enabled = "off", "http://127.0.0.2:11434", false
	p, clk := newTestPoller(t, a, b, off)
	p.ps = ps.list
	p.Poll(t.Context())
	if ps.calls != 1 {
		t.Fatalf("/api/ps polls = %d; want 1 (one server, one disabled)", ps.calls)
	}
	p.Update([]fleet.Candidate{b})
	if resident, known, _ := p.Residency(b); resident || !known {
		t.Errorf("Residency(b) after Update = %v, %v; want the kept reading false, true", resident, known)
	}
	p.Poll(t.Context())
	if ps.calls != 1 {
		t.Errorf("/api/ps polls = %d; want 1 (not due yet)", ps.calls)
	}
	if _, known, _ := p.Residency(a); !known {
		t.Error("Residency(a) unknown: a shares b's server, which stays")
	}
	b.APIKey = "new-key"
	p.Update([]fleet.Candidate{b})
	if _, known, _ := p.Residency(b); known {
		t.Error("Residency(b) after its key changed: known; want a fresh endpoint")
	}
	p.Poll(t.Context())
	if ps.calls != 2 {
		t.Errorf("/api/ps polls = %d; want 2: a new endpoint is due at once", ps.calls)
	}
	p.Update(nil)
	clk.advance(time.Hour)
	p.Poll(t.Context())
	if ps.calls != 2 {
		t.Errorf("/api/ps polls = %d; want 2 after every candidate left", ps.calls)
	}
}

// handlerTransport answers requests in memory, so a Poller can run inside
// a synctest bubble (which must not hold real sockets).
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// TestPollerRun runs the Poller's own loop on virtual time: healthy
// servers every 5s, a failing one backing off, a new candidate polled at
// once, and a clean stop.
func TestPollerRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		hits := map[string][]time.Duration{}
		start := time.Now()
		mux := http.NewServeMux()
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits[r.Host] = append(hits[r.Host], time.Since(start))
			mu.Unlock()
			if r.Host == "bad.invalid:8000" {
				http.Error(w, "boom", http.StatusInternalServerError)
				return
			}
			io.WriteString(w, "vllm:kv_cache_usage_perc 0.1\n")
		})
		ps := &fakePS{}
		p := NewPoller(nil, PollerSettings{})
		p.client = func(string) *http.Client { return &http.Client{Transport: handlerTransport{mux}} }
		p.ps = ps.list
		good, bad := openaiCand("good", "http://good.invalid:8000/v1", "m"), openaiCand("bad", "http://bad.invalid:8000/v1", "m")
		p.Update([]fleet.Candidate{good, bad})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()

		time.Sleep(31 * time.Second)
		synctest.Wait()
		mu.Lock()
		gotGood, gotBad := slices.Clone(hits["good.invalid:8000"]), slices.Clone(hits["bad.invalid:8000"])
		mu.Unlock()
		wantGood := []time.Duration{0, 5e9, 10e9, 15e9, 20e9, 25e9, 30e9}
		wantBad := []time.Duration{0, 10e9, 30e9}
		if !slices.Equal(gotGood, wantGood) {
			t.Errorf("healthy server polled at %v; want %v", gotGood, wantGood)
		}
		if !slices.Equal(gotBad, wantBad) {
			t.Errorf("failing server polled at %v; want %v", gotBad, wantBad)
		}

		o := fleet.Candidate{ID: "o", Provider: fleet.ProviderOllama, URL: "http://ollama.invalid:11434", Model: "qwen3:8b", Enabled: true}
		p.Update([]fleet.Candidate{good, bad, o})
		synctest.Wait()
		if ps.calls != 1 {
			t.Errorf("/api/ps polls right after Update = %d; want 1", ps.calls)
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v; want nil", err)
		}
	})
}

func TestServerRoot(t *testing.T) {
	tests := []struct{ base, want string }{
		{"http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"},
		{"http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000"},
		{"http://gpu-box.invalid:8080", "http://gpu-box.invalid:8080"},
		{"https://proxy.invalid/vllm/v1?x=1", "https://proxy.invalid/vllm"},
		{"http://[::1]:8000/v1", "http://[::1]:8000"},
	}
	for _, tt := range tests {
		if got, err := serverRoot(tt.base); err != nil || got != tt.want {
			t.Errorf("serverRoot(%q) = %q, %v; want %q", tt.base, got, err, tt.want)
		}
	}
	if _, err := serverRoot("ftp://host/v1"); err == nil {
		t.Error("serverRoot(ftp) = nil error; want one")
	}
}

// fakePS is an Ollama /api/ps answer the test sets, installed into a
// Poller so that no socket is needed.
type fakePS struct {
	mu      sync.Mutex
	running []ollama.Running
	err     error
	calls   int
}

func (f *fakePS) list(ctx context.Context, baseURL string) ([]ollama.Running, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return append([]ollama.Running(nil), f.running...), f.err
}

func (f *fakePS) set(err error, running ...ollama.Running) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running, f.err = running, err
}

// TestMain fails the package when a goroutine outlives the tests: the
// Poller must stop cleanly, and no poll may leave a connection behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
