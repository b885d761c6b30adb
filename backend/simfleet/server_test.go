package simfleet

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/backend/fleet"
)

// A client that goes away mid-stream is counted as Cancelled and its
// stream closes: OpenStreams returns to 0.
func TestClientCancelClosesStream(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			ctx := testContext(t)
			cfg := p.config("alpha")
			cfg.Tokens = 1000
			cfg.TokenGap = 5 * time.Millisecond // a stream of seconds
			s := start(t, cfg)
			reqCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			resp := mustPost(reqCtx, t, client(t), p, s, p.body(p.model, true, false))
			r := bufio.NewReader(resp.Body)
			for range 3 { // the role chunk or first tokens: the stream is live
				if _, err := p.nextEvent(r); err != nil {
					t.Fatal(err)
				}
			}
			if st := s.Stats(); st.OpenStreams != 1 {
				t.Errorf("Stats() = %+v mid-stream; want one open stream", st)
			}
			cancel()
			waitCancelled(ctx, t, s)
			if st := s.Stats(); st.Completed != 0 {
				t.Errorf("Stats() = %+v; want nothing completed", st)
			}
		})
	}
}

// Close ends hanging requests, leaves no goroutine behind and is
// idempotent; a closed server refuses connections.
func TestCloseEndsEverything(t *testing.T) {
	ctx := testContext(t)
	for _, p := range protos {
		for _, fault := range []string{"hang_headers", "hang_first_token", "role_then_stall"} {
			s, err := Start(p.config("alpha"))
			if err != nil {
				t.Fatal(err)
			}
			setFault(t, s, fault)
			c := &http.Client{Transport: &http.Transport{}}
			done := make(chan error, 1)
			go func() {
				resp, err := post(ctx, t, c, p, s, p.body(p.model, true, false))
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				done <- err
			}()
			if err := s.WaitStats(ctx, func(st Stats) bool { return st.OpenStreams == 1 }); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if err := <-done; err == nil {
				t.Errorf("%s/%s: request succeeded across Close; want an error", p.name, fault)
			}
			if st := s.Stats(); st.OpenStreams != 0 || st.Cancelled != 1 {
				t.Errorf("%s/%s: Stats() after Close = %+v; want the request cancelled", p.name, fault, st)
			}
			s.Close()
			if _, err := post(ctx, t, c, p, s, p.body(p.model, true, false)); err == nil {
				t.Errorf("%s/%s: request after Close succeeded", p.name, fault)
			}
			c.CloseIdleConnections()
		}
	}
	// Also while refusing.
	s, err := Start(protos[0].config("alpha"))
	if err != nil {
		t.Fatal(err)
	}
	setFault(t, s, "refuse")
	s.Close()
	goleak.VerifyNone(t)
}

// vLLM's /metrics, /health and /v1/models.
func TestVLLMEndpoints(t *testing.T) {
	ctx := testContext(t)
	p := protos[1]
	s := start(t, p.config("bravo"))
	c := client(t)
	root := strings.TrimSuffix(s.URL(), "/v1")
	get := func(url string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := get(root + "/health"); code != 200 || body != "" {
		t.Errorf("GET /health = %d %q; want 200 and an empty body", code, body)
	}
	if code, body := get(s.URL() + "/models"); code != 200 ||
		!strings.Contains(body, `"object":"list"`) || !strings.Contains(body, `"id":"Qwen/Qwen3-32B"`) {
		t.Errorf("GET /v1/models = %d %s; want the model list", code, body)
	}

	s.SetKVCacheUsage(0.75)
	s.SetWaiting(3)
	setFault(t, s, "hang_first_token")
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	mustPost(reqCtx, t, c, p, s, p.body(p.model, true, false))
	_, body := get(root + "/metrics")
	for _, want := range []string{
		"# TYPE vllm:kv_cache_usage_perc gauge\n",
		`vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-32B"} 0.75` + "\n",
		`vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-32B"} 3.0` + "\n",
		`vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-32B"} 1.0` + "\n",
		`vllm:num_requests_running{engine="0",model_name="mistral-7b"} 1.0` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	cancel()
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// Ollama's liveness and discovery endpoints, read raw.
func TestOllamaEndpoints(t *testing.T) {
	ctx := testContext(t)
	s := start(t, protos[0].config("alpha"))
	c := client(t)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequestWithContext(ctx, method, s.URL()+"/", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := "Ollama is running"
		if method == http.MethodHead {
			want = ""
		}
		if resp.StatusCode != 200 || string(b) != want {
			t.Errorf("%s / = %d %q; want 200 %q", method, resp.StatusCode, b, want)
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/api/ps", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, field := range []string{`"size":4294967296`, `"size_vram":4294967296`, `"expires_at":`, `"name":"llama3.2:3b"`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("/api/ps = %s; lacks %s", b, field)
		}
	}
}

// A model that is not resident loads (LoadTime) on its next request,
// reports the time as load_duration and is resident again.
func TestLoadTime(t *testing.T) {
	ctx := testContext(t)
	p := protos[0]
	cfg := p.config("alpha")
	cfg.LoadTime = 30 * time.Millisecond
	s := start(t, cfg)
	s.SetResident(p.plain, false)
	resident := func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/api/ps", nil)
		resp, err := client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), p.plain)
	}
	if resident() {
		t.Fatal("/api/ps lists a model set not resident")
	}
	resp := mustPost(ctx, t, client(t), p, s, p.body(p.plain, true, false))
	raw, err := readAll(resp)
	if err != nil {
		t.Fatal(err)
	}
	events := p.events(t, raw)
	if last := decode[ollamaLine](t, events[len(events)-1]); last.LoadDuration != int64(cfg.LoadTime) {
		t.Errorf("load_duration = %d; want %d", last.LoadDuration, cfg.LoadTime)
	}
	if !resident() {
		t.Error("the model is not resident after a request")
	}
}

func TestStartDemo(t *testing.T) {
	ctx := testContext(t)
	f, err := StartDemo()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := []struct {
		id       string
		provider fleet.Provider
		thinking bool
	}{
		{"qwen3-8b", fleet.ProviderOllama, true},
		{"llama3.2-3b", fleet.ProviderOllama, false},
		{"qwen3-32b-vllm", fleet.ProviderOpenAI, true},
		{"mistral-7b-llamacpp", fleet.ProviderOpenAI, false},
	}
	cands := f.Candidates()
	if len(cands) != len(want) {
		t.Fatalf("Candidates() = %+v; want %d", cands, len(want))
	}
	c := client(t)
	for i, w := range want {
		got := cands[i]
		if got.ID != w.id || got.Provider != w.provider || got.SupportsThinking != w.thinking ||
			got.Priority != i+1 || !got.Enabled || !got.Local || got.Model == "" {
			t.Errorf("Candidates()[%d] = %+v; want %s %s thinking=%v priority %d", i, got, w.id, w.provider, w.thinking, i+1)
		}
		s := f.Server(w.id)
		if s == nil || s.URL() != got.URL || s.Name() != w.id {
			t.Fatalf("Server(%s) = %v; want the server at %s", w.id, s, got.URL)
		}
		probe := got.URL + "/api/tags"
		if w.provider == fleet.ProviderOpenAI {
			probe = got.URL + "/models"
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, probe, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), got.Model) {
			t.Errorf("GET %s = %d %s; want the model %s", probe, resp.StatusCode, b, got.Model)
		}
	}
	if f.Server("nope") != nil {
		t.Error("Server(nope) != nil")
	}
}

// A fast fleet answers at once, each server with its own text.
func TestStartFast(t *testing.T) {
	ctx := testContext(t)
	f, err := StartFast(3, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := client(t)
	answers := map[string]bool{}
	for i, cand := range f.Candidates() {
		wantProvider := []fleet.Provider{fleet.ProviderOllama, fleet.ProviderOpenAI}[i%2]
		if cand.Provider != wantProvider || !cand.SupportsThinking {
			t.Errorf("candidate %+v; want provider %s, thinking", cand, wantProvider)
		}
		p := protos[i%2]
		s := f.Server(cand.ID)
		resp := mustPost(ctx, t, c, p, s, p.body(cand.Model, true, true))
		raw, err := readAll(resp)
		if err != nil {
			t.Fatal(err)
		}
		got := p.collect(t, p.events(t, raw))
		if got.content != s.Answer(cand.Model) || !strings.HasPrefix(got.content, cand.ID+" here") {
			t.Errorf("%s answered %q; want %q", cand.ID, got.content, s.Answer(cand.Model))
		}
		answers[got.content] = true
	}
	if len(answers) != 3 {
		t.Errorf("%d distinct answers; want 3", len(answers))
	}
	if err := f.SetFault("nope", Fault{}); !errors.Is(err, ErrNoServer) {
		t.Errorf("SetFault(nope) = %v; want ErrNoServer", err)
	}
	if err := f.SetFault("fast-1", Fault{Kind: FaultEmpty}); err != nil || f.Server("fast-1").Fault().Kind != FaultEmpty {
		t.Errorf("SetFault(fast-1, empty) = %v", err)
	}
	if _, err := StartFleet([]Member{{ID: "a"}, {ID: "a"}}); err == nil {
		t.Error("StartFleet with a duplicate id succeeded")
	}
	if _, err := StartFleet([]Member{{ID: "a", Config: Config{Provider: "grpc"}}}); err == nil {
		t.Error("StartFleet with an unknown provider succeeded")
	}
}

// Faults flip while requests run: no race, and every request is accounted
// for.
func TestConcurrentFaultsAndRequests(t *testing.T) {
	ctx := testContext(t)
	for _, p := range protos {
		s := start(t, p.config("alpha"))
		c := client(t)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 10 {
					reqCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
					if resp, err := post(reqCtx, t, c, p, s, p.body(p.model, true, true)); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					cancel()
				}
			})
		}
		for i := range 30 {
			kinds := []string{"healthy", "empty", "status:500", "refuse", "die_after:2", "hang_first_token", "healthy"}
			setFault(t, s, kinds[i%len(kinds)])
			_ = s.Stats()
			_ = s.Fault()
			s.SetKVCacheUsage(float64(i) / 30)
		}
		setFault(t, s, "healthy")
		wg.Wait()
		if err := s.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.Requests != st.Completed+st.Cancelled || st.OpenStreams != 0 {
			t.Errorf("%s: Stats() = %+v; want every request completed or cancelled", p.name, st)
		}
	}
}

// The demo fleet's extras: an embedding model beside a chat model on one
// Ollama and one vLLM server, and an Ollama whose tool calls have no id.
func TestDemoExtras(t *testing.T) {
	ctx := testContext(t)
	f, err := StartDemo()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tt := range []struct {
		server, path, body, want string
	}{
		{"qwen3-8b", "/api/embed", `{"model":"nomic-embed-text","input":"hi"}`, `"embeddings":[[`},
		{"qwen3-32b-vllm", "/embeddings", `{"model":"Qwen/Qwen3-Embedding-0.6B","input":"hi"}`, `"object":"embedding"`},
		{"llama3.2-3b", "/api/chat", `{"model":"llama3.2:3b","stream":false,"messages":[{"role":"user","content":"hi"}],"tools":[` + weatherTool + `]}`,
			`"tool_calls":[{"function":{"index":0,"name":"get_weather"`},
		{"qwen3-8b", "/api/chat", `{"model":"qwen3:8b","stream":false,"messages":[{"role":"user","content":"hi"}],"tools":[` + weatherTool + `]}`,
			`"tool_calls":[{"id":"call_`},
	} {
		b := postJSON(ctx, t, f.Server(tt.server).URL()+tt.path, tt.body)
		if !strings.Contains(string(b), tt.want) {
			t.Errorf("%s %s = %s; want %s", tt.server, tt.path, b, tt.want)
		}
	}
	dims := map[string]int{"nomic-embed-text:latest": 768, "Qwen/Qwen3-Embedding-0.6B": 1024}
	for _, id := range []string{"qwen3-8b", "qwen3-32b-vllm"} {
		for _, m := range f.Server(id).Config().Models {
			if m.Embedding && m.Dimensions != dims[m.Name] {
				t.Errorf("%s serves %s of %d dimensions; want %d", id, m.Name, m.Dimensions, dims[m.Name])
			}
			delete(dims, m.Name)
		}
	}
	if len(dims) != 0 {
		t.Errorf("embedding models missing from the demo: %v", dims)
	}
	if !f.Server("llama3.2-3b").Config().LegacyToolCalls || f.Server("qwen3-8b").Config().LegacyToolCalls {
		t.Error("want llama3.2-3b, and only it, legacy")
	}
}
