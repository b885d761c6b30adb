package ollama

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream"
)

// maxBody bounds a discovery answer. api.Client reads bodies whole, without
// a limit; a model list or a model's details are kilobytes.
const maxBody = 16 << 20

// Model is one model an Ollama server has pulled (/api/tags, /api/show).
type Model struct {
	Name string // as requests name it, e.g. "qwen3:8b"
	Size int64  // bytes on disk
	// Capabilities are what /api/show reports, e.g. "completion", "tools",
	// "thinking", "vision"; nil when the server reports none (old servers).
	Capabilities []string
	// Thinking reports whether Capabilities include "thinking": the model
	// accepts think and answers with message.thinking.
	Thinking bool
	// Family is the model's family as /api/show reports it ("llama",
	// "qwen3", "gptoss").
	Family string
}

// ThinkLevels reports whether the model takes a reasoning level ("low",
// "medium", "high") for think rather than true or false: gpt-oss, whose
// harmony format ignores a plain true.
func (m Model) ThinkLevels() bool {
	return m.Family == "gptoss" || strings.HasPrefix(strings.ToLower(m.Name), "gpt-oss")
}

// Embeds reports whether the model makes embeddings.
func (m Model) Embeds() bool { return slices.Contains(m.Capabilities, "embedding") }

// EmbedOnly reports whether the model makes nothing but embeddings: its
// server lists "embedding" and not "completion". A server that lists no
// capabilities (an old one) says nothing either way.
func (m Model) EmbedOnly() bool { return m.Embeds() && !slices.Contains(m.Capabilities, "completion") }

// Running is one model resident in an Ollama server's memory (/api/ps).
type Running struct {
	Name     string
	Size     int64 // bytes the loaded model takes
	SizeVRAM int64 // of Size, bytes in GPU memory; less than Size means partly on CPU
	// ExpiresAt is when Ollama unloads the model unless it is used again.
	ExpiresAt time.Time
}

// Models lists the models the server at baseURL has pulled, with their
// capabilities: one /api/tags request, then one /api/show per model. An
// HTTP error status is a *fleet.StatusError; a model that fails to show
// fails the whole list.
func (b *Backend) Models(ctx context.Context, baseURL string) ([]Model, error) {
	cl, err := b.client(baseURL)
	if err != nil {
		return nil, err
	}
	lr, err := cl.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("ollama tags: %w", statusError(err))
	}
	models := make([]Model, 0, len(lr.Models))
	for _, m := range lr.Models {
		sm, err := show(ctx, cl, m.Name)
		if err != nil {
			return nil, err
		}
		sm.Size = m.Size
		models = append(models, sm)
	}
	return models, nil
}

// Show returns what the server at baseURL says about one model
// (/api/show): its capabilities and family. A model the server does not
// have is a *fleet.StatusError with status 404.
func (b *Backend) Show(ctx context.Context, baseURL, model string) (Model, error) {
	cl, err := b.client(baseURL)
	if err != nil {
		return Model{}, err
	}
	return show(ctx, cl, model)
}

func show(ctx context.Context, cl *api.Client, name string) (Model, error) {
	sr, err := cl.Show(ctx, &api.ShowRequest{Model: name})
	if err != nil {
		return Model{}, fmt.Errorf("ollama show %s: %w", name, statusError(err))
	}
	var caps []string
	for _, c := range sr.Capabilities {
		caps = append(caps, string(c))
	}
	return Model{
		Name:         name,
		Capabilities: caps,
		Thinking:     slices.Contains(caps, "thinking"),
		Family:       sr.Details.Family,
	}, nil
}

// Running lists the models resident in the server's memory (/api/ps). A
// model that is not listed will be loaded by its next request.
func (b *Backend) Running(ctx context.Context, baseURL string) ([]Running, error) {
	cl, err := b.client(baseURL)
	if err != nil {
		return nil, err
	}
	pr, err := cl.ListRunning(ctx)
	if err != nil {
		return nil, fmt.Errorf("ollama ps: %w", statusError(err))
	}
	running := make([]Running, 0, len(pr.Models))
	for _, m := range pr.Models {
		running = append(running, Running{Name: m.Name, Size: m.Size, SizeVRAM: m.SizeVRAM, ExpiresAt: m.ExpiresAt})
	}
	return running, nil
}

// Version returns the server's version (/api/version), e.g. "0.17.4".
func (b *Backend) Version(ctx context.Context, baseURL string) (string, error) {
	cl, err := b.client(baseURL)
	if err != nil {
		return "", err
	}
	v, err := cl.Version(ctx)
	if err != nil {
		return "", fmt.Errorf("ollama version: %w", statusError(err))
	}
	return v, nil
}

// Heartbeat reports whether the server at baseURL answers (HEAD /).
func (b *Backend) Heartbeat(ctx context.Context, baseURL string) error {
	cl, err := b.client(baseURL)
	if err != nil {
		return err
	}
	if err := cl.Heartbeat(ctx); err != nil {
		return fmt.Errorf("ollama heartbeat: %w", statusError(err))
	}
	return nil
}

// client returns an official client for baseURL on the pool's transport,
// with answers bounded to maxBody.
func (b *Backend) client(baseURL string) (*api.Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("ollama base url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("ollama base url %q: scheme must be http or https", baseURL)
	}
	pc := b.pool.Client(baseURL)
	rt := pc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc := *pc
	hc.Transport = limitedTransport{rt: rt, limit: maxBody}
	return api.NewClient(u, &hc), nil
}

// limitedTransport cuts response bodies at limit bytes: reading past it
// fails with *http.MaxBytesError.
type limitedTransport struct {
	rt    http.RoundTripper
	limit int64
}

func (t limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = http.MaxBytesReader(nil, resp.Body, t.limit)
	return resp, nil
}

// statusError turns the official client's HTTP errors into
// *fleet.StatusError, so callers classify every adapter's errors alike.
// Other errors pass unchanged.
func statusError(err error) error {
	var se api.StatusError
	if errors.As(err, &se) {
		// The client keeps a body that is not {"error":"..."} whole.
		msg := upstream.ErrorMessage([]byte(se.ErrorMessage))
		out := &fleet.StatusError{
			StatusCode: se.StatusCode,
			Message:    msg,
			Busy:       se.StatusCode == http.StatusTooManyRequests || se.StatusCode == http.StatusServiceUnavailable && upstream.OllamaBusy(msg),
		}
		if se.StatusCode == http.StatusBadRequest {
			out.Unsupported = upstream.Unsupported(msg)
		}
		return out
	}
	var ae api.AuthorizationError
	if errors.As(err, &ae) {
		return &fleet.StatusError{StatusCode: ae.StatusCode, Message: ae.Status}
	}
	return err
}
