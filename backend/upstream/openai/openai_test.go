package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/upstream"
)

// TestMain fails the package when any goroutine outlives the tests: the
// streams spawn none, and every connection must be gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ev is one SSE data event as vLLM writes it.
func ev(json string) string { return "data: " + json + "\n\n" }

// chunk is a chat.completion.chunk with the given choice (delta and
// finish_reason), as vLLM and llama.cpp write it.
func chunk(choice string) string {
	return ev(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1754000000,"model":"m","choices":[{"index":0,` + choice + `,"logprobs":null}]}`)
}

func content(s string) string { return chunk(`"delta":{"content":"` + s + `"},"finish_reason":null`) }

var (
	roleChunk   = chunk(`"delta":{"role":"assistant","content":""},"finish_reason":null`)
	stopChunk   = chunk(`"delta":{"content":""},"finish_reason":"stop"`)
	usageChunk  = ev(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1754000000,"model":"m","choices":[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}}`)
	done        = "data: [DONE]\n\n"
	cleanStream = roleChunk + content("Hel") + content("lo") + stopChunk + usageChunk + done

	roleOut  = fleet.Chunk{Role: "assistant", Model: "m"}
	stopOut  = fleet.Chunk{FinishReason: "stop", Model: "m"}
	usageOut = fleet.Chunk{Usage: &fleet.Usage{PromptTokens: 5, CompletionTokens: 3}, Model: "m", UsageOnly: true}
)

func text(s string) fleet.Chunk { return fleet.Chunk{Content: s, Model: "m"} }

// eventErr stands for a *fleet.EventError with these fields in a wantErr.
func eventErr(msg, code string) error { return &fleet.EventError{Message: msg, Code: code} }

var streamTests = []struct {
	name    string
	body    string
	want    []fleet.Chunk
	wantErr error // io.EOF, fleet.ErrTruncated, malformed or an eventErr
}{
	{
		name: "clean stream",
		body: cleanStream,
		want: []fleet.Chunk{roleOut, text("Hel"), text("lo"), stopOut, usageOut},
	},
	{
		name: "crlf line endings",
		body: strings.ReplaceAll(cleanStream, "\n", "\r\n"),
		want: []fleet.Chunk{roleOut, text("Hel"), text("lo"), stopOut, usageOut},
	},
	{
		name: "cr line endings",
		body: strings.ReplaceAll(cleanStream, "\n", "\r"),
		want: []fleet.Chunk{roleOut, text("Hel"), text("lo"), stopOut, usageOut},
	},
	{
		name: "multi-line data",
		body: "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n" + stopChunk + done,
		want: []fleet.Chunk{text("Hi"), stopOut},
	},
	{
		name: "pings and comments",
		body: ": ping\n\n" + roleChunk + ": ping - 2026-01-01 00:00:00\r\n\r\n" + content("a") + ":\n" + stopChunk + done,
		want: []fleet.Chunk{roleOut, text("a"), stopOut},
	},
	{
		name: "role-only first chunk then end",
		body: roleChunk + stopChunk + done,
		want: []fleet.Chunk{roleOut, stopOut},
	},
	{
		name: "vLLM reasoning",
		body: chunk(`"delta":{"reasoning":"think"},"finish_reason":null`) + content("a") + stopChunk + done,
		want: []fleet.Chunk{{Reasoning: "think", Model: "m"}, text("a"), stopOut},
	},
	{
		name: "llama.cpp reasoning_content",
		body: chunk(`"delta":{"content":null,"reasoning_content":"think"},"finish_reason":null`) + stopChunk + done,
		want: []fleet.Chunk{{Reasoning: "think", Model: "m"}, stopOut},
	},
	{
		name: "reasoning wins over reasoning_content",
		body: chunk(`"delta":{"reasoning":"a","reasoning_content":"a"},"finish_reason":null`) + chunk(`"delta":{"reasoning":"","reasoning_content":"b"},"finish_reason":null`) + stopChunk + done,
		want: []fleet.Chunk{{Reasoning: "a", Model: "m"}, {Reasoning: "b", Model: "m"}, stopOut},
	},
	{
		name: "tool-call deltas",
		body: roleChunk +
			chunk(`"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null`) +
			chunk(`"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null`) +
			chunk(`"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}},{"index":1,"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}]},"finish_reason":null`) +
			chunk(`"delta":{},"finish_reason":"tool_calls"`) + done,
		want: []fleet.Chunk{
			roleOut,
			{ToolCalls: []fleet.ToolCall{{Index: 0, ID: "call_1", Type: "function", Name: "get_weather"}}, Model: "m"},
			{ToolCalls: []fleet.ToolCall{{Index: 0, Arguments: `{"city":`}}, Model: "m"},
			{ToolCalls: []fleet.ToolCall{{Index: 0, Arguments: `"Paris"}`}, {Index: 1, ID: "call_2", Type: "function", Name: "now", Arguments: "{}"}}, Model: "m"},
			{FinishReason: "tool_calls", Model: "m"},
		},
	},
	{
		name: "tool calls without index (Ollama /v1 before 0.5)",
		body: chunk(`"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}},{"id":"b","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"`) + done,
		want: []fleet.Chunk{{ToolCalls: []fleet.ToolCall{{Index: 0, ID: "a", Name: "f", Arguments: "{}"}, {Index: 1, ID: "b", Name: "g", Arguments: "{}"}}, FinishReason: "tool_calls", Model: "m"}},
	},
	{
		name: "usage chunk with choices null",
		body: content("a") + stopChunk + ev(`{"id":"c","object":"chat.completion.chunk","model":"m","choices":null,"usage":{"prompt_tokens":5,"completion_tokens":3}}`) + done,
		want: []fleet.Chunk{text("a"), stopOut, usageOut},
	},
	{
		name: "usage chunk without choices",
		body: content("a") + stopChunk + ev(`{"id":"c","object":"chat.completion.chunk","model":"m","usage":{"prompt_tokens":5,"completion_tokens":3}}`) + done,
		want: []fleet.Chunk{text("a"), stopOut, usageOut},
	},
	{
		name: "usage null on every chunk and in the finish chunk (llama.cpp)",
		body: ev(`{"choices":[{"index":0,"delta":{"content":"a"}}],"model":"m","usage":null}`) +
			ev(`{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"model":"m","usage":{"completion_tokens":3,"prompt_tokens":5,"total_tokens":8},"timings":{"predicted_n":3}}`) + done,
		want: []fleet.Chunk{text("a"), {FinishReason: "stop", Usage: &fleet.Usage{PromptTokens: 5, CompletionTokens: 3}, Model: "m"}},
	},
	{
		name: "model name changes",
		body: ev(`{"model":"a","choices":[{"delta":{"content":"x"}}]}`) + ev(`{"choices":[{"delta":{"content":"y"}}]}`) + ev(`{"model":"b\u00e9","choices":[{"delta":{},"finish_reason":"stop"}]}`) + done,
		want: []fleet.Chunk{{Content: "x", Model: "a"}, {Content: "y"}, {FinishReason: "stop", Model: "bé"}},
	},
	{
		name: "done without blank line at eof (llama.cpp b10603)",
		body: content("a") + stopChunk + "data: [DONE]\n",
		want: []fleet.Chunk{text("a"), stopOut},
	},
	{
		name: "done with trailing space",
		body: content("a") + "data: [DONE] \r\n\r\n",
		want: []fleet.Chunk{text("a")},
	},
	{
		name: "done without line end at eof",
		body: content("a") + "data: [DONE]",
		want: []fleet.Chunk{text("a")},
	},
	{
		name:    "done without finish_reason is complete",
		body:    content("a") + done,
		want:    []fleet.Chunk{text("a")},
		wantErr: io.EOF,
	},
	{
		name: "finish_reason then eof without done is complete",
		body: content("a") + stopChunk,
		want: []fleet.Chunk{text("a"), stopOut},
	},
	{
		name:    "no done and no finish_reason is truncated",
		body:    roleChunk + content("a"),
		want:    []fleet.Chunk{roleOut, text("a")},
		wantErr: fleet.ErrTruncated,
	},
	{
		name:    "empty body is truncated",
		body:    "",
		wantErr: fleet.ErrTruncated,
	},
	{
		name:    "Ollama /v1 mid-stream error: empty delta, no done",
		body:    content("a") + ev(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`),
		want:    []fleet.Chunk{text("a"), roleOut},
		wantErr: fleet.ErrTruncated,
	},
	{
		name:    "OpenAI error event, string code",
		body:    content("a") + ev(`{"error":{"message":"The server had an error","type":"server_error","param":null,"code":"internal_error"}}`),
		want:    []fleet.Chunk{text("a")},
		wantErr: eventErr("The server had an error", "internal_error"),
	},
	{
		name:    "vLLM error event, integer code, then done",
		body:    content("a") + "data: {\"error\": {\"object\": \"error\", \"message\": \"CUDA out of memory\", \"type\": \"InternalServerError\", \"param\": null, \"code\": 500}}\n\n" + done,
		want:    []fleet.Chunk{text("a")},
		wantErr: eventErr("CUDA out of memory", "500"),
	},
	{
		name:    "flat error object (old vLLM, SGLang)",
		body:    content("a") + ev(`{"object":"error","message":"context length exceeded","type":"BadRequestError","param":null,"code":400}`),
		want:    []fleet.Chunk{text("a")},
		wantErr: eventErr("context length exceeded", "400"),
	},
	{
		name:    "legacy llama.cpp error line",
		body:    content("a") + "error: {\"code\":500,\"message\":\"Input prompt is too big compared to KV size.\",\"type\":\"server_error\"}\n\n",
		want:    []fleet.Chunk{text("a")},
		wantErr: eventErr("Input prompt is too big compared to KV size.", "500"),
	},
	{
		name:    "error before any data",
		body:    ev(`{"error":{"message":"model not loaded","type":"invalid_request_error","code":null}}`) + done,
		wantErr: eventErr("model not loaded", ""),
	},
	{
		name:    "error as a string",
		body:    ev(`{"error":"upstream went away"}`),
		wantErr: eventErr("upstream went away", ""),
	},
	{
		name:    "event: error (openai npm style)",
		body:    content("a") + "event: error\ndata: {\"message\":\"overloaded\",\"type\":\"overloaded_error\"}\n\n",
		want:    []fleet.Chunk{text("a")},
		wantErr: eventErr("overloaded", ""),
	},
	{
		name:    "vLLM finish_reason error",
		body:    content("a") + chunk(`"delta":{"content":""},"finish_reason":"error"`) + done,
		want:    []fleet.Chunk{text("a")},
		wantErr: eventErr("finish_reason error: the server failed the request", ""),
	},
	{
		name:    "malformed json chunk",
		body:    content("a") + "data: {\"choices\":[{\"delta\":{\"content\":\"b\"\n\n" + done,
		want:    []fleet.Chunk{text("a")},
		wantErr: malformed,
	},
	{
		name:    "two values in one event",
		body:    content("a") + "data: {\"choices\":[]} {\"choices\":[]}\n\n" + done,
		want:    []fleet.Chunk{text("a")},
		wantErr: malformed,
	},
	{
		name:    "blank data",
		body:    "data:  \t\n\n" + done,
		wantErr: malformed,
	},
	{
		name:    "chunk of the wrong shape",
		body:    ev(`{"choices":"none"}`),
		wantErr: malformed,
	},
}

// collect reads s to its end.
func collect(s fleet.Stream) ([]fleet.Chunk, error) {
	var chunks []fleet.Chunk
	for range 1000 {
		c, err := s.Recv()
		if err != nil {
			return chunks, err
		}
		c.Raw = nil // the stream's buffer; TestRawEvents checks it
		chunks = append(chunks, c)
	}
	return chunks, errors.New("too many chunks")
}

// checkStreamErr compares the end of a stream with want: a sentinel,
// malformed, or an eventErr to match field by field.
func checkStreamErr(t *testing.T, err, want error) {
	t.Helper()
	if wantEv, ok := want.(*fleet.EventError); ok {
		ee, ok := errors.AsType[*fleet.EventError](err)
		if !ok || *ee != *wantEv {
			t.Errorf("Recv() error = %#v; want %#v", err, wantEv)
		}
		return
	}
	checkErr(t, err, want)
}

// newBackend returns a Backend on its own pool, closed with the test.
func newBackend(t *testing.T) *Backend {
	pool := upstream.NewPool(upstream.Settings{})
	t.Cleanup(pool.CloseIdle)
	return New(pool)
}

func candidate(srv *httptest.Server) fleet.Candidate {
	return fleet.Candidate{ID: "c", Provider: fleet.ProviderOpenAI, URL: srv.URL + "/v1", Model: "m", Enabled: true}
}

func hello() *fleet.Request {
	return &fleet.Request{ID: "r", Messages: []fleet.Message{{Role: "user", Content: "hi"}}, Stream: true}
}

// serve answers every request with an event stream holding body.
func serve(t *testing.T, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestChatStream(t *testing.T) {
	for _, tt := range streamTests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, tt.body)
			s, err := newBackend(t).Open(t.Context(), candidate(srv), hello())
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer s.Close()
			chunks, err := collect(s)
			if !reflect.DeepEqual(chunks, tt.want) {
				t.Errorf("chunks = %+v\nwant     %+v", chunks, tt.want)
			}
			checkStreamErr(t, err, tt.wantErr)
			if _, again := s.Recv(); again != err {
				t.Errorf("Recv() after the end = %v; want %v again", again, err)
			}
		})
	}
}

// TestStreamSplitReads runs the same bodies through a stream that gets
// them one byte per read, so every event, line and "\r\n" is cut at every
// place a network could cut it.
func TestStreamSplitReads(t *testing.T) {
	for _, tt := range streamTests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStream(t.Context(), func() {}, io.NopCloser(iotest.OneByteReader(strings.NewReader(tt.body))), maxLine)
			chunks, err := collect(s)
			if !reflect.DeepEqual(chunks, tt.want) {
				t.Errorf("chunks = %+v\nwant     %+v", chunks, tt.want)
			}
			checkStreamErr(t, err, tt.wantErr)
		})
	}
}

func TestChatStreamStatus(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		header      map[string]string
		body        string
		want        fleet.StatusError
		wantMessage string // substring of Message, when the whole is not known
	}{
		{
			name:        "HTML 502 from a proxy",
			status:      502,
			header:      map[string]string{"Content-Type": "text/html"},
			body:        "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n",
			want:        fleet.StatusError{StatusCode: 502},
			wantMessage: "<title>502 Bad Gateway</title>",
		},
		{
			name:   "429 with Retry-After",
			status: 429,
			header: map[string]string{"Content-Type": "application/json", "Retry-After": "2"},
			body:   `{"error":{"code":429,"message":"too many requests","type":"unavailable_error"}}`,
			want:   fleet.StatusError{StatusCode: 429, Message: "too many requests", Busy: true, RetryAfter: 2 * time.Second},
		},
		{
			name:   "503 with Retry-After",
			status: 503,
			header: map[string]string{"Content-Type": "application/json", "Retry-After": "1"},
			body:   `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`,
			want:   fleet.StatusError{StatusCode: 503, Message: "Loading model", Loading: true, RetryAfter: time.Second},
		},
		{
			name:   "503 Ollama /v1 server busy",
			status: 503,
			header: map[string]string{"Content-Type": "application/json"},
			body:   `{"error":{"message":"server busy, please try again.  maximum pending requests exceeded","type":"api_error","param":null,"code":null}}`,
			want:   fleet.StatusError{StatusCode: 503, Message: "server busy, please try again.  maximum pending requests exceeded", Busy: true},
		},
		{
			name:   "503 engine dead, empty body",
			status: 503,
			want:   fleet.StatusError{StatusCode: 503},
		},
		{
			name:   "401",
			status: 401,
			header: map[string]string{"Content-Type": "application/json"},
			body:   `{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`,
			want:   fleet.StatusError{StatusCode: 401, Message: "Invalid API Key"},
		},
		{
			name:   "400 flat vLLM error",
			status: 400,
			header: map[string]string{"Content-Type": "application/json"},
			body:   `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`,
			want:   fleet.StatusError{StatusCode: 400, Message: "This model's maximum context length is 4096 tokens."},
		},
		{
			name:   "404 model not found (Ollama /v1)",
			status: 404,
			header: map[string]string{"Content-Type": "application/json"},
			body:   `{"error":{"message":"model \"m\" not found, try pulling it first","type":"not_found_error","param":null,"code":null}}`,
			want:   fleet.StatusError{StatusCode: 404, Message: `model "m" not found, try pulling it first`},
		},
		{
			name:        "200 HTML page",
			status:      200,
			header:      map[string]string{"Content-Type": "text/html; charset=utf-8"},
			body:        "<!DOCTYPE html><html><body>Captive portal: please log in</body></html>",
			want:        fleet.StatusError{StatusCode: 200},
			wantMessage: "Captive portal: please log in",
		},
		{
			name:        "200 JSON error",
			status:      200,
			header:      map[string]string{"Content-Type": "application/json"},
			body:        `{"error":{"message":"stream not supported","type":"invalid_request_error"}}`,
			want:        fleet.StatusError{StatusCode: 200},
			wantMessage: "content type application/json, not text/event-stream: stream not supported",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			s, err := newBackend(t).Open(t.Context(), candidate(srv), hello())
			if err == nil {
				s.Close()
				t.Fatalf("Open() = a stream; want an error")
			}
			se, ok := errors.AsType[*fleet.StatusError](err)
			if !ok {
				t.Fatalf("Open() error = %v; want a *fleet.StatusError", err)
			}
			got := *se
			if tt.wantMessage != "" {
				if !strings.Contains(got.Message, tt.wantMessage) {
					t.Errorf("Message = %q; want it to contain %q", got.Message, tt.wantMessage)
				}
				got.Message = ""
			}
			got.Type, got.Code = "", "" // upstream.TestStatusError's
			if got != tt.want {
				t.Errorf("Open() error = %+v; want %+v", got, tt.want)
			}
		})
	}
}

// hijack serves a raw HTTP/1.1 answer written by write, then drops the
// connection: the faults net/http's own writer never produces.
func hijack(t *testing.T, write func(w *bufio.Writer)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack() error = %v", err)
			return
		}
		defer conn.Close()
		write(buf.Writer)
		buf.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// chunked frames s as one HTTP/1.1 chunk.
func chunked(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

func TestChatStreamCutConnection(t *testing.T) {
	const closeDelimited = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
	const chunkedHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	tests := []struct {
		name    string
		raw     string
		want    []fleet.Chunk
		wantErr error
	}{
		{
			// The transport reports a clean EOF: only the missing end marker tells.
			name:    "close-delimited, cut before the end",
			raw:     closeDelimited + roleChunk + content("a"),
			want:    []fleet.Chunk{roleOut, text("a")},
			wantErr: fleet.ErrTruncated,
		},
		{
			name:    "close-delimited, cut mid-event",
			raw:     closeDelimited + content("a") + `data: {"choices":[{"delta":{"content":"b`,
			want:    []fleet.Chunk{text("a")},
			wantErr: fleet.ErrTruncated,
		},
		{
			name: "close-delimited, cut after finish_reason",
			raw:  closeDelimited + content("a") + stopChunk,
			want: []fleet.Chunk{text("a"), stopOut},
		},
		{
			name: "close-delimited, complete",
			raw:  closeDelimited + content("a") + stopChunk + done,
			want: []fleet.Chunk{text("a"), stopOut},
		},
		{
			name:    "chunked, cut without the last chunk",
			raw:     chunkedHead + chunked(roleChunk) + chunked(content("a")),
			want:    []fleet.Chunk{roleOut, text("a")},
			wantErr: io.ErrUnexpectedEOF, // and fleet.ErrTruncated, checked below
		},
		{
			name: "chunked, done then cut",
			raw:  chunkedHead + chunked(content("a")) + chunked(done),
			want: []fleet.Chunk{text("a")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := hijack(t, func(w *bufio.Writer) { w.WriteString(tt.raw) })
			s, err := newBackend(t).Open(t.Context(), candidate(srv), hello())
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer s.Close()
			chunks, err := collect(s)
			if !reflect.DeepEqual(chunks, tt.want) {
				t.Errorf("chunks = %+v\nwant     %+v", chunks, tt.want)
			}
			checkErr(t, err, tt.wantErr)
			if tt.wantErr != nil && !errors.Is(err, fleet.ErrTruncated) {
				t.Errorf("Recv() error = %v; want it to match fleet.ErrTruncated", err)
			}
		})
	}
}

// enteredReader reports its first Read, so a test knows Recv is inside the
// body read before it acts.
type enteredReader struct {
	r       io.Reader
	once    sync.Once
	entered chan struct{}
}

func (e *enteredReader) Read(p []byte) (int, error) {
	e.once.Do(func() { close(e.entered) })
	return e.r.Read(p)
}

// wait receives from ch, failing the test instead of hanging when it
// never comes. It is a guard, not a clock: the tests never wait on time.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s after 10s", what)
		panic("unreachable")
	}
}

// TestStreamUnblocks checks that a Recv blocked on a silent upstream returns
// when the context is cancelled or the stream closed, and that the upstream
// sees its connection go (no orphaned generation).
func TestStreamUnblocks(t *testing.T) {
	tests := []struct {
		name    string
		prefix  string // what the server sends before it stalls
		first   []fleet.Chunk
		stop    func(cancel context.CancelFunc, s fleet.Stream)
		wantErr error
	}{
		{
			name:    "headers then nothing, cancel",
			stop:    func(cancel context.CancelFunc, _ fleet.Stream) { cancel() },
			wantErr: context.Canceled,
		},
		{
			name:    "headers then nothing, close",
			stop:    func(_ context.CancelFunc, s fleet.Stream) { s.Close() },
			wantErr: net.ErrClosed,
		},
		{
			name:    "role-only chunk then stall, cancel",
			prefix:  roleChunk + ": ping\n\n",
			first:   []fleet.Chunk{roleOut},
			stop:    func(cancel context.CancelFunc, _ fleet.Stream) { cancel() },
			wantErr: context.Canceled,
		},
		{
			name:   "role-only chunk then stall, close twice at once",
			prefix: roleChunk,
			first:  []fleet.Chunk{roleOut},
			stop: func(_ context.CancelFunc, s fleet.Stream) {
				var wg sync.WaitGroup
				for range 2 {
					wg.Go(func() { s.Close() })
				}
				wg.Wait()
			},
			wantErr: net.ErrClosed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gone := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tt.prefix)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				close(gone)
			}))
			defer srv.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s, err := newBackend(t).Open(ctx, candidate(srv), hello())
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer s.Close()
			for _, want := range tt.first {
				c, err := s.Recv()
				c.Raw = nil
				if err != nil || !reflect.DeepEqual(c, want) {
					t.Fatalf("Recv() = %+v, %v; want %+v", c, err, want)
				}
			}

			st := s.(*stream)
			entered := make(chan struct{})
			st.sse.r = &enteredReader{r: st.sse.r, entered: entered}
			result := make(chan error, 1)
			go func() {
				_, err := s.Recv()
				result <- err
			}()
			wait(t, entered, "body read")
			tt.stop(cancel, s)
			if err := wait(t, result, "Recv return"); !errors.Is(err, tt.wantErr) {
				t.Errorf("Recv() error = %v; want %v", err, tt.wantErr)
			}
			wait(t, gone, "disconnect at the server")
			if err := s.Close(); err != nil {
				t.Errorf("Close() again = %v; want nil", err)
			}
		})
	}
}

func TestCloseAfterEnd(t *testing.T) {
	srv := serve(t, cleanStream)
	s, err := newBackend(t).Open(t.Context(), candidate(srv), hello())
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	if _, err := collect(s); err != io.EOF {
		t.Fatalf("collect() error = %v; want io.EOF", err)
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v; want nil", err)
		}
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Errorf("Recv() after Close = %v; want io.EOF still", err)
	}
}

func TestChatStreamDeadPort(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	c := candidate(srv)
	srv.Close()
	_, err := newBackend(t).Open(t.Context(), c, hello())
	if err == nil {
		t.Fatalf("Open() to a closed port = nil error")
	}
	if _, ok := errors.AsType[*fleet.StatusError](err); ok {
		t.Errorf("Open() error = %v; want a transport error, not a status", err)
	}
}

// sent is what the fake upstream received.
type sent struct {
	path, auth, accept string
	body               map[string]any
}

func TestChatStreamRequest(t *testing.T) {
	temp, topP, maxTok, seed := 0.2, 0.9, 64, 7
	tests := []struct {
		name   string
		apiKey string
		req    fleet.Request
		want   map[string]any // fields of the body; nil means "absent"
		auth   string
	}{
		{
			name: "plain",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}},
			want: map[string]any{
				"model":            "m",
				"stream":           true,
				"stream_options":   map[string]any{"include_usage": true},
				"messages":         []any{map[string]any{"role": "user", "content": "hi"}},
				"reasoning_effort": nil, "temperature": nil, "tools": nil, "response_format": nil,
			},
		},
		{
			name:   "thinking with a level and a key",
			apiKey: "sk-local",
			req:    fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}, Thinking: true, ThinkLevel: "high"},
			want:   map[string]any{"reasoning_effort": "high"},
			auth:   "Bearer sk-local",
		},
		{
			name: "thinking without a level",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}, Thinking: true},
			want: map[string]any{"reasoning_effort": "medium"},
		},
		{
			name: "thinking turned off",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}, NoThinking: true},
			want: map[string]any{"reasoning_effort": nil, "chat_template_kwargs": map[string]any{"enable_thinking": false}},
		},
		{
			name: "options",
			req: fleet.Request{
				Messages: []fleet.Message{{Role: "user", Content: "hi"}},
				Options:  fleet.Options{Temperature: &temp, TopP: &topP, MaxTokens: &maxTok, Seed: &seed, Stop: []string{"\n\n"}},
			},
			want: map[string]any{"temperature": 0.2, "top_p": 0.9, "max_tokens": 64.0, "seed": 7.0, "stop": []any{"\n\n"}},
		},
		{
			name: "tools and a tool round",
			req: fleet.Request{
				Messages: []fleet.Message{
					{Role: "user", Content: "weather?"},
					{Role: "assistant", Thinking: "hidden", ToolCalls: []fleet.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {ID: "call_2", Name: "now"}}},
					{Role: "tool", Content: "sunny", ToolCallID: "call_1", Name: "get_weather"},
				},
				Tools: []fleet.Tool{{Function: fleet.ToolFunction{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}},
			},
			want: map[string]any{
				"messages": []any{
					map[string]any{"role": "user", "content": "weather?"},
					map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
						map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}},
						map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "now", "arguments": "{}"}},
					}},
					map[string]any{"role": "tool", "content": "sunny", "tool_call_id": "call_1", "name": "get_weather"},
				},
				"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}},
			},
		},
		{
			name: "image as a data url",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "what is it?", Images: []string{"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"}}}},
			want: map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "what is it?"},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"}},
			}}}},
		},
		{
			name: "Ollama format json",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}, Format: json.RawMessage(`"json"`)},
			want: map[string]any{"response_format": map[string]any{"type": "json_object"}},
		},
		{
			name: "Ollama format schema",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}, Format: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
			want: map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{
				"name": "response", "schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}},
			}}},
		},
		{
			name: "OpenAI response_format passes through",
			req:  fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}, Format: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{}}}`)},
			want: map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan sent, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s := sent{path: r.URL.Path, auth: r.Header.Get("Authorization"), accept: r.Header.Get("Accept")}
				if err := json.NewDecoder(r.Body).Decode(&s.body); err != nil {
					t.Errorf("request body: %v", err)
				}
				got <- s
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, cleanStream)
			}))
			defer srv.Close()
			c := candidate(srv)
			c.URL += "/" // a trailing slash must not double
			c.APIKey = tt.apiKey
			s, err := newBackend(t).Open(t.Context(), c, &tt.req)
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer s.Close()
			if _, err := collect(s); err != io.EOF {
				t.Errorf("collect() error = %v; want io.EOF", err)
			}
			req := wait(t, got, "request")
			if req.path != "/v1/chat/completions" {
				t.Errorf("path = %q; want /v1/chat/completions", req.path)
			}
			if req.auth != tt.auth {
				t.Errorf("Authorization = %q; want %q", req.auth, tt.auth)
			}
			if req.accept != "text/event-stream" {
				t.Errorf("Accept = %q; want text/event-stream", req.accept)
			}
			for k, want := range tt.want {
				v, ok := req.body[k]
				if want == nil {
					if ok {
						t.Errorf("body has %s = %v; want it absent", k, v)
					}
					continue
				}
				if !reflect.DeepEqual(v, want) {
					t.Errorf("body %s = %#v\nwant %#v", k, v, want)
				}
			}
		})
	}
}

func TestModels(t *testing.T) {
	const list = `{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","created":1754000000,"owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":32768,"permission":[]},{"id":"qwen3:8b","object":"model","created":1754000000,"owned_by":"library"}]}`
	auth := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		auth <- r.Header.Get("Authorization")
		if r.Header.Get("Authorization") != "Bearer k" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, list)
	}))
	defer srv.Close()
	b := newBackend(t)

	ids, err := b.Models(t.Context(), srv.URL+"/v1", "k")
	if err != nil || !reflect.DeepEqual(ids, []string{"Qwen/Qwen3-8B", "qwen3:8b"}) {
		t.Errorf("Models() = %q, %v; want [Qwen/Qwen3-8B qwen3:8b]", ids, err)
	}
	if a := wait(t, auth, "request"); a != "Bearer k" {
		t.Errorf("Authorization = %q; want Bearer k", a)
	}

	_, err = b.Models(t.Context(), srv.URL+"/v1", "")
	if se, ok := errors.AsType[*fleet.StatusError](err); !ok || se.StatusCode != 401 || se.Message != "Invalid API Key" {
		t.Errorf("Models() without a key error = %v; want StatusError 401 Invalid API Key", err)
	}
	wait(t, auth, "request")
}

// loopReader repeats one chunk event forever.
type loopReader struct {
	ev  []byte
	off int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.ev[r.off:])
		n += c
		r.off = (r.off + c) % len(r.ev)
	}
	return n, nil
}

// BenchmarkRecv measures the cost of one content chunk, from body bytes to
// fleet.Chunk, without the network.
func BenchmarkRecv(b *testing.B) {
	body := &loopReader{ev: []byte(chunk(`"delta":{"content":" token"},"finish_reason":null`))}
	s := newStream(context.Background(), func() {}, io.NopCloser(body), maxLine)
	b.SetBytes(int64(len(body.ev)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Recv(); err != nil {
			b.Fatal(err)
		}
	}
}

// A redirect is not followed: a 301/302 would resend the prompt as a GET,
// or to another host.
func TestRedirectIsNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	_, err := newBackend(t).Open(t.Context(), candidate(srv), &fleet.Request{Messages: []fleet.Message{{Role: "user", Content: "hi"}}})
	var se *fleet.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusFound {
		t.Errorf("Open() error = %v; want the 302 as a status error", err)
	}
	if elsewhere.Load() != 0 {
		t.Error("the redirect was followed")
	}
}

// BenchmarkRawBody is the body of a usual same-dialect streamed chat: the
// caller's fields with the model, the stream and its usage put in.
func BenchmarkRawBody(b *testing.B) {
	var raw map[string]json.RawMessage
	json.Unmarshal([]byte(`{"model":"auto","stream":true,"messages":[{"role":"user","content":"hi"}]}`), &raw)
	req := &fleet.Request{Model: "auto", Stream: true, Messages: []fleet.Message{{Role: "user", Content: "hi"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := rawBody(fleet.Candidate{Model: "tiny"}, req, raw, true); err != nil {
			b.Fatal(err)
		}
	}
}
