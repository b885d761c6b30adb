package system

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/realserver"
)

// These tests pin SPEC 2.4 "Shared servers" (docs/DESIGN.md): another
// client's work on the same real server is load, not sickness, and frozen
// servers are still caught.

// learnedSelection learns a short deadline after three warm answers, so
// that another client's work outlasts it.
const learnedSelection = quietSelection + "  min_samples: 3\n  deadline_floor: 300ms\n  ttft_multiplier: 1\n"

// warm sends n small answers to id so that its deadline is learned.
func warm(t *testing.T, sy *realSwitchyard, id string, n int) {
	t.Helper()
	for range n {
		if a := chat(t, sy.url, "/v1/chat/completions", openaiBody(id, true, `,"max_tokens":4`)); a.status != 200 {
			t.Fatalf("warm-up of %s: %d %s", id, a.status, a.body)
		}
	}
	if d := sy.candidateState(id).DeadlineMS; d > 1000 {
		t.Fatalf("%s's learned deadline = %d ms; want a short one", id, d)
	}
}

// otherClient keeps a server busy with long answers sent straight to it,
// as Open WebUI or `ollama run` would; it returns when they are done.
func otherClient(t *testing.T, url, path, body string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if a := chatCtx(t.Context(), url, path, body, nil); a.status != 200 {
				t.Errorf("the other client: %d %s", a.status, a.body)
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // its requests reach the server first
	return &wg
}

// busyRequests sends n requests through Switchyard while a server is busy
// with another client's work, and checks that none of them blamed it.
func busyRequests(t *testing.T, sy *realSwitchyard, model string, n int, wantServed string) {
	t.Helper()
	for i := range n {
		a := chat(t, sy.url, "/v1/chat/completions", openaiBody(model, true, `,"max_tokens":4`))
		if a.status != 200 || !a.complete {
			t.Errorf("request %d while the server is busy: status %d %s", i, a.status, a.body)
			continue
		}
		rec := sy.record(t, a)
		t.Logf("request %d: %v in %v (%s)", i, faultsOf(rec.Attempts), rec.Latency, rec.Attempts[0].Error)
		for _, f := range faultsOf(rec.Attempts) {
			if strings.HasSuffix(f, "/server") {
				t.Errorf("request %d: %s blamed a healthy, busy server (%s)", i, f, rec.Attempts[0].Error)
			}
		}
		if wantServed != "" && rec.ServedCandidate != wantServed {
			t.Errorf("request %d served by %s; want %s", i, rec.ServedCandidate, wantServed)
		}
	}
}

func TestRealBusyOllamaIsNotSick(t *testing.T) {
	b := realserver.Find(t)
	oll := ollamaWith(t, b, []string{"OLLAMA_NUM_PARALLEL=1"}, map[string]string{"tiny": realserver.ChatMLModelfile(b.Tiny(t))})
	llama := b.LlamaServer(t, realserver.LlamaOptions{})
	long := ollamaBody("tiny", false, `,"options":{"num_predict":1200}`)

	t.Run("with a fallback", func(t *testing.T) {
		sy := startReal(t, learnedSelection, ollamaCand("alpha", oll, "tiny", ""), llamaCand("bravo", llama, ""))
		warm(t, sy, "alpha", 4)
		other := otherClient(t, oll.Root, "/api/chat", long, 2)
		busyRequests(t, sy, "alpha", 3, "")
		other.Wait()
		if got := sy.breakerOf("alpha"); got != "closed/0" {
			t.Errorf("alpha's breaker = %s; want closed without failures", got)
		}
		if a := chat(t, sy.url, "/v1/chat/completions", openaiBody("alpha", true, `,"max_tokens":4`)); a.header.Get("X-Switchyard-Served-Model") != "alpha" {
			t.Errorf("after the other client finished, served by %q; want alpha", a.header.Get("X-Switchyard-Served-Model"))
		}
	})
	t.Run("the only candidate", func(t *testing.T) {
		sy := startReal(t, learnedSelection, ollamaCand("alpha", oll, "tiny", ""))
		warm(t, sy, "alpha", 4)
		other := otherClient(t, oll.Root, "/api/chat", long, 2)
		busyRequests(t, sy, "alpha", 3, "alpha")
		other.Wait()
		if got := sy.breakerOf("alpha"); got != "closed/0" {
			t.Errorf("alpha's breaker = %s; want closed without failures", got)
		}
	})
}

func TestRealBusyLlamaServerIsNotSick(t *testing.T) {
	b := realserver.Find(t)
	alpha := b.LlamaServer(t, realserver.LlamaOptions{Parallel: 1})
	bravo := b.LlamaServer(t, realserver.LlamaOptions{})
	long := openaiBody("tiny", false, `,"max_tokens":1200`)
	for _, tc := range []struct {
		name  string
		cands []realCandidate
		want  string
	}{
		{"with a fallback", []realCandidate{llamaCand("alpha", alpha, ""), llamaCand("bravo", bravo, "")}, ""},
		{"the only candidate", []realCandidate{llamaCand("alpha", alpha, "")}, "alpha"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sy := startReal(t, learnedSelection, tc.cands...)
			warm(t, sy, "alpha", 4)
			before := sy.learner.Stats("alpha")
			other := otherClient(t, alpha.URL, "/chat/completions", long, 1)
			busyRequests(t, sy, "alpha", 2, tc.want)
			other.Wait()
			if got := sy.breakerOf("alpha"); got != "closed/0" {
				t.Errorf("alpha's breaker = %s; want closed without failures", got)
			}
			if after := sy.learner.Stats("alpha"); after.P99 > 2*before.P99+200*time.Millisecond {
				t.Errorf("alpha's p99 TTFT grew from %v to %v: a queued wait was taken for a sample", before.P99, after.P99)
			}
		})
	}
}

// Each kind of freeze is still caught, and the breaker recovers after
// SIGCONT: llama-server stopped (its /slots does not answer), `ollama
// serve` stopped (/api/ps does not answer), and Ollama's runner alone
// stopped (its API answers; only "nothing completes" catches it).
func TestRealFreezesAreCaught(t *testing.T) {
	b := realserver.Find(t)
	tiny := realserver.ChatMLModelfile(b.Tiny(t))
	const sel = "  failure_threshold: 1\n  open_duration: 2s\n  first_token_timeout: 4s\n  min_samples: 3\n  deadline_floor: 300ms\n  ttft_multiplier: 1\n"
	type freeze struct {
		name   string
		server func() *realserver.Server
		cand   func(s *realserver.Server) realCandidate
		pids   func(s *realserver.Server) []int
		within time.Duration // the deadline plus the check's bound, or the ceiling
	}
	root := func(s *realserver.Server) []int { return []int{s.Pid()} }
	runner := func(s *realserver.Server) []int {
		var out []int
		for _, p := range s.Pids() {
			if p != s.Pid() {
				out = append(out, p)
			}
		}
		return out
	}
	for _, fz := range []freeze{
		{"llama-server", func() *realserver.Server { return b.LlamaServer(t, realserver.LlamaOptions{Parallel: 1}) },
			func(s *realserver.Server) realCandidate { return llamaCand("alpha", s, "") }, root, 3 * time.Second},
		{"ollama serve", func() *realserver.Server { return ollamaWith(t, b, nil, map[string]string{"tiny": tiny}) },
			func(s *realserver.Server) realCandidate { return ollamaCand("alpha", s, "tiny", "") }, root, 3 * time.Second},
		{"ollama's runner", func() *realserver.Server { return ollamaWith(t, b, nil, map[string]string{"tiny": tiny}) },
			func(s *realserver.Server) realCandidate { return ollamaCand("alpha", s, "tiny", "") }, runner, 6 * time.Second},
	} {
		t.Run(fz.name, func(t *testing.T) {
			s := fz.server()
			sy := startReal(t, sel, fz.cand(s))
			warm(t, sy, "alpha", 4)
			pids := fz.pids(s)
			if len(pids) == 0 {
				t.Fatalf("no process to stop among %v", s.Pids())
			}
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGSTOP)
			}
			resumed := false
			resume := func() {
				if !resumed {
					for _, p := range pids {
						syscall.Kill(p, syscall.SIGCONT)
					}
					resumed = true
				}
			}
			t.Cleanup(resume)
			start := time.Now()
			a := chat(t, sy.url, "/v1/chat/completions", openaiBody("alpha", true, `,"max_tokens":4`))
			took := time.Since(start)
			if a.status == 200 && a.complete {
				t.Fatalf("a frozen server answered: %s", a.body)
			}
			if took > fz.within {
				t.Errorf("caught after %v; want within %v", took, fz.within)
			}
			rec := sy.record(t, a)
			if got := faultsOf(rec.Attempts); len(got) == 0 || got[0] != "alpha:timeout/server" {
				t.Errorf("attempts = %v; want alpha's timeout counted", got)
			}
			if got := sy.breakerOf("alpha"); !strings.HasPrefix(got, "open") {
				t.Errorf("breaker = %s; want open", got)
			}
			resume()
			eventually(t, 30*time.Second, "the breaker to close after SIGCONT", func() bool {
				a := chat(t, sy.url, "/v1/chat/completions", openaiBody("alpha", true, `,"max_tokens":4`))
				return a.status == 200 && strings.HasPrefix(sy.breakerOf("alpha"), "closed")
			})
		})
	}
}

// Two real servers of one model at one priority share a steady load: both
// serve.
func TestRealBandsShareTheLoad(t *testing.T) {
	b := realserver.Find(t)
	alpha := b.LlamaServer(t, realserver.LlamaOptions{Parallel: 1})
	bravo := b.LlamaServer(t, realserver.LlamaOptions{Parallel: 1})
	ca, cb := llamaCand("alpha", alpha, ""), llamaCand("bravo", bravo, "")
	ca.priority, cb.priority = 1, 1
	sy := startReal(t, quietSelection, ca, cb)
	served := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 4 {
				a := chatCtx(t.Context(), sy.url, "/v1/chat/completions", openaiBody("auto", true, `,"max_tokens":40`), nil)
				if a.status != 200 {
					t.Errorf("status %d %s", a.status, a.body)
					return
				}
				mu.Lock()
				served[a.header.Get("X-Switchyard-Served-Model")]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("served: %v", served)
	if served["alpha"] == 0 || served["bravo"] == 0 {
		t.Errorf("served %v; want both servers of the band to serve", served)
	}
}

// A request to the only Ollama is cut at the ceiling behind another
// client's long job; then another request waits behind a short job. Ollama finished the first job in between (its
// /api/ps expiry moved), so the second wait is queued and waited for, not
// cut at once as a server that answers nobody (docs/DESIGN.md, "Shared
// servers").
func TestRealOllamaThatAnsweredOthersIsWaitedFor(t *testing.T) {
	b := realserver.Find(t)
	oll := ollamaWith(t, b, []string{"OLLAMA_NUM_PARALLEL=1"}, map[string]string{"tiny": realserver.ChatMLModelfile(b.Tiny(t))})
	const sel = quietSelection + "  first_token_timeout: 3s\n  min_samples: 3\n  deadline_floor: 300ms\n  ttft_multiplier: 1\n"
	sy := startReal(t, sel, ollamaCand("alpha", oll, "tiny", ""))
	warm(t, sy, "alpha", 4)
	ask := func() realAnswer {
		return chat(t, sy.url, "/v1/chat/completions", openaiBody("alpha", true, `,"max_tokens":4`))
	}

	wait := generating(t, oll.Root+"/api/chat", ollamaBody("tiny", true, `,"options":{"num_predict":6000}`))
	if a := ask(); a.status == 200 && a.complete {
		t.Fatalf("a request behind a job of 6000 tokens was answered within the 3 s ceiling: make the job longer")
	}
	wait()

	wait = generating(t, oll.Root+"/api/chat", ollamaBody("tiny", true, `,"options":{"num_predict":600}`))
	a := ask()
	wait()
	if a.status != 200 || !a.complete {
		rec := sy.record(t, a)
		t.Fatalf("behind a short job after the long one: %d %s; attempts %v (%s)", a.status, a.body, faultsOf(rec.Attempts), rec.Attempts[0].Error)
	}
	if got := sy.breakerOf("alpha"); got != "closed/0" {
		t.Errorf("alpha's breaker = %s; want closed, its answer clearing the earlier failure", got)
	}
}

// generating sends body to url as another client would, streamed, and
// returns once the server has begun to answer it (its first line), so
// that what follows waits behind it; wait reads the rest.
func generating(t *testing.T, url, body string) (wait func()) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadBytes('\n'); err != nil || resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("the other client: %d %v", resp.StatusCode, err)
	}
	return func() {
		io.Copy(io.Discard, r)
		resp.Body.Close()
	}
}
