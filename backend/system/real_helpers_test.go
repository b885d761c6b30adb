package system

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/realserver"
	"github.com/switchyard/switchyard/backend/schema"
)

// This file holds what the tests against real model servers share
// (real_test.go): a Switchyard in front of servers started by realserver,
// and plain HTTP in both protocols, so that what is compared is exactly
// what went over the wire.

// realCandidate is one candidate line of a test config.
type realCandidate struct {
	id, provider, url, model string
	extra                    string // more flow-map keys, e.g. "parallel: 1"
	priority                 int    // 0: its place in the list
}

func llamaCand(id string, s *realserver.Server, extra string) realCandidate {
	return realCandidate{id: id, provider: "openai", url: s.URL, model: "tiny", extra: extra}
}

func ollamaCand(id string, s *realserver.Server, model, extra string) realCandidate {
	return realCandidate{id: id, provider: "ollama", url: s.Root, model: model, extra: extra}
}

// realSwitchyard is a running Switchyard in front of real servers.
type realSwitchyard struct {
	*System
	url  string
	stop func()
}

// startReal writes a config of selection (YAML lines under selection:,
// indented by two spaces) and the candidates, the first being the default,
// and runs a Switchyard on it with a fast poller.
func startReal(t *testing.T, selection string, cands ...realCandidate) *realSwitchyard {
	t.Helper()
	var b strings.Builder
	b.WriteString("selection:\n" + selection)
	fmt.Fprintf(&b, "chat:\n  default_model: %s\n  candidates:\n", cands[0].id)
	for i, c := range cands {
		prio := cmp.Or(c.priority, i+1)
		fmt.Fprintf(&b, "    - {id: %s, provider: %s, url: %q, model: %q, priority: %d, gpus: []", c.id, c.provider, c.url, c.model, prio)
		if c.extra != "" {
			b.WriteString(", " + c.extra)
		}
		b.WriteString("}\n")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	sys, err := New(t.Context(), Options{
		ConfigPath: cfg, Addr: "127.0.0.1:0", DBPath: filepath.Join(dir, "history.db"),
		ShutdownGrace: time.Second, PollInterval: 250 * time.Millisecond, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &realSwitchyard{System: sys, url: sys.URL(), stop: runSystem(t, sys)}
}

// answer is what a caller saw of one chat request.
type realAnswer struct {
	status    int
	header    http.Header
	content   string
	thinking  string
	finish    string // finish_reason, or Ollama's done_reason
	streamErr string // an error event or line after the headers
	body      string // a non-stream body, or an error body
	complete  bool   // [DONE] or done:true arrived
}

// realClient opens a connection per request: servers come and go from
// test to test on ports the kernel hands out again, and a connection kept
// alive to one an earlier test killed answers the next POST with EOF.
var realClient = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}

// chat posts body to path (/v1/chat/completions or /api/chat) at base and
// reads the answer in that protocol, streamed or not as body says.
func chat(t *testing.T, base, path, body string) realAnswer {
	t.Helper()
	return chatCtx(t.Context(), base, path, body, nil)
}

// chatCtx is chat under ctx; onChunk, when set, is called after each
// content chunk of a stream with the number read so far. A request that
// got no answer has status 0 and the error as its body. It may be called
// from any goroutine.
func chatCtx(ctx context.Context, base, path, body string, onChunk func(n int)) realAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		return realAnswer{body: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := realClient.Do(req)
	if err != nil {
		return realAnswer{body: fmt.Sprintf("POST %s: %v", path, err)}
	}
	defer resp.Body.Close()
	a := realAnswer{status: resp.StatusCode, header: resp.Header}
	ct := resp.Header.Get("Content-Type")
	switch {
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(resp.Body)
		a.body = string(b)
	case strings.HasPrefix(ct, "text/event-stream"):
		readOpenAIStream(resp.Body, &a, onChunk)
	case strings.HasPrefix(ct, "application/x-ndjson"):
		readOllamaStream(resp.Body, &a, onChunk)
	default:
		b, _ := io.ReadAll(resp.Body)
		a.body = string(b)
		readOneAnswer(b, &a)
	}
	return a
}

func readOpenAIStream(r io.Reader, a *realAnswer, onChunk func(int)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			a.complete = true
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content, Reasoning string
				}
				FinishReason *string `json:"finish_reason"`
			}
			Error json.RawMessage
		}
		if json.Unmarshal([]byte(data), &ch) != nil {
			a.streamErr = "bad event: " + data
			return
		}
		if len(ch.Error) > 0 {
			a.streamErr = string(ch.Error)
			continue
		}
		for _, c := range ch.Choices {
			a.content += c.Delta.Content
			a.thinking += c.Delta.Reasoning
			if c.FinishReason != nil {
				a.finish = *c.FinishReason
			}
			if c.Delta.Content != "" || c.Delta.Reasoning != "" {
				n++
				if onChunk != nil {
					onChunk(n)
				}
			}
		}
	}
}

func readOllamaStream(r io.Reader, a *realAnswer, onChunk func(int)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l struct {
			Message struct {
				Content, Thinking string
			}
			Done       bool
			DoneReason string `json:"done_reason"`
			Error      string
		}
		if json.Unmarshal(line, &l) != nil {
			a.streamErr = "bad line: " + string(line)
			return
		}
		if l.Error != "" {
			a.streamErr = l.Error
			continue
		}
		a.content += l.Message.Content
		a.thinking += l.Message.Thinking
		if l.Done {
			a.complete, a.finish = true, l.DoneReason
		}
		if l.Message.Content != "" || l.Message.Thinking != "" {
			n++
			if onChunk != nil {
				onChunk(n)
			}
		}
	}
}

// readOneAnswer reads a non-stream answer of either protocol.
func readOneAnswer(b []byte, a *realAnswer) {
	var v struct {
		Choices []struct {
			Message struct {
				Content, Reasoning string
			}
			FinishReason string `json:"finish_reason"`
		}
		Message *struct {
			Content, Thinking string
		}
		Done       bool
		DoneReason string `json:"done_reason"`
	}
	if json.Unmarshal(b, &v) != nil {
		return
	}
	if len(v.Choices) > 0 {
		a.content, a.thinking, a.finish, a.complete = v.Choices[0].Message.Content, v.Choices[0].Message.Reasoning, v.Choices[0].FinishReason, true
	}
	if v.Message != nil {
		a.content, a.thinking, a.finish, a.complete = v.Message.Content, v.Message.Thinking, v.DoneReason, v.Done
	}
}

// openaiBody is a chat completions request for "hi".
func openaiBody(model string, stream bool, more string) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":%v%s}`, model, stream, more)
}

// ollamaBody is an /api/chat request for "hi".
func ollamaBody(model string, stream bool, more string) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":%v%s}`, model, stream, more)
}

// lastRecord returns the record of the request a response names.
func (s *realSwitchyard) record(t *testing.T, a realAnswer) fleet.RequestRecord {
	t.Helper()
	id := a.header.Get("X-Switchyard-Request-Id")
	if id == "" {
		t.Fatalf("answer %d without a request id: %s", a.status, a.body)
	}
	rec, err := s.store.Request(t.Context(), id)
	if err != nil {
		t.Fatalf("history has no request %s: %v", id, err)
	}
	return rec
}

// faultsOf returns each attempt as "candidate:outcome/fault".
func faultsOf(as []fleet.Attempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Candidate+":"+string(a.Outcome)+"/"+string(a.Fault))
	}
	return out
}

// breakerOf returns a candidate's breaker as the router holds it.
func (s *realSwitchyard) breakerOf(id string) string {
	st := s.router.Breaker(id).Snapshot()
	return fmt.Sprintf("%s/%d", st.State, st.Failures)
}

// eventually polls cond every 50ms until it holds or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(t.Context(), d, cond) {
		t.Fatalf("after %v: %s", d, what)
	}
}

// candidateState returns a candidate's state as the status API shows it.
func (s *realSwitchyard) candidateState(id string) schema.Candidate {
	for _, c := range s.Status().Candidates {
		if c.ID == id {
			return c
		}
	}
	return schema.Candidate{}
}
