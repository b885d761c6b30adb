package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
)

// Alive is a server's answer to the question whether it is alive and
// working, asked when a request's first token is late (docs/DESIGN.md,
// "Shared servers").
type Alive struct {
	// Err is set when the server did not answer in time, or answered an
	// error: it is not alive.
	Err error
	// Idle: it answered and shows itself idle with free slots (llama.cpp's
	// /slots all idle; no request running or waiting in vLLM's or
	// llama.cpp's /metrics), so it is working on nothing, the late request
	// included.
	Idle bool
	// Loading: it is loading the model the late request asked for
	// (Ollama's /api/ps does not list it yet; llama.cpp answers "Loading
	// model"), so the wait is a load, which giving up would abort.
	Loading bool
	// Evidence says what it answered, in plain words.
	Evidence string
	// Progress changes when the server gets on with its work, whoever sent
	// it, and stays the same while it is stuck: Ollama's expiry times in
	// /api/ps (a model's moves when its runner finishes all it was given),
	// llama.cpp's slots (their task and tokens decoded), the tokens
	// generated in /metrics. "" when the server shows nothing of the kind.
	// Compared between two checks, it tells a server that answered others
	// from one that answered nobody (docs/DESIGN.md, "Shared servers").
	Progress string
}

// Alive asks c's server, off any request's connection and within ctx,
// whether it is alive and working. It asks where the answer means
// something: llama.cpp's /slots (not /health, which answers while
// inference hangs), else /metrics (llama.cpp with --metrics, vLLM), else
// /api/ps (an Ollama behind its /v1), else /v1/models. Ollama's /api/ps
// answers while a runner hangs, so for Ollama only the router's "nothing
// completes" rule catches that. The answer also refreshes the server's
// report.
func (p *Poller) Alive(ctx context.Context, c fleet.Candidate) Alive {
	ep, _ := p.lookup(c)
	if ep == nil {
		ep = &endpoint{key: keyOf(c), apiKey: c.APIKey}
	}
	start := time.Now()
	took := func() string { return roundMS(time.Since(start)) }
	if ep.key.provider == fleet.ProviderOllama {
		running, err := p.ps(ctx, ep.key.url)
		if err != nil {
			return Alive{Err: fmt.Errorf("/api/ps: %w", err)}
		}
		ep.rememberSizes(running)
		ep.report.Store(&report{at: p.s.Now(), ollama: true, running: running})
		return ollamaAlive(c, running, took())
	}
	root, err := serverRoot(ep.key.url)
	if err != nil {
		return Alive{Err: err}
	}
	// llama.cpp's /slots: each slot says whether it is processing.
	var slots, busy int
	var progress strings.Builder
	found, err := p.get(ctx, ep, root+"/slots", func(body io.Reader) error {
		var ss []struct {
			IsProcessing *bool `json:"is_processing"`
			State        *int  `json:"state"`
			Task         *int  `json:"id_task"`
			Next         []struct {
				Decoded int `json:"n_decoded"`
			} `json:"next_token"`
		}
		if json.NewDecoder(body).Decode(&ss) != nil {
			return nil
		}
		slots = len(ss)
		progress.WriteString("slots")
		for _, s := range ss {
			working := s.IsProcessing != nil && *s.IsProcessing || s.State != nil && *s.State != 0
			if working {
				busy++
			}
			task, decoded := -1, 0
			if s.Task != nil {
				task = *s.Task
			}
			for _, n := range s.Next {
				decoded += n.Decoded
			}
			fmt.Fprintf(&progress, " %d:%d:%t", task, decoded, working)
		}
		return nil
	})
	switch {
	case loading(err):
		return Alive{Loading: true, Evidence: fmt.Sprintf("alive: loading its model (/slots answered in %s)", took())}
	case err != nil:
		return Alive{Err: err}
	case found && slots > 0:
		ep.report.Store(&report{at: p.s.Now(), llama: &llamaReport{slots: slots, busy: busy}})
		return Alive{Idle: busy == 0, Evidence: fmt.Sprintf("alive: /slots answered in %s; %d of %d slots busy", took(), busy, slots),
			Progress: progress.String()}
	}
	// /metrics: vLLM's running and waiting requests, llama.cpp's with
	// --metrics.
	rep := &report{}
	var processing, generated float64
	found, err = p.get(ctx, ep, root+"/metrics", func(body io.Reader) error {
		return scrapeProm(body, func(name string) bool {
			return wantMetric(name) || name == "llamacpp:requests_processing" || progressMetric(name)
		},
			func(s promSample) {
				switch {
				case s.name == "llamacpp:requests_processing":
					processing += s.value
				case progressMetric(s.name):
					generated += s.value
				default:
					rep.add(s)
				}
			})
	})
	metricsProgress := fmt.Sprintf("metrics %g", generated)
	switch {
	case loading(err):
		return Alive{Loading: true, Evidence: fmt.Sprintf("alive: loading its model (/metrics answered in %s)", took())}
	case err != nil:
		return Alive{Err: err}
	case found && rep.vllm != nil:
		g, _ := rep.gauges(c.Model)
		return Alive{Idle: g.running+g.waiting == 0,
			Evidence: fmt.Sprintf("alive: /metrics answered in %s; %g running, %g waiting", took(), g.running, g.waiting), Progress: metricsProgress}
	case found && rep.llama != nil:
		return Alive{Idle: processing+rep.llama.deferred == 0,
			Evidence: fmt.Sprintf("alive: /metrics answered in %s; %g processing, %g deferred", took(), processing, rep.llama.deferred), Progress: metricsProgress}
	}
	// Ollama behind its OpenAI-compatible /v1: its /api/ps says what it
	// has loaded, so a late request whose model it is loading is waited
	// for there too.
	if running, err := p.ps(ctx, root); err == nil {
		return ollamaAlive(c, running, took())
	}
	// A server that shows no load: that it answers is all it can say.
	found, err = p.get(ctx, ep, strings.TrimRight(ep.key.url, "/")+"/models", func(io.Reader) error { return nil })
	switch {
	case err != nil:
		return Alive{Err: err}
	case !found:
		return Alive{Err: errors.New("/v1/models: not found")}
	}
	return Alive{Evidence: fmt.Sprintf("alive: /v1/models answered in %s (the server shows no queue)", took())}
}

// ollamaAlive is what an Ollama server's /api/ps, answered in took, says
// of c's late request: alive, and loading c's model unless it lists it
// (Ollama lists a model once it has loaded it).
func ollamaAlive(c fleet.Candidate, running []ollama.Running, took string) Alive {
	names := make([]string, 0, len(running))
	var progress strings.Builder
	progress.WriteString("ollama")
	resident := false
	for _, r := range running {
		names = append(names, r.Name)
		fmt.Fprintf(&progress, " %s@%d", r.Name, r.ExpiresAt.UnixNano())
		resident = resident || fleet.SameModel(r.Name, c.Model)
	}
	ev := "alive: /api/ps answered in " + took
	if len(names) > 0 {
		ev += "; resident: " + strings.Join(names, ", ")
	}
	if !resident {
		ev += "; " + c.Model + " not resident yet: loading it"
	}
	return Alive{Evidence: ev, Progress: progress.String(), Loading: !resident}
}

// progressMetric reports whether a /metrics series counts the tokens a
// server has generated, for Alive's Progress.
func progressMetric(name string) bool {
	return name == "vllm:generation_tokens_total" || name == "llamacpp:tokens_predicted_total"
}

// roundMS formats a short duration in milliseconds: "3 ms".
func roundMS(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}
