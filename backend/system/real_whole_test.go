package system

import (
	"strings"
	"testing"

	"github.com/switchyard/switchyard/backend/realserver"
)

// llama-server refuses a request with tools and logprobs as a stream (400
// "logprobs is not supported with tools + stream") that it answers
// unstreamed: through Switchyard the unstreamed request succeeds as it
// does straight to the server (docs/DESIGN.md, "Non-streaming requests").
func TestRealRefusedStreamIsAskedWhole(t *testing.T) {
	b := realserver.Find(t)
	llama := b.LlamaServer(t, realserver.LlamaOptions{})
	sy := startReal(t, quietSelection, llamaCand("alpha", llama, ""))
	body := `{"model":"alpha","stream":false,"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"seed":3,"logprobs":true,
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]}`
	direct := chat(t, llama.URL, "/chat/completions", strings.Replace(body, `"model":"alpha"`, `"model":"tiny"`, 1))
	if direct.status != 200 {
		t.Fatalf("straight to the server: %d %s", direct.status, direct.body)
	}
	if streamed := chat(t, llama.URL, "/chat/completions", strings.Replace(body, `"stream":false`, `"stream":true`, 1)); streamed.status != 400 {
		t.Fatalf("the server took the streamed form (%d): the test no longer shows the refusal", streamed.status)
	}
	via := chat(t, sy.url, "/v1/chat/completions", body)
	if via.status != 200 {
		t.Fatalf("through Switchyard: %d %s", via.status, via.body)
	}
	if via.content == "" && !strings.Contains(via.body, `"tool_calls"`) {
		t.Errorf("no answer: %s", via.body)
	}
	if !strings.Contains(via.body, `"logprobs":{"content":[`) {
		t.Errorf("logprobs lost: %s", via.body)
	}
}
