package realserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// OllamaOptions configure an `ollama serve`.
type OllamaOptions struct {
	// Env is added to the server's environment, e.g. "OLLAMA_NUM_PARALLEL=1",
	// "OLLAMA_MAX_QUEUE=1", "OLLAMA_KEEP_ALIVE=0". The test's own OLLAMA_*
	// variables are never passed on.
	Env []string
	// ModelsDir is OLLAMA_MODELS. Default: a new directory in t.TempDir().
	ModelsDir string
	// StartTimeout bounds the wait for the server. Default 30s.
	StartTimeout time.Duration
}

// Ollama starts `ollama serve` with OLLAMA_HOST on a free port of
// 127.0.0.1, its own OLLAMA_MODELS and HOME, and waits until it answers
// GET / with 200. It skips t when there is no ollama; t's Cleanup kills it
// together with the runners it started.
func (b *Bundle) Ollama(t testing.TB, o OllamaOptions) *Server {
	t.Helper()
	if b.OllamaBin == "" {
		t.Skip("realserver: ollama not found: set " + EnvDir + " or put ollama on PATH")
	}
	dir := t.TempDir()
	if o.ModelsDir == "" {
		o.ModelsDir = filepath.Join(dir, "models")
	}
	home := filepath.Join(dir, "home")
	for _, d := range []string{o.ModelsDir, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("realserver: ollama dirs: %v", err)
		}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	spec := procSpec{
		bin:  b.OllamaBin,
		args: func(int) []string { return []string{"serve"} },
		env: func(port int) []string {
			env := cleanEnv("HOME="+home, "OLLAMA_MODELS="+o.ModelsDir,
				"OLLAMA_HOST=127.0.0.1:"+strconv.Itoa(port))
			return append(env, o.Env...)
		},
		healthPath: "/",
		timeout:    o.StartTimeout,
	}
	s := b.start(t, "ollama", spec, dir)
	s.ModelsDir = o.ModelsDir
	s.home = home
	return s
}

// Create runs `ollama create NAME -f MODELFILE` against the server (at most
// two minutes) and fails t when it fails. modelfile is the Modelfile's text;
// see ChatMLModelfile and ThinkingModelfile.
func (s *Server) Create(t testing.TB, name, modelfile string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Modelfile")
	if err := os.WriteFile(path, []byte(modelfile), 0o644); err != nil {
		t.Fatalf("realserver: write Modelfile: %v", err)
	}
	if out, err := s.CLI(t, 2*time.Minute, "create", name, "-f", path); err != nil {
		t.Fatalf("realserver: ollama create %s: %v\n%s", name, err, out)
	}
}

// Load loads model into the server's memory (POST /api/generate with no
// prompt, as `ollama run` does first), for a test whose subject is not
// the first load. A load whose runner dies at start (Ollama answers 500
// "llama-server process has terminated", seen once in a make test in a
// fresh chroot) is tried again, three times at most.
func (s *Server) Load(t testing.TB, model string) {
	t.Helper()
	body := `{"model":` + strconv.Quote(model) + `}`
	var last string
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.Root+"/api/generate", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("realserver: load %s: %v", model, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusOK {
			return
		}
		last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, b)
		if !strings.Contains(string(b), "process has terminated") {
			break
		}
		t.Logf("realserver: load %s on %s: %s; trying again", model, s.Addr, last)
	}
	t.Fatalf("realserver: load %s on %s: %s", model, s.Addr, last)
}

// CLI runs the ollama command line against the server with the given
// arguments (e.g. "list", "ps", "show", "tiny"), kills it (and its process
// group) after timeout, and returns its combined output. `ollama run tiny
// PROMPT` never ends by itself: the random model writes no end token.
func (s *Server) CLI(t testing.TB, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	if s.Kind != "ollama" {
		t.Fatalf("realserver: ollama CLI on a %s", s.Kind)
	}
	return s.bundle.cli(s.home, s.Addr, timeout, args...)
}

// CLI runs the ollama command line against host (host:port, e.g. a
// Switchyard in front of servers), with a home of its own under t's temp
// dir, and kills it after timeout; see Server.CLI.
func (b *Bundle) CLI(t testing.TB, host string, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	if b.OllamaBin == "" {
		t.Skip("realserver: ollama not found: set " + EnvDir + " or put ollama on PATH")
	}
	return b.cli(t.TempDir(), host, timeout, args...)
}

func (b *Bundle) cli(home, host string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.OllamaBin, args...)
	cmd.Env = cleanEnv("HOME="+home, "OLLAMA_HOST="+host, "TERM=dumb", "NO_COLOR=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ChatMLModelfile is a Modelfile for a plain (not thinking-capable) model
// with the ChatML template. gguf must be an absolute path.
func ChatMLModelfile(gguf string) string {
	return "FROM " + gguf + `
TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
"""
PARAMETER stop <|im_end|>
`
}

// ThinkingModelfile is a Modelfile for a model that Ollama reports as
// thinking-capable (its template uses .Thinking and .Think). gguf must be an
// absolute path. The random tiny model never closes <think>, so with
// thinking on everything lands in message.thinking.
func ThinkingModelfile(gguf string) string {
	return "FROM " + gguf + `
TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}
{{ if .Thinking }}<think>{{ .Thinking }}</think>
{{ end }}{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
{{ if .Think }}<think>
{{ end }}"""
PARAMETER stop <|im_end|>
`
}
