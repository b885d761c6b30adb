package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// embedFleet: a and b serve the same embedding model on two servers, c
// another embedding model, d a chat model.
func embedFleet(f *fakeBackend) Fleet {
	cand := func(id, model string, prio int, embeds, only bool) Target {
		return Target{Candidate: fleet.Candidate{ID: id, Provider: fleet.ProviderOllama, Model: model, Priority: prio,
			Enabled: true, Embeds: embeds, EmbedOnly: only}, Backend: f}
	}
	return Fleet{Targets: []Target{
		cand("d", "chat-model", 1, false, false),
		cand("a", "nomic-embed-text", 2, true, true),
		cand("b", "nomic-embed-text:latest", 3, true, true),
		cand("c", "mxbai-embed-large", 4, true, true),
	}, DefaultModel: "d"}
}

func vectors(v ...float32) script {
	return script{steps: []step{{chunk: fleet.Chunk{Embeddings: [][]float32{v}, FinishReason: "stop"}}}}
}

func TestEmbeddingsFailOverOnlyToTheSameModel(t *testing.T) {
	tests := []struct {
		name      string
		model     string
		a, b      script
		wantVec   float32
		wantOrder []string
		wantErr   bool
	}{
		{name: "auto: the first candidate that embeds", model: "auto", a: vectors(1), b: vectors(2), wantVec: 1, wantOrder: []string{"a"}},
		{name: "its twin on another server takes over", model: "auto", a: script{openErr: errRefused}, b: vectors(2), wantVec: 2, wantOrder: []string{"a", "b"}},
		{name: "named by its upstream name", model: "nomic-embed-text", a: script{openErr: errRefused}, b: vectors(2), wantVec: 2, wantOrder: []string{"a", "b"}},
		{
			// c makes vectors of another space: an error is better than
			// an index spoiled in silence.
			name: "never another model", model: "a", a: script{openErr: errRefused}, b: script{openErr: errRefused},
			wantOrder: []string{"a", "b"}, wantErr: true,
		},
		{name: "c named, alone", model: "c", a: vectors(1), b: vectors(2), wantOrder: []string{"c"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(map[string]script{"a": tt.a, "b": tt.b, "c": {openErr: errRefused}, "d": answer("x")})
			rec := &memRecorder{}
			r := New(embedFleet(f), Deps{Recorder: rec})
			ans, err := r.Complete(t.Context(), &fleet.Request{Kind: fleet.KindEmbed, Model: tt.model, Input: []string{"hi"}})
			var got []string
			for _, a := range rec.last().Attempts {
				got = append(got, a.Candidate)
			}
			if !reflect.DeepEqual(got, tt.wantOrder) {
				t.Errorf("attempts = %v; want %v", got, tt.wantOrder)
			}
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Complete() = %+v; want an error", ans)
				}
				return
			}
			if err != nil || len(ans.Embeddings) != 1 || ans.Embeddings[0][0] != tt.wantVec {
				t.Fatalf("Complete() = %+v, %v; want vector %v", ans, err, tt.wantVec)
			}
		})
	}
}

func TestEmbeddingsWithoutAnEmbedder(t *testing.T) {
	f := newFake(map[string]script{"a": answer("x")})
	r := New(testFleet(f, Settings{}), Deps{})
	_, err := r.Complete(t.Context(), &fleet.Request{Kind: fleet.KindEmbed, Input: []string{"hi"}})
	var e *Error
	if !errors.As(err, &e) || e.Failure != fleet.FailureNoCandidates || !strings.Contains(err.Error(), "embeddings: true") {
		t.Fatalf("error = %v; want no candidates, saying how to declare one", err)
	}
}

func TestChatsSkipEmbeddingModels(t *testing.T) {
	f := newFake(map[string]script{"a": vectors(1), "b": vectors(1), "c": vectors(1), "d": answer("hello")})
	rec := &memRecorder{}
	r := New(embedFleet(f), Deps{Recorder: rec})

	// auto: the chain holds no embedding model at all.
	s, err := r.Stream(t.Context(), &fleet.Request{Model: "auto", Messages: []fleet.Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	drain(s)
	s.Close()
	if n := len(rec.last().Attempts); n != 1 {
		t.Errorf("auto chat made %d attempts; want 1: %+v", n, rec.last().Attempts)
	}

	// Named, the embedding model is skipped with the reason on record.
	s, err = r.Stream(t.Context(), &fleet.Request{Model: "a", Messages: []fleet.Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	content, _ := drain(s)
	s.Close()
	at := rec.last().Attempts
	if content != "hello" || len(at) != 2 || at[0].Fault != fleet.FaultCapability || !strings.Contains(at[0].Error, "completion") {
		t.Errorf("content %q, attempts %+v; want a skipped for completion, then d", content, at)
	}
	if opened, _ := f.counts("a"); opened != 0 {
		t.Errorf("a was opened %d times for a chat", opened)
	}
}

// picky is a backend whose adapter can carry nothing with n > 1.
type picky struct{ *fakeBackend }

func (picky) Check(_ fleet.Candidate, req *fleet.Request) error {
	if req.Options.N != nil && *req.Options.N > 1 {
		return errors.New("n: one answer per request")
	}
	return nil
}

func TestUnsupportedEverywhereIsTheRequestsFault(t *testing.T) {
	f := newFake(map[string]script{"a": answer("x"), "b": answer("y"), "c": answer("z")})
	fl := testFleet(f, Settings{})
	for i := range fl.Targets {
		fl.Targets[i].Backend = picky{f}
	}
	rec := &memRecorder{}
	r := New(fl, Deps{Recorder: rec})
	two := 2
	_, err := r.Stream(t.Context(), &fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}, Options: fleet.Options{N: &two}})
	var e *Error
	if !errors.As(err, &e) || e.Failure != fleet.FailureUnsupported || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("error = %v; want FailureUnsupported", err)
	}
	if !strings.Contains(err.Error(), "a: n: one answer per request") {
		t.Errorf("error %q does not say why", err)
	}
	if n := strings.Count(err.Error(), "a: n: one answer per request"); n != 1 {
		t.Errorf("error %q says a's reason %d times; want once", err, n)
	}
	for _, id := range []string{"a", "b", "c"} {
		if opened, _ := f.counts(id); opened != 0 {
			t.Errorf("%s opened %d times", id, opened)
		}
	}
	// One that can carry it serves, with the others' refusals on record.
	one := 1
	s, err := r.Stream(t.Context(), &fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}, Options: fleet.Options{N: &one}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// reuser hands out chunks whose Raw is one buffer overwritten on every
// Recv, as the real adapters do.
type reuser struct {
	buf   []byte
	lines []string
}

func (r *reuser) Open(context.Context, fleet.Candidate, *fleet.Request) (fleet.Stream, error) {
	return &reuserStream{r: r}, nil
}

type reuserStream struct {
	r *reuser
	i int
}

func (s *reuserStream) Recv() (fleet.Chunk, error) {
	if s.i == len(s.r.lines) {
		return fleet.Chunk{}, io.EOF
	}
	line := s.r.lines[s.i]
	s.i++
	s.r.buf = append(s.r.buf[:0], line...)
	var c fleet.Chunk
	var v struct {
		Content  string          `json:"content"`
		Finish   string          `json:"finish"`
		Logprobs json.RawMessage `json:"logprobs"`
	}
	json.Unmarshal(s.r.buf, &v)
	c.Content, c.FinishReason, c.Logprobs, c.Raw = v.Content, v.Finish, v.Logprobs, s.r.buf
	if v.Finish != "" {
		c.Usage = &fleet.Usage{PromptTokens: 1}
	}
	return c, nil
}

func (s *reuserStream) Close() error { return nil }

func TestRawSurvivesTheProbeAndFieldsAreCollected(t *testing.T) {
	lines := []string{
		`{"fingerprint":"fp_1","role":"assistant"}`,
		`{"content":"Hi","logprobs":[{"token":"Hi"}]}`,
		`{"content":" there","logprobs":[{"token":" there"}]}`,
		`{"finish":"stop","timings":{"predicted_ms":12},"fingerprint":"fp_2"}`,
	}
	fl := Fleet{Targets: []Target{{Candidate: fleet.Candidate{ID: "a", Model: "m", Enabled: true}, Backend: &reuser{lines: lines}}}, DefaultModel: "a"}
	r := New(fl, Deps{})

	s, err := r.Stream(t.Context(), &fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range lines {
		c, err := s.Recv()
		if err != nil || string(c.Raw) != want {
			t.Fatalf("chunk %d Raw = %s, %v; want %s", i, c.Raw, err, want)
		}
	}
	s.Close()

	ans, err := r.Complete(t.Context(), &fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The chunks' bytes were the stream's reused buffer: the answer keeps
	// copies of what it needs.
	if got := fmt.Sprintf("%s", ans.Logprobs); got != `[[{"token":"Hi"}] [{"token":" there"}]]` {
		t.Errorf("Logprobs = %s", got)
	}
	if len(ans.Events) != 2 || !strings.Contains(string(ans.Events[0]), `"role"`) || string(ans.Events[1]) != lines[len(lines)-1] {
		t.Errorf("Events = %q; want the first and the finishing event", ans.Events)
	}
	// They share one buffer, each capped at its end: appending to one
	// leaves the next as it was.
	_ = append(ans.Events[0], "xx"...)
	_ = append(ans.Logprobs[0], "xx"...)
	if string(ans.Events[1]) != lines[len(lines)-1] || string(ans.Logprobs[1]) != `[{"token":" there"}]` {
		t.Errorf("after appending to the first: Events[1] = %s, Logprobs[1] = %s", ans.Events[1], ans.Logprobs[1])
	}
}

// A thinking request to a fleet where no candidate reasons is refused as
// the request's (400, as Ollama refuses it), not as a fleet to wait for.
func TestThinkingWithoutAThinker(t *testing.T) {
	f := newFake(map[string]script{"a": answer("x")})
	fl := testFleet(f, Settings{})
	fl.Targets = fl.Targets[:1] // a does not reason
	fl.DeepThinkingModel = ""
	r := New(fl, Deps{Recorder: &memRecorder{}})
	_, err := r.Stream(t.Context(), &fleet.Request{Thinking: true})
	var e *Error
	if !errors.As(err, &e) || e.Failure != fleet.FailureUnsupported || !strings.Contains(err.Error(), "no candidate supports thinking") {
		t.Fatalf("error = %v; want FailureUnsupported saying no candidate supports thinking", err)
	}
	if s, err := r.Stream(t.Context(), &fleet.Request{}); err != nil {
		t.Errorf("the same fleet without thinking: %v", err)
	} else {
		s.Close()
	}
}
