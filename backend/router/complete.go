package router

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Answer is a complete, non-streamed answer.
type Answer struct {
	Meta
	Message      fleet.Message // role "assistant", content, thinking, tool calls
	FinishReason string
	Usage        *fleet.Usage
	Model        string // the model name the upstream reported
	// Logprobs are the log probabilities of the answer's chunks, in order,
	// each the JSON array its chunk carried (fleet.Chunk.Logprobs); nil
	// when none came. The API edge joins them.
	Logprobs [][]byte
	// Embeddings are the vectors of an embedding request.
	Embeddings [][]float32
	// Events are the upstream's events that carry the answer's top-level
	// fields, as it sent them: its first event and those that ended it
	// (finish, usage), in order. The API edge merges their fields, later
	// ones winning, for a caller of the upstream's dialect
	// (system_fingerprint, timings, usage details, Ollama's durations).
	Events [][]byte
}

// Complete routes a non-streaming request (docs/DESIGN.md, "Non-streaming
// requests"). Upstreams are still read as streams, so the first-token
// deadline catches stalls; and since nothing reaches the caller before the
// whole answer, an attempt that breaks after its first token falls back
// like any other failure.
func (r *Router) Complete(ctx context.Context, req *fleet.Request) (*Answer, error) {
	ru, err := r.begin(ctx, req, true)
	if err != nil {
		return nil, err
	}
	for {
		s, err := ru.commitNext()
		if err != nil {
			return nil, err
		}
		ans, err := s.collect()
		if errors.Is(err, errRetry) {
			continue
		}
		var e *Error
		if err != nil && !errors.As(err, &e) {
			// The caller left while the answer was being collected; it
			// is already recorded as a client abort.
			err = &Error{Failure: ru.gone(), Err: err, Attempts: ru.rec.Attempts, RequestID: ru.id}
		}
		return ans, err
	}
}

// collect reads the whole stream into one Answer and closes it.
//
// It allocates per answer, not per event: the text goes into builders
// grown at once to hold a short answer, and the bytes kept of the events
// (a chunk's bytes are the stream's buffer until the next Recv) are
// copied one after another into one buffer, sliced only at the end.
func (s *Stream) collect() (*Answer, error) {
	defer s.Close()
	ans := &Answer{Meta: s.meta, Model: s.meta.Candidate.Model}
	ans.Message.Role = "assistant"
	var content, thinking strings.Builder
	var kept keptBytes
	for first := true; ; first = false {
		ch, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		appendText(&content, ch.Content)
		appendText(&thinking, ch.Reasoning)
		for _, tc := range ch.ToolCalls {
			ans.Message.ToolCalls = fleet.MergeToolCall(ans.Message.ToolCalls, tc)
		}
		if ch.FinishReason != "" {
			ans.FinishReason = ch.FinishReason
		}
		if ch.Usage != nil {
			ans.Usage = ch.Usage
		}
		if ch.Model != "" {
			ans.Model = ch.Model
		}
		if len(ch.Embeddings) > 0 {
			ans.Embeddings = ch.Embeddings
		}
		if len(ch.Logprobs) > 0 {
			kept.add(ch.Logprobs, true)
		}
		if len(ch.Raw) > 0 && (first || ch.FinishReason != "" || ch.Usage != nil) {
			kept.add(ch.Raw, false)
		}
	}
	ans.Message.Content = content.String()
	ans.Message.Thinking = thinking.String()
	ans.Events, ans.Logprobs = kept.cut()
	return ans, nil
}

// textSize is what a builder of collect grows to at its first text.
const textSize = 128

// appendText appends s to b, growing b to textSize first.
func appendText(b *strings.Builder, s string) {
	if s == "" {
		return
	}
	if b.Cap() == 0 {
		b.Grow(max(textSize, len(s)))
	}
	b.WriteString(s)
}

// keptBytes are the events and logprobs an answer keeps, copied one
// after another into one buffer. The zero value is empty.
type keptBytes struct {
	buf   []byte
	marks []keptMark
	lps   int // how many of marks are logprobs
}

// keptMark is where one kept value ends in keptBytes.buf.
type keptMark struct {
	end      int
	logprobs bool
}

// keptSize is what keptBytes.buf starts at: room for an answer's first,
// finish and usage events.
const keptSize = 512

func (k *keptBytes) add(b []byte, logprobs bool) {
	if k.buf == nil {
		k.buf = make([]byte, 0, max(keptSize, len(b)))
		k.marks = make([]keptMark, 0, 4)
	}
	k.buf = append(k.buf, b...)
	k.marks = append(k.marks, keptMark{len(k.buf), logprobs})
	if logprobs {
		k.lps++
	}
}

// cut returns the events and the logprobs kept, each in the order they
// came, nil where none. Each value is capped at its end, so that
// appending to one can't write over the next.
func (k *keptBytes) cut() (events, logprobs [][]byte) {
	if len(k.marks) == 0 {
		return nil, nil
	}
	all := make([][]byte, len(k.marks))
	n := len(k.marks) - k.lps
	e, l, start := 0, n, 0
	for _, m := range k.marks {
		v := k.buf[start:m.end:m.end]
		if m.logprobs {
			all[l] = v
			l++
		} else {
			all[e] = v
			e++
		}
		start = m.end
	}
	if n > 0 {
		events = all[:n:n]
	}
	if k.lps > 0 {
		logprobs = all[n:]
	}
	return events, logprobs
}
