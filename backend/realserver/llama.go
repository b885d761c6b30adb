package realserver

import (
	"strconv"
	"testing"
	"time"
)

// LlamaOptions configure a llama-server. The zero value serves tiny.gguf as
// "tiny" with a 1024-token context.
type LlamaOptions struct {
	// Model is the GGUF file. Default: the bundle's tiny.gguf.
	Model string
	// Alias is the model name the server reports (-a). Default "tiny".
	// llama-server answers requests naming any model, or none.
	Alias string
	// Context is the context size (-c). Default 1024.
	Context int
	// Parallel is the number of slots (--parallel); 0 leaves llama-server's
	// default (auto).
	Parallel int
	// Embeddings adds --embeddings.
	Embeddings bool
	// Pooling is --pooling (none, mean, cls, last, rank). /v1/embeddings
	// refuses pooling "none" with 400, and tiny.gguf has no pooling type of
	// its own: use "mean" with Embeddings.
	Pooling string
	// Metrics adds --metrics (Prometheus text on /metrics).
	Metrics bool
	// Args are appended to the command line, e.g. "-dio" for a load that
	// really reads the file.
	Args []string
	// NoWait returns as soon as the HTTP port answers at all, while the
	// model may still be loading (/health and the API say 503 "Loading
	// model" until it is loaded); Server.WaitReady waits for the rest.
	NoWait bool
	// StartTimeout bounds the wait for the server. Default 60s.
	StartTimeout time.Duration
}

// LlamaServer starts llama-server on a free port of 127.0.0.1:
//
//	llama-server -m MODEL --host 127.0.0.1 --port P -c CTX --chat-template chatml -t 1 --no-webui -a ALIAS [options]
//
// and waits until /health answers 200 (or only until it answers, with
// NoWait). It skips t when there is no llama-server; t's Cleanup kills it.
func (b *Bundle) LlamaServer(t testing.TB, o LlamaOptions) *Server {
	t.Helper()
	if b.LlamaServerBin == "" {
		t.Skip("realserver: llama-server not found: set " + EnvDir + " or put llama-server on PATH")
	}
	if o.Model == "" {
		o.Model = b.Tiny(t)
	}
	if o.Alias == "" {
		o.Alias = "tiny"
	}
	if o.Context == 0 {
		o.Context = 1024
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	spec := procSpec{
		bin: b.LlamaServerBin,
		args: func(port int) []string {
			a := []string{"-m", o.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
				"-c", strconv.Itoa(o.Context), "--chat-template", "chatml", "-t", "1", "--no-webui", "-a", o.Alias}
			if o.Parallel > 0 {
				a = append(a, "--parallel", strconv.Itoa(o.Parallel))
			}
			if o.Embeddings {
				a = append(a, "--embeddings")
			}
			if o.Pooling != "" {
				a = append(a, "--pooling", o.Pooling)
			}
			if o.Metrics {
				a = append(a, "--metrics")
			}
			return append(a, o.Args...)
		},
		env:        func(int) []string { return cleanEnv() },
		healthPath: "/health",
		anyStatus:  o.NoWait,
		timeout:    o.StartTimeout,
	}
	return b.start(t, "llama-server", spec, t.TempDir())
}
