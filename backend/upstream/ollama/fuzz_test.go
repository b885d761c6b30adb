package ollama

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/switchyard/switchyard/backend/fleet"
)

// fuzzMaxLine keeps the fuzzer's memory bounded: no line buffer grows past it.
const fuzzMaxLine = 4 << 10

// FuzzNDJSON feeds arbitrary bytes to the line reader, whole or one byte per
// Read. It checks that Recv never panics, always ends (every chunk consumes
// at least one line), ends with one of the documented errors and keeps
// returning it, and that io.EOF comes only after a final chunk.
func FuzzNDJSON(f *testing.F) {
	for _, seed := range []string{
		lineHi + "\n" + lineThere + "\n" + lineDone + "\n",
		lineThink + "\n" + lineTool + "\n" + lineTool2 + "\n" + lineDone,
		lineHi + "\n" + lineErr + "\n",
		lineHi + "\n",
		lineLoad,
		"\r\n\n  \n" + lineNoWhy + "\r\n",
		`{"error":{"message":"boom","code":500}}`,
		`{"model":"qwen3:8b","message":{"role":"assistant","content":"x"`,
		"null\n",
		`{"message":{"tool_calls":[{"function":{"arguments":[]}}]}}`,
		`{"done":true,"done_reason":"unload","message":{"content":"x"}}`,
		string(bytes.Repeat([]byte("x"), fuzzMaxLine+10)),
		"data: [DONE]\n\n",
		"<html><body>502</body></html>",
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, oneByte bool) {
		var r io.Reader = bytes.NewReader(data)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		s := newStream(context.Background(), io.NopCloser(r), fuzzMaxLine)
		defer s.Close()
		var last fleet.Chunk
		var err error
		for i := 0; ; i++ {
			if i > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("Recv yielded %d chunks from %d lines", i, bytes.Count(data, []byte("\n"))+1)
			}
			var c fleet.Chunk
			if c, err = s.Recv(); err != nil {
				break
			}
			if (c.FinishReason != "") != (c.Usage != nil) {
				t.Fatalf("chunk %+v: FinishReason and Usage must come together", c)
			}
			last = c
		}
		var ee *fleet.EventError
		var me *fleet.MalformedError
		switch {
		case err == io.EOF:
			if last.FinishReason == "" {
				t.Fatalf("io.EOF after a chunk without FinishReason: %+v", last)
			}
		case errors.Is(err, fleet.ErrTruncated), errors.As(err, &ee), errors.As(err, &me):
		default:
			t.Fatalf("Recv() error = %v (%T); want io.EOF, ErrTruncated, *EventError or *MalformedError", err, err)
		}
		if _, again := s.Recv(); again != err {
			t.Fatalf("Recv() after the end = %v; want the same error %v", again, err)
		}
	})
}
