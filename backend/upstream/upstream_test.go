package upstream

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

func TestStatusError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   fleet.StatusError
	}{
		{"OpenAI dialect", 400, nil, `{"error":{"message":"bad","type":"invalid_request_error"}}`, fleet.StatusError{StatusCode: 400, Message: "bad", Type: "invalid_request_error"}},
		{"Ollama dialect", 404, nil, `{"error":"model 'x' not found"}`, fleet.StatusError{StatusCode: 404, Message: "model 'x' not found"}},
		{"vLLM flat dialect", 400, nil, `{"object":"error","message":"too long","code":400}`, fleet.StatusError{StatusCode: 400, Message: "too long"}},
		{"an HTML page from a proxy", 502, nil, "<html><body>Bad Gateway</body></html>", fleet.StatusError{StatusCode: 502, Message: "<html><body>Bad Gateway</body></html>"}},
		{"429 is busy", 429, http.Header{"Retry-After": {"3"}}, `{}`, fleet.StatusError{StatusCode: 429, Message: "{}", Busy: true, RetryAfter: 3 * time.Second}},
		{"503 with Retry-After is busy", 503, http.Header{"Retry-After": {"1"}}, `{"error":"overloaded"}`,
			fleet.StatusError{StatusCode: 503, Message: "overloaded", Busy: true, RetryAfter: time.Second}},
		{"Ollama's full queue is busy", 503, nil, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`,
			fleet.StatusError{StatusCode: 503, Message: "server busy, please try again.  maximum pending requests exceeded", Busy: true}},
		{"a plain 503 is not busy", 503, nil, `{"error":"engine dead"}`, fleet.StatusError{StatusCode: 503, Message: "engine dead"}},
		{"llama.cpp loading", 503, nil, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`,
			fleet.StatusError{StatusCode: 503, Message: "Loading model", Type: "unavailable_error", Code: "503", Loading: true}},
		{"a model that can't think", 400, nil, `{"error":"\"tiny\" does not support thinking"}`,
			fleet.StatusError{StatusCode: 400, Message: `"tiny" does not support thinking`, Unsupported: "thinking"}},
		{"a model without tools", 400, nil, `{"error":"registry.ollama.ai/library/gemma:latest does not support tools"}`,
			fleet.StatusError{StatusCode: 400, Message: "registry.ollama.ai/library/gemma:latest does not support tools", Unsupported: "tools"}},
		{"an embedding model asked to chat (Ollama)", 400, nil, `{"error":"\"embed\" does not support chat"}`,
			fleet.StatusError{StatusCode: 400, Message: `"embed" does not support chat`, Unsupported: "completion"}},
		{"an embedding model asked to chat (vLLM)", 400, nil, `{"object":"error","message":"The model does not support Chat Completions API","type":"BadRequestError","param":null,"code":400}`,
			fleet.StatusError{StatusCode: 400, Message: "The model does not support Chat Completions API", Unsupported: "completion"}},
		{"a chat model asked to embed (vLLM)", 400, nil, `{"object":"error","message":"The model does not support Embeddings API","type":"BadRequestError","param":null,"code":400}`,
			fleet.StatusError{StatusCode: 400, Message: "The model does not support Embeddings API", Unsupported: "embedding"}},
		{"llama-server without --embeddings", 501, nil, `{"error":{"code":501,"message":"This server does not support embeddings. Start it with ` + "`--embeddings`" + `","type":"not_supported_error"}}`,
			fleet.StatusError{StatusCode: 501, Message: "This server does not support embeddings. Start it with `--embeddings`", Type: "not_supported_error", Code: "501", Unsupported: "embedding"}},
		{"output that does not parse", 500, nil, `{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}`,
			fleet.StatusError{StatusCode: 500, Message: "The model produced output that does not match the expected peg-native format", Type: "server_error", Code: "500", Output: true}},
		{"llama.cpp's context error keeps its type and code", 400, nil, `{"error":{"code":400,"message":"request (3028 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3028,"n_ctx":1024}}`,
			fleet.StatusError{StatusCode: 400, Message: "request (3028 tokens) exceeds the available context size (1024 tokens), try increasing it", Type: "exceed_context_size_error", Code: "400"}},
		{"a string code", 404, nil, `{"error":{"message":"The model x does not exist","type":"invalid_request_error","code":"model_not_found"}}`,
			fleet.StatusError{StatusCode: 404, Message: "The model x does not exist", Type: "invalid_request_error", Code: "model_not_found"}},
		{"Ollama's runner refusing an image, its message a JSON error", 400, nil, `{"error":"{\"error\":{\"code\":400,\"message\":\"Multimodal data provided, but model does not support multimodal requests.\",\"type\":\"invalid_request_error\"}}"}`,
			fleet.StatusError{StatusCode: 400, Message: "Multimodal data provided, but model does not support multimodal requests.", Unsupported: "vision"}},
		{"llama-server without a projector refusing an image", 500, nil, `{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}`,
			fleet.StatusError{StatusCode: 500, Message: "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj", Type: "server_error", Code: "500", Unsupported: "vision"}},
		{"Ollama's streamed answer to a bad format", 500, nil, `{"error":"invalid format: \"\\\"xml\\\"\"; expected \"json\" or a valid JSON Schema object"}`,
			fleet.StatusError{StatusCode: 500, Message: `invalid format: "\"xml\""; expected "json" or a valid JSON Schema object`, Invalid: true}},
		{"Ollama's streamed answer to an option of the wrong type", 500, nil, `{"error":"option \"repeat_last_n\" must be of type integer"}`,
			fleet.StatusError{StatusCode: 500, Message: `option "repeat_last_n" must be of type integer`, Invalid: true}},
		{"Ollama's runner died on the request", 500, nil, `{"error":"llama-server process has terminated: GGML_ASSERT(n_ctx > 0) failed"}`,
			fleet.StatusError{StatusCode: 500, Message: "llama-server process has terminated: GGML_ASSERT(n_ctx > 0) failed", Crash: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: tt.header, Body: io.NopCloser(strings.NewReader(tt.body))}
			if resp.Header == nil {
				resp.Header = http.Header{}
			}
			if got := StatusError(resp, OllamaBusy); *got != tt.want {
				t.Errorf("StatusError() = %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestErrorMessageIsBounded(t *testing.T) {
	long := strings.Repeat("é", 3000)
	for _, body := range []string{`{"error":"` + long + `"}`, `{"error":{"message":"` + long + `"}}`} {
		if got := ErrorMessage([]byte(body)); len(got) > fleet.MaxErrorText+len("…") {
			t.Errorf("ErrorMessage() of a %d-byte message = %d bytes; want at most %d", len(long), len(got), fleet.MaxErrorText)
		}
	}
	if got := ErrorMessage([]byte(strings.Repeat("x", 5000))); len(got) > 200+len("…") {
		t.Errorf("a plain-text body kept %d bytes", len(got))
	}
}

func TestRetryAfter(t *testing.T) {
	const date = "Wed, 21 Oct 2015 07:28:00 GMT" // the answer's own Date
	for v, want := range map[string]time.Duration{
		"": 0, "2": 2 * time.Second, "0.5": 500 * time.Millisecond, "-1": 0, "soon": 0,
		// A server asking for more than an hour is tried again within the
		// hour, not every second as if it had asked for nothing.
		"3601": time.Hour, "99999": time.Hour,
		// The date form, counted from the answer's Date.
		"Wed, 21 Oct 2015 07:28:30 GMT": 30 * time.Second,
		"Wed, 21 Oct 2015 07:27:00 GMT": 0,
		"Thu, 21 Oct 2099 07:28:00 GMT": time.Hour,
	} {
		if got := RetryAfter(http.Header{"Retry-After": {v}, "Date": {date}}); got != want {
			t.Errorf("RetryAfter(%q) = %v; want %v", v, got, want)
		}
	}
}

func TestOllamaBusy(t *testing.T) {
	for msg, want := range map[string]bool{
		"server busy, please try again.  maximum pending requests exceeded": true,
		"maximum pending requests exceeded":                                 true,
		"ollama is shutting down":                                           false,
		"":                                                                  false,
	} {
		if got := OllamaBusy(msg); got != want {
			t.Errorf("OllamaBusy(%q) = %v; want %v", msg, got, want)
		}
	}
}

func TestPoolSharesOneClientPerHost(t *testing.T) {
	p := NewPool(Settings{})
	a, b := p.Client("http://127.0.0.1:8000/v1"), p.Client("http://127.0.0.1:8000/other")
	c := p.Client("http://127.0.0.1:8001/v1")
	if a != b || a == c {
		t.Errorf("clients: same host shared %v, other host separate %v", a == b, a != c)
	}
}
