package realserver_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/realserver"
)

var client = &http.Client{Timeout: 30 * time.Second}

// post sends a JSON body and returns the status and the body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// firstRead posts body to root+path on a connection of its own and
// returns what its first read brings.
func firstRead(t *testing.T, root, path, body string) string {
	t.Helper()
	host := strings.TrimPrefix(root, "http://")
	conn, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, host, len(body), body)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("POST %s: read: %v", path, err)
	}
	return string(buf[:n])
}

// checkGone fails t for every pid that still runs.
func checkGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); f[0] != "Z" {
			t.Errorf("process %d survived Kill: %s", pid, b)
		}
	}
}

func TestLlamaServer(t *testing.T) {
	b := realserver.Find(t)
	s := b.LlamaServer(t, realserver.LlamaOptions{Parallel: 1})
	if !strings.HasSuffix(s.URL, "/v1") || !strings.HasPrefix(s.Root, "http://127.0.0.1:") {
		t.Fatalf("URL %q, Root %q", s.URL, s.Root)
	}
	st, body := post(t, s.URL+"/chat/completions",
		`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"seed":1}`)
	if st != 200 {
		t.Fatalf("chat: %d %s", st, body)
	}
	var r struct {
		Choices []struct {
			Message struct{ Content string }
		}
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("chat answer %s: %v", body, err)
	}

	pids := s.Pids()
	if len(pids) == 0 {
		t.Fatal("no live processes before Kill")
	}
	s.Kill()
	checkGone(t, pids)
	if _, err := client.Get(s.Root + "/health"); err == nil {
		t.Error("server still answers after Kill")
	}

	s.Restart(t) // same port again
	if st, body := post(t, s.URL+"/chat/completions",
		`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`); st != 200 {
		t.Fatalf("chat after restart: %d %s", st, body)
	}
}

func TestOllama(t *testing.T) {
	b := realserver.Find(t)
	s := b.Ollama(t, realserver.OllamaOptions{})
	s.Create(t, "tiny", realserver.ChatMLModelfile(b.Tiny(t)))
	st, body := post(t, s.Root+"/api/chat",
		`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"stream":false,"options":{"num_predict":8,"seed":1}}`)
	if st != 200 || !strings.Contains(body, `"done":true`) {
		t.Fatalf("chat: %d %s", st, body)
	}

	// Ollama sends a stream's headers and its first chunk in one write, on
	// both its APIs (FINDINGS.md §14): what simfleet.HeadWithFirstToken
	// copies.
	for _, c := range []struct{ path, body, token string }{
		{"/api/chat", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"stream":true,"options":{"num_predict":4,"seed":1}}`, `"message":{"role":"assistant","content":"`},
		{"/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":4,"seed":1}`, `"delta":{"role":"assistant","content":"`},
	} {
		if got := firstRead(t, s.Root, c.path, c.body); !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") || !strings.Contains(got, c.token) {
			t.Errorf("%s: the first read of a stream is %q; want its headers and its first chunk", c.path, got)
		}
	}

	// The runner (a llama-server) must be among the server's processes.
	pids := s.Pids()
	runner := false
	for _, pid := range pids {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); filepath.Base(exe) == "llama-server" {
			runner = true
		}
	}
	if !runner {
		t.Errorf("no llama-server runner among the processes %v", pids)
	}
	s.Kill()
	checkGone(t, pids)
}

func TestFindSkipsWithoutServers(t *testing.T) {
	t.Setenv(realserver.EnvDir, "")
	t.Setenv("PATH", t.TempDir())
	// Find is given a TB that records its skip, not a subtest: a skipped
	// subtest would be listed among make test's skips, though nothing was
	// left untested.
	rec := &skipRecorder{TB: t}
	ran := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		realserver.Find(rec)
		ran = true
	}()
	<-done
	if ran || !strings.Contains(rec.skipped, realserver.EnvDir) {
		t.Errorf("Find without servers: went on %v, skipped with %q; want a skip that names %s", ran, rec.skipped, realserver.EnvDir)
	}
}

// skipRecorder is a testing.TB whose Skip records its reason and ends the
// goroutine that called it, as testing.T's does.
type skipRecorder struct {
	testing.TB
	skipped string
}

func (s *skipRecorder) Helper() {}

func (s *skipRecorder) Skip(args ...any) {
	s.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestWriteModel(t *testing.T) {
	b := realserver.Find(t)
	path := filepath.Join(t.TempDir(), "small.gguf")
	b.WriteGGUF(t, path, realserver.ModelSpec{Layers: 1, Embd: 128, FF: 256, Heads: 4, Context: 512})
	s := b.LlamaServer(t, realserver.LlamaOptions{Model: path, Alias: "small", Context: 512})
	st, body := post(t, s.URL+"/chat/completions",
		`{"model":"small","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`)
	if st != 200 {
		t.Fatalf("chat: %d %s", st, body)
	}
}

// TestLoadingState shows the 503 "Loading model" answer of a llama-server
// that loads BigModel with direct I/O.
func TestLoadingState(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 0.47 GB model and loads it for seconds")
	}
	b := realserver.Find(t)
	path := filepath.Join(t.TempDir(), "big.gguf")
	b.WriteGGUF(t, path, realserver.BigModel())
	s := b.LlamaServer(t, realserver.LlamaOptions{Model: path, Alias: "big", Args: []string{"-dio"}, NoWait: true})
	resp, err := client.Get(s.Root + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`
	switch {
	case resp.StatusCode == 200:
		t.Log("the model loaded before the first probe: this machine reads it too fast to see the loading state")
	case resp.StatusCode != 503 || string(body) != want:
		t.Errorf("while loading: %d %s, want 503 %s", resp.StatusCode, body, want)
	}
	start := time.Now()
	s.WaitReady(t)
	t.Logf("loaded %v after the first 503", time.Since(start).Round(100*time.Millisecond))
}
