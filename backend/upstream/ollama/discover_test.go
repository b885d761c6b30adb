package ollama

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Bodies as Ollama 0.17 answers them.
const (
	tagsBody = `{"models":[
		{"name":"qwen3:8b","model":"qwen3:8b","modified_at":"2026-07-30T09:12:44.123456+02:00","size":5225388164,"digest":"500a1f067a9f782620b40bee6f7b0c89e17ae61f686b92c24933e4ca4b2b8b41","details":{"parent_model":"","format":"gguf","family":"qwen3","families":["qwen3"],"parameter_size":"8.2B","quantization_level":"Q4_K_M"}},
		{"name":"gemma3:4b","model":"gemma3:4b","modified_at":"2026-07-29T18:01:02.5+02:00","size":3338801804,"digest":"a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a","details":{"parent_model":"","format":"gguf","family":"gemma3","families":["gemma3"],"parameter_size":"4.3B","quantization_level":"Q4_K_M"}}
	]}`
	psBody = `{"models":[{"name":"qwen3:8b","model":"qwen3:8b","size":6654289920,"digest":"500a1f067a9f782620b40bee6f7b0c89e17ae61f686b92c24933e4ca4b2b8b41","details":{"parent_model":"","format":"gguf","family":"qwen3","families":["qwen3"],"parameter_size":"8.2B","quantization_level":"Q4_K_M"},"expires_at":"2026-08-01T10:05:00.5+02:00","size_vram":3327144960,"context_length":4096}]}`
)

// fakeOllama serves the discovery endpoints; show maps a model name to its
// capabilities.
func fakeOllama(t *testing.T, show map[string][]string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/tags", answer(200, "application/json; charset=utf-8", tagsBody))
	mux.HandleFunc("GET /api/ps", answer(200, "application/json; charset=utf-8", psBody))
	mux.HandleFunc("GET /api/version", answer(200, "application/json; charset=utf-8", `{"version":"0.17.4"}`))
	mux.HandleFunc("HEAD /{$}", answer(200, "text/plain; charset=utf-8", ""))
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("show request: %v", err)
		}
		caps, ok := show[req.Model]
		if !ok {
			answer(404, "application/json; charset=utf-8", `{"error":"model '`+req.Model+`' not found"}`)(w, r)
			return
		}
		capsJSON, _ := json.Marshal(caps)
		answer(200, "application/json; charset=utf-8", `{"license":"Apache 2.0","modelfile":"FROM x","template":"{{ .Prompt }}","details":{"format":"gguf"},"model_info":{"general.architecture":"qwen3"},"capabilities":`+string(capsJSON)+`,"modified_at":"2026-07-30T09:12:44+02:00"}`)(w, r)
	})
	return mux
}

func TestModels(t *testing.T) {
	b, _ := newBackend(t)
	srv := serve(t, fakeOllama(t, map[string][]string{
		"qwen3:8b":  {"completion", "tools", "thinking"},
		"gemma3:4b": {"completion", "vision"},
	}))
	got, err := b.Models(t.Context(), srv.URL)
	if err != nil {
		t.Fatalf("Models() error = %v", err)
	}
	want := []Model{
		{Name: "qwen3:8b", Size: 5225388164, Capabilities: []string{"completion", "tools", "thinking"}, Thinking: true},
		{Name: "gemma3:4b", Size: 3338801804, Capabilities: []string{"completion", "vision"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Models() = %+v; want %+v", got, want)
	}
}

func TestModelsShowFails(t *testing.T) {
	b, _ := newBackend(t)
	srv := serve(t, fakeOllama(t, map[string][]string{"qwen3:8b": {"completion"}}))
	_, err := b.Models(t.Context(), srv.URL)
	var se *fleet.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || se.Message != "model 'gemma3:4b' not found" {
		t.Errorf("Models() error = %v; want a 404 *fleet.StatusError for gemma3:4b", err)
	}
}

func TestRunning(t *testing.T) {
	b, _ := newBackend(t)
	srv := serve(t, fakeOllama(t, nil))
	got, err := b.Running(t.Context(), srv.URL)
	if err != nil {
		t.Fatalf("Running() error = %v", err)
	}
	exp, _ := time.Parse(time.RFC3339Nano, "2026-08-01T10:05:00.5+02:00")
	want := []Running{{Name: "qwen3:8b", Size: 6654289920, SizeVRAM: 3327144960, ExpiresAt: exp}}
	if len(got) != 1 || got[0].Name != want[0].Name || got[0].Size != want[0].Size ||
		got[0].SizeVRAM != want[0].SizeVRAM || !got[0].ExpiresAt.Equal(exp) {
		t.Errorf("Running() = %+v; want %+v", got, want)
	}
}

func TestVersionAndHeartbeat(t *testing.T) {
	b, _ := newBackend(t)
	srv := serve(t, fakeOllama(t, nil))
	v, err := b.Version(t.Context(), srv.URL)
	if err != nil || v != "0.17.4" {
		t.Errorf("Version() = %q, %v; want 0.17.4", v, err)
	}
	if err := b.Heartbeat(t.Context(), srv.URL); err != nil {
		t.Errorf("Heartbeat() = %v; want nil", err)
	}
}

func TestDiscoveryErrors(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		check   func(error) bool
	}{
		{
			name:    "500 with Ollama's error body",
			handler: answer(500, "application/json", `{"error":"permission denied reading manifests"}`),
			check: func(err error) bool {
				var se *fleet.StatusError
				return errors.As(err, &se) && se.StatusCode == 500 && se.Message == "permission denied reading manifests" && !se.Busy
			},
		},
		{
			name:    "503 busy",
			handler: answer(503, "application/json", busyBody),
			check: func(err error) bool {
				var se *fleet.StatusError
				return errors.As(err, &se) && se.StatusCode == 503 && se.Busy
			},
		},
		{
			name:    "HTML 502 from a proxy",
			handler: answer(502, "text/html", html502),
			check: func(err error) bool {
				var se *fleet.StatusError
				return errors.As(err, &se) && se.StatusCode == 502 && strings.HasPrefix(se.Message, "<html>") && len(se.Message) <= 203
			},
		},
		{
			name:    "401",
			handler: answer(401, "application/json", `{"error":"unauthorized"}`),
			check: func(err error) bool {
				var se *fleet.StatusError
				return errors.As(err, &se) && se.StatusCode == 401
			},
		},
		{
			name:    "not JSON",
			handler: answer(200, "text/html", "<html>hello</html>"),
			check:   func(err error) bool { return err != nil },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := newBackend(t)
			srv := serve(t, tt.handler)
			if _, err := b.Models(t.Context(), srv.URL); !tt.check(err) {
				t.Errorf("Models() error = %v", err)
			}
			if _, err := b.Running(t.Context(), srv.URL); !tt.check(err) {
				t.Errorf("Running() error = %v", err)
			}
			if _, err := b.Version(t.Context(), srv.URL); !tt.check(err) {
				t.Errorf("Version() error = %v", err)
			}
		})
	}
}

func TestDiscoveryBadURL(t *testing.T) {
	b, _ := newBackend(t)
	for _, u := range []string{"localhost:11434", "ftp://host", "http://[::1"} {
		if _, err := b.Version(t.Context(), u); err == nil {
			t.Errorf("Version(%q) error = nil; want an error", u)
		}
	}
}

func TestLimitedTransport(t *testing.T) {
	srv := serve(t, answer(200, "application/json", strings.Repeat("x", 100)))
	_, pool := newBackend(t)
	hc := *pool.Client(srv.URL)
	for limit, wantErr := range map[int64]bool{100: false, 99: true} {
		hc.Transport = limitedTransport{rt: pool.Client(srv.URL).Transport, limit: limit}
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		var mbe *http.MaxBytesError
		if got := errors.As(err, &mbe); got != wantErr {
			t.Errorf("limit %d: read error = %v; want MaxBytesError %v", limit, err, wantErr)
		}
	}
}
