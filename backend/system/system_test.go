package system

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/history"
	"github.com/switchyard/switchyard/backend/schema"
	"github.com/switchyard/switchyard/backend/simfleet"
)

func TestInvalidConfigAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte("selection:\n  failure_threshold: 0\nchat:\n  candidates: []\n"), 0o600)
	_, err := New(t.Context(), Options{ConfigPath: path, Addr: "127.0.0.1:0", DBPath: filepath.Join(t.TempDir(), "h.db")})
	if err == nil || !strings.Contains(err.Error(), "selection.failure_threshold") {
		t.Fatalf("New() error = %v; want one naming selection.failure_threshold", err)
	}
	_, err = New(t.Context(), Options{ConfigPath: filepath.Join(t.TempDir(), "missing.yaml"), Addr: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("New() with a missing --config = %v; want a clear error", err)
	}
}

func TestConfigReload(t *testing.T) {
	h := start(t, "")
	cfgPath := h.sys.cfgPath
	events := subscribe(t, h.sys.URL())
	// Open fast-1's breaker so we can see that it survives a reload.
	tk, _ := h.sys.router.Breaker("fast-1").Allow()
	h.sys.router.Breaker("fast-1").Done(tk, 1, "test") // breaker.Failure
	waitConfig := func() map[string]any {
		t.Helper()
		var d map[string]any
		if err := json.Unmarshal(events.next(t, schema.EventConfig), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}

	<-h.sys.watchReady
	// An invalid edit is rejected; the old config keeps serving.
	old, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, []byte(strings.Replace(string(old), "failure_threshold: 100", "failure_threshold: -1", 1)), 0o600)
	if d := waitConfig(); d["ok"] != false || !strings.Contains(fmt.Sprint(d["error"]), "selection.failure_threshold") {
		t.Fatalf("invalid edit: event %v; want rejected naming the key", d)
	}
	doc := h.sys.Config()
	if !strings.Contains(doc.Error, "failure_threshold") || !strings.Contains(doc.YAML, "failure_threshold: 100") {
		t.Errorf("config doc after a rejected edit = %v", doc)
	}
	if got := h.sys.router.Fleet().Settings.Breaker.FailureThreshold; got != 100 {
		t.Errorf("threshold in force = %d; want the old 100", got)
	}

	// A valid edit applies without restart; fast-1's breaker state survives.
	// The deadlines' settings apply too: fast-2's three samples of 50ms
	// are too few, then enough under a floor of 300ms.
	fast2 := h.sys.router.Fleet().Targets[1].Candidate
	h.sys.learner.Seed(fast2.ID, []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond})
	if d, _ := h.sys.learner.FirstToken(fast2, time.Minute); d != time.Minute {
		t.Fatalf("deadline of fast-2 before the edit = %v; want the ceiling", d)
	}
	edited := strings.Replace(string(old), "default_model: fast-1", "default_model: fast-2", 1)
	edited = strings.Replace(edited, "deadline_floor: 100ms", "deadline_floor: 300ms\n  min_samples: 3", 1)
	os.WriteFile(cfgPath, []byte(edited), 0o600)
	if d := waitConfig(); d["ok"] != true {
		t.Fatalf("valid edit: event %v", d)
	}
	if got := h.sys.router.Fleet().DefaultModel; got != "fast-2" {
		t.Errorf("default model = %s; want fast-2", got)
	}
	if d, _ := h.sys.learner.FirstToken(fast2, time.Minute); d != 300*time.Millisecond {
		t.Errorf("deadline of fast-2 after the edit = %v; want the new floor, 300ms", d)
	}
	if f := h.sys.router.Breaker("fast-1").Snapshot().Failures; f != 1 {
		t.Errorf("fast-1 breaker failures = %d after reload; want 1 kept", f)
	}
	r := h.askOpenAI(t, true)
	if r.served != "fast-2" || r.err != nil {
		t.Errorf("after reload served by %s (%v); want fast-2", r.served, r.err)
	}

	// Security settings apply at once too: adding an api_key locks the API.
	os.WriteFile(cfgPath, []byte("api_key: s3cret\n"+edited), 0o600)
	if d := waitConfig(); d["ok"] != true {
		t.Fatalf("api_key edit: event %v", d)
	}
	resp, err := http.Get(h.sys.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("after adding api_key: GET /v1/models = %d; want 401", resp.StatusCode)
	}
}

func TestDemoModeAndStatus(t *testing.T) {
	dir := t.TempDir()
	sys, err := New(t.Context(), Options{Demo: true, Addr: "127.0.0.1:0", ConfigHome: dir, DataHome: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sys.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var st schema.Status
	getJSON(t, sys.URL()+"/switchyard/v1/status", &st)
	// The config shown says the address and history file in force.
	if y := sys.Config().YAML; !strings.Contains(y, "listen: "+sys.Addr()) || !strings.Contains(y, filepath.Join(dir, "switchyard", "demo-history.db")) {
		t.Errorf("the demo's config shows\n%s\nwant listen %s and its own history file", y, sys.Addr())
	}
	// Four servers, two of which serve an embedding model beside their
	// chat model: six candidates.
	if !st.Demo || len(st.Candidates) != 6 || st.Config.Source != string(SourceDemo) {
		t.Fatalf("status = %+v", st)
	}
	for _, c := range st.Candidates[4:] {
		if !c.Embeds || !c.EmbedOnly {
			t.Errorf("%s: embeds %v, embed_only %v; want an embedding model that chats never try", c.ID, c.Embeds, c.EmbedOnly)
		}
	}
	// The demo machine has one simulated GPU per server, said to be
	// simulated, so the GPU panel shows without an NVIDIA card.
	if !st.GPU.Available || !st.GPU.Simulated || len(st.GPU.Devices) != 4 {
		t.Errorf("status gpu = %+v; want four simulated GPUs", st.GPU)
	}
	var demo struct {
		Servers []struct{ Candidate, Fault string }
		Faults  []struct{ Name, Label string }
	}
	getJSON(t, sys.URL()+"/switchyard/v1/demo", &demo)
	if len(demo.Servers) != 4 || len(demo.Faults) < 10 {
		t.Fatalf("demo = %+v", demo)
	}
	resp, err := http.Post(sys.URL()+"/switchyard/v1/demo/fault", "application/json", strings.NewReader(`{"candidate":"qwen3-8b","fault":"close_before_first"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("set fault: %v %v", err, resp)
	}
	resp.Body.Close()
	if f := sys.Demo().Server("qwen3-8b").Fault().String(); f != "close_before_first" {
		t.Errorf("fault = %s", f)
	}
	resp, _ = http.Post(sys.URL()+"/switchyard/v1/demo/fault", "application/json", strings.NewReader(`{"candidate":"qwen3-8b","fault":"explode"}`))
	if resp.StatusCode != 400 {
		t.Errorf("unknown fault: status %d; want 400", resp.StatusCode)
	}
	resp.Body.Close()
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestMain lets the crash test re-execute this binary as a server child.
func TestMain(m *testing.M) {
	if cfg := os.Getenv("SWITCHYARD_CRASH_CHILD"); cfg != "" {
		crashChild(cfg, os.Getenv("SWITCHYARD_CRASH_DB"))
		return
	}
	os.Exit(m.Run())
}

// crashChild serves until it is killed, printing its URL first.
func crashChild(cfgPath, db string) {
	sys, err := New(context.Background(), Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: db})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(sys.URL())
	sys.Run(context.Background())
}

// TestKill9UnderLoad kills the server with SIGKILL while requests stream,
// restarts it on the same database, and checks that it opens clean, that
// every request whose answer the client fully received is recorded, and
// that the breaker state is rebuilt.
func TestKill9UnderLoad(t *testing.T) {
	f, err := simfleet.StartFast(2, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfgPath := fleetConfig(t, f, "selection:\n  open_duration: 10m\n", "fast-1", "")
	db := filepath.Join(filepath.Dir(cfgPath), "history.db")
	refuse, _ := simfleet.ParseFault("refuse")
	f.SetFault("fast-1", refuse) // the primary fails: its breaker opens under load

	child, url := startCrashChild(t, cfgPath, db)

	var mu sync.Mutex
	var answered []string // ids of answers received in full ([DONE] seen)
	progress := make(chan struct{}, 1024)
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if id, ok := streamOnce(ctx, url); ok {
					mu.Lock()
					answered = append(answered, id)
					mu.Unlock()
					select {
					case progress <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	// Kill once enough answers are in: counting, not sleeping.
	guard := time.After(30 * time.Second)
	for n := 0; n < 150; n++ {
		select {
		case <-progress:
		case <-guard:
			n = 150
		}
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	stop()
	wg.Wait()
	if len(answered) < 50 {
		t.Fatalf("only %d answers before the kill", len(answered))
	}

	// The file opens clean.
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	var check string
	raw.QueryRow("PRAGMA integrity_check").Scan(&check)
	raw.Close()
	if check != "ok" {
		t.Fatalf("integrity_check = %q", check)
	}
	// Restart on the same database.
	sys, err := New(t.Context(), Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: db})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer sys.Close()
	missing := 0
	for _, id := range answered {
		if _, err := sys.store.Request(t.Context(), id); err != nil {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d fully answered requests missing from history after kill -9", missing, len(answered))
	}
	if st := sys.router.Breaker("fast-1").Snapshot().State; st != fleet.BreakerOpen {
		t.Errorf("fast-1 breaker after restart = %s; want open again (it was failing when the server died)", st)
	}
	w := httptest.NewRecorder()
	sys.metrics.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(w.Body.String(), `switchyard_breaker_state{candidate="fast-1"} 2`) {
		t.Error("/metrics does not say fast-1's restored breaker is open")
	}
	if st := sys.router.Breaker("fast-2").Snapshot().State; st != fleet.BreakerClosed {
		t.Errorf("fast-2 breaker after restart = %s; want closed", st)
	}
	t.Logf("%d answers before kill -9, all recorded", len(answered))
}

// streamOnce streams one request and returns its id when the answer ended
// with [DONE].
func streamOnce(ctx context.Context, url string) (string, bool) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions",
		strings.NewReader(`{"model":"auto","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		return "", false
	}
	return resp.Header.Get("X-Switchyard-Request-Id"), true
}

// TestVRAMPressureDemo checks GPU pressure end to end in demo mode: the
// demo's simulated reading demotes its candidate in the next ordering, the
// reading shows in status, in history and in the events stream (GPU
// samples), and clearing it restores the order.
func TestVRAMPressureDemo(t *testing.T) {
	dir := t.TempDir()
	sys, err := New(t.Context(), Options{Demo: true, Addr: "127.0.0.1:0", ConfigHome: dir, DataHome: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sys.Run(ctx) }()
	defer func() { cancel(); <-done }()
	events := subscribe(t, sys.URL())

	post := func(fault string) {
		resp, err := http.Post(sys.URL()+"/switchyard/v1/demo/fault", "application/json",
			strings.NewReader(`{"candidate":"qwen3-8b","fault":"`+fault+`"}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("set %s: %v %v", fault, err, resp)
		}
		resp.Body.Close()
	}
	ask := func() (served, id string) {
		resp, err := http.Post(sys.URL()+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"auto","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get("X-Switchyard-Served-Model"), resp.Header.Get("X-Switchyard-Request-Id")
	}

	post(simfleet.VRAMPressure)
	var st schema.Status
	getJSON(t, sys.URL()+"/switchyard/v1/status", &st)
	if c := st.Candidates[0]; c.ID != "qwen3-8b" || !c.Demoted || c.Pressure == nil || !strings.Contains(c.Pressure.Reason, "free") {
		t.Fatalf("status of qwen3-8b under pressure = %+v", c)
	}
	served, id := ask()
	if served != "llama3.2-3b" {
		t.Errorf("under pressure served by %s; want llama3.2-3b (qwen3-8b demoted)", served)
	}
	rec, err := sys.store.Request(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var demoted *fleet.Attempt
	for i, a := range rec.Attempts {
		if a.Candidate == "qwen3-8b" {
			demoted = &rec.Attempts[i]
		}
	}
	if demoted == nil || demoted.Outcome != fleet.OutcomeDemoted || demoted.Reading == nil || demoted.Reading.Source != "simulated" {
		t.Errorf("history lacks the demotion with its reading: %+v", rec.Attempts)
	}

	post("healthy")
	if served, _ := ask(); served != "qwen3-8b" {
		t.Errorf("after recovery served by %s; want qwen3-8b again", served)
	}

	// The sampler publishes GPU and host samples on the events stream: the
	// demo's simulated GPUs, said to be simulated.
	var g schema.GPUEvent
	if err := json.Unmarshal(events.next(t, schema.EventGPU), &g); err != nil {
		t.Fatal(err)
	}
	if !g.GPU.Simulated || len(g.GPU.Devices) == 0 {
		t.Errorf("gpu event = %+v; want the demo's simulated GPUs", g.GPU)
	}
}

// sseEvents are the events of a GET /switchyard/v1/events, read by a
// goroutine of their own until the test ends.
type sseEvents struct{ c chan sseEvent }

type sseEvent struct {
	typ  string
	data []byte
}

// subscribe opens the events stream of the Switchyard at base.
func subscribe(t *testing.T, base string) sseEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/switchyard/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ev := sseEvents{c: make(chan sseEvent, 1024)}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		var typ string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				select {
				case ev.c <- sseEvent{typ, []byte(strings.TrimPrefix(line, "data: "))}:
				default: // the test reads only some types
				}
			}
		}
	}()
	return ev
}

// next returns the data of the next event of type typ, within 10s.
func (e sseEvents) next(t *testing.T, typ schema.EventType) []byte {
	t.Helper()
	guard := time.After(10 * time.Second)
	for {
		select {
		case ev := <-e.c:
			if ev.typ == string(typ) {
				return ev.data
			}
		case <-guard:
			t.Fatalf("no %s event within 10s", typ)
			return nil
		}
	}
}

// TestManyStreamsToOneHealthyServer is a regression test: with a cap on
// connections per upstream host, the 65th concurrent stream waited for a
// connection inside the transport while its first-token deadline ran, was
// recorded as a timeout, and opened the breaker of a healthy server.
func TestManyStreamsToOneHealthyServer(t *testing.T) {
	f, err := simfleet.StartFleet([]simfleet.Member{
		{ID: "slow", Priority: 1, Config: simfleet.Config{Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "slow"}},
			TTFT: 100 * time.Millisecond, TokenGap: 120 * time.Millisecond}},
		{ID: "spare", Priority: 2, Config: simfleet.Config{Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "spare"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfgPath := fleetConfig(t, f, "selection:\n  first_token_timeout: 2s\n  deadline_floor: 2s\n", "slow", "")
	sys, err := New(t.Context(), Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: filepath.Join(filepath.Dir(cfgPath), "h.db")})
	if err != nil {
		t.Fatal(err)
	}
	runSystem(t, sys)

	const streams = 80
	var wg sync.WaitGroup
	var mu sync.Mutex
	served := map[string]int{}
	for range streams {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", sys.URL()+"/v1/chat/completions",
				strings.NewReader(`{"model":"auto","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			served[resp.Header.Get("X-Switchyard-Served-Model")]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if served["slow"] != streams {
		t.Errorf("served = %v; want all %d by the healthy primary", served, streams)
	}
	if st := sys.router.Breaker("slow").Snapshot(); st.State != fleet.BreakerClosed || st.Failures != 0 {
		t.Errorf("healthy primary's breaker = %+v; want closed with no failures", st)
	}
}

// TestShutdownEndsStreamsWithAnErrorEvent stops the server while a slow
// stream is running: the stream gets the grace period, then ends with an
// error event in its protocol (not a silent cut), and its record is in the
// history file when Run returns.
func TestShutdownEndsStreamsWithAnErrorEvent(t *testing.T) {
	f, err := simfleet.StartFleet([]simfleet.Member{{ID: "slow", Priority: 1, Config: simfleet.Config{
		Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "slow"}}, TTFT: time.Millisecond, TokenGap: time.Second, Tokens: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	c := f.Candidates()[0]
	cfgPath, db := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "h.db")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("chat:\n  default_model: slow\n  candidates:\n    - {id: slow, provider: openai, url: %q, model: slow}\n", c.URL)), 0o600)
	sys, err := New(t.Context(), Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: db, ShutdownGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sys.Run(ctx) }()

	resp, err := http.Post(sys.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"auto","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	id := resp.Header.Get("X-Switchyard-Request-Id")
	r := bufio.NewReader(resp.Body)
	if line, _ := r.ReadString('\n'); !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q", line)
	}
	cancel() // SIGTERM
	rest, _ := io.ReadAll(r)
	if !strings.Contains(string(rest), `"error":{"message":"switchyard is shutting down`) {
		t.Errorf("stream ended without the shutdown error event: ...%s", tail(string(rest), 300))
	}
	if strings.Contains(string(rest), "[DONE]") {
		t.Error("a cut-short answer ended with [DONE]")
	}
	if err := <-done; err != nil {
		t.Logf("Run() = %v", err)
	}
	store, err := history.Open(db, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Request(t.Context(), id); err != nil {
		t.Errorf("the interrupted request is not in history: %v", err)
	}
}

// TestShutdownClosesCallersThatDoNotRead stops the server while a caller
// has stopped reading its stream, its handler held in a write to it: the
// stop still ends cleanly, soon after the grace, and the request is
// recorded.
func TestShutdownClosesCallersThatDoNotRead(t *testing.T) {
	f, err := simfleet.StartFleet([]simfleet.Member{{ID: "fast", Priority: 1, Config: simfleet.Config{
		Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "fast"}}, TTFT: time.Millisecond, Tokens: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	cfgPath, db := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "h.db")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("chat:\n  default_model: fast\n  candidates:\n    - {id: fast, provider: openai, url: %q, model: fast}\n", f.Candidates()[0].URL)), 0o600)
	var logged strings.Builder
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&logged, format+"\n", args...)
	}
	sys, err := New(t.Context(), Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", DBPath: db, ShutdownGrace: 200 * time.Millisecond, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sys.Run(ctx) }()

	// A caller that sends its request, reads the head and then nothing.
	conn, err := net.Dial("tcp", sys.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"auto","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", sys.Addr(), len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("X-Switchyard-Request-Id")
	// The socket's buffers fill: the handler waits in a write to the caller.
	for !blockedWriting("backend/httpapi") {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v; want a clean stop", err)
	}
	mu.Lock()
	if !strings.Contains(logged.String(), "closed the connections of callers that did not read") {
		t.Errorf("log does not say it closed the caller's connection:\n%s", logged.String())
	}
	mu.Unlock()
	store, err := history.Open(db, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if r, err := store.Request(t.Context(), id); err != nil || r.Status != fleet.StatusShutdown {
		t.Errorf("record = %+v, %v; want status %s", r.Status, err, fleet.StatusShutdown)
	}
}

// blockedWriting reports whether a goroutine running code of pkg waits
// for its connection to take a write.
func blockedWriting(pkg string) bool {
	buf := make([]byte, 4<<20)
	for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, pkg) && strings.Contains(g, "waitWrite") {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestEmbeddedDefaultDiscovers checks discovery (docs/DESIGN.md,
// "Discovery"): with no config file the
// local Ollama and OpenAI-compatible servers' models become candidates
// (thinking support from Ollama's /api/show), and the demo fleet starts
// only when none answers.
func TestEmbeddedDefaultDiscovers(t *testing.T) {
	f, err := simfleet.StartFleet([]simfleet.Member{
		{ID: "ol", Priority: 1, Config: simfleet.Config{Provider: fleet.ProviderOllama, Models: []simfleet.Model{{Name: "qwen3:8b", Thinking: true}, {Name: "llama3.2:3b"}, {Name: "tiny:latest"}}}},
		{ID: "vl", Priority: 2, Config: simfleet.Config{Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "Qwen/Qwen3-32B"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	sys, err := New(t.Context(), Options{
		ConfigHome: dir, DataHome: dir, Addr: "127.0.0.1:0",
		DiscoverOllama: []string{f.Server("ol").URL(), "http://127.0.0.1:1"},
		DiscoverOpenAI: []string{f.Server("vl").URL()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if sys.Source() != SourceDiscovered || sys.Demo() != nil {
		t.Fatalf("source = %s, demo %v; want discovered", sys.Source(), sys.Demo() != nil)
	}
	fl := sys.router.Fleet()
	var got []string
	for _, tg := range fl.Targets {
		got = append(got, fmt.Sprintf("%s/%s/%v", tg.Candidate.ID, tg.Candidate.Model, tg.Candidate.SupportsThinking))
	}
	if len(got) != 4 || fl.DefaultModel == "" || fl.DeepThinkingModel != "qwen3-8b" {
		t.Errorf("discovered %v default %q deep %q", got, fl.DefaultModel, fl.DeepThinkingModel)
	}
	// Ollama's default tag is left out of the id, as its clients leave it
	// out of the name: tiny, not tiny-latest (listed as tiny-latest:latest).
	if !slices.Contains(got, "tiny/tiny:latest/false") {
		t.Errorf("discovered %v; want tiny:latest as candidate tiny", got)
	}
	if !strings.Contains(sys.Config().YAML, "generated: no config file was found") {
		t.Error("the config doc does not say it was generated")
	}

	none, err := New(t.Context(), Options{ConfigHome: dir, DataHome: t.TempDir(), Addr: "127.0.0.1:0",
		DiscoverOllama: []string{"http://127.0.0.1:1"}, DiscoverOpenAI: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if none.Source() != SourceDemo || none.Demo() == nil {
		t.Errorf("nothing answering: source = %s; want the demo fleet", none.Source())
	}
}

// A taken port is said at once, with the way out, before anything starts:
// no discovery, no demo fleet.
func TestTakenPortIsSaidBeforeAnythingStarts(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var probed atomic.Int32
	ollamaLike := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { probed.Add(1) }))
	defer ollamaLike.Close()
	dir := t.TempDir()
	_, err = New(t.Context(), Options{ConfigHome: dir, DataHome: dir, Addr: taken.Addr().String(),
		DiscoverOllama: []string{ollamaLike.URL}, DiscoverOpenAI: []string{}})
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), taken.Addr().String()) || !strings.Contains(err.Error(), "--addr") {
		t.Fatalf("New() error = %v; want the taken address and --addr", err)
	}
	if n := probed.Load(); n != 0 {
		t.Errorf("discovery ran (%d requests) before the port was known to be free", n)
	}
}

// The desktop app's API takes a free port when its own is taken, and its
// status says which address was taken.
func TestPortFallbackSaysWhy(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	sys, err := New(t.Context(), Options{ConfigHome: dir, DataHome: dir, Addr: taken.Addr().String(), Demo: true, PortFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if st := sys.Status(); st.Listen == taken.Addr().String() || st.ListenTaken != taken.Addr().String() {
		t.Errorf("listen %q, listen_taken %q; want another address, and %s said taken", st.Listen, st.ListenTaken, taken.Addr())
	}
}

// TestHistoryEditsOnReload: a shorter history.retention sweeps at once;
// a new history.path is said to wait for the next start, or to be
// overridden by --db.
func TestHistoryEditsOnReload(t *testing.T) {
	f, err := simfleet.StartFast(1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, db := range []string{"", "flag.db"} {
		dir := t.TempDir()
		cfgPath := fleetConfig(t, f, "history:\n  path: "+filepath.Join(dir, "first.db")+"\n", "fast-1", "")
		var mu sync.Mutex
		var logged []string
		o := Options{ConfigPath: cfgPath, Addr: "127.0.0.1:0", Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, fmt.Sprintf(format, args...))
		}}
		if db != "" {
			o.DBPath = filepath.Join(dir, db)
		}
		sys, err := New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer sys.Close()
		old := fleet.RequestRecord{ID: "old", StartedAt: time.Now().Add(-10 * 24 * time.Hour), Protocol: fleet.ProtocolOpenAI,
			RequestedModel: "auto", Status: fleet.StatusOK}
		if err := sys.store.Record(t.Context(), old); err != nil {
			t.Fatal(err)
		}
		cfg := sys.cfg
		cfg.History.Retention = 5 * 24 * time.Hour
		cfg.History.Path = filepath.Join(dir, "second.db")
		if err := sys.apply(cfg); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the request of 10 days ago is still kept under a retention of 5 days", func() bool {
			_, err := sys.store.Request(t.Context(), "old")
			return errors.Is(err, history.ErrNotFound)
		})
		want := "history.path applies at the next start; the history is written to " + filepath.Join(dir, "first.db")
		if db != "" {
			want = "history.path does not apply: --db " + o.DBPath + " sets the history file"
		}
		mu.Lock()
		if !slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("log = %q; want %q", logged, want)
		}
		mu.Unlock()
		if _, err := os.Stat(filepath.Join(dir, "second.db")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("second.db: %v; want none until the next start", err)
		}
	}
}
