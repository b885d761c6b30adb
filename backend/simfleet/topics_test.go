package simfleet

import (
	"fmt"
	"strings"
	"testing"
)

// With Topics, a prompt on one of the topics gets a long markdown answer
// (a code block among it) after the server's lead, in both dialects; any
// other prompt, and every prompt without Topics, the short Answer.
func TestTopics(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			ctx := testContext(t)
			cfg := p.config("alpha")
			cfg.Topics = true
			s := start(t, cfg)
			plain := start(t, p.config("beta"))
			ask := func(s *Server, prompt string) string {
				t.Helper()
				body := strings.Replace(p.body(p.model, true, false), "hello there", prompt, 1)
				raw, err := readAll(mustPost(ctx, t, client(t), p, s, body))
				if err != nil {
					t.Fatal(err)
				}
				return p.collect(t, p.events(t, raw)).content
			}
			code := ask(s, "Write a Go function that reverses a string, with a test.")
			if !strings.HasPrefix(code, "alpha here ("+p.model+"):\n\n") || !strings.Contains(code, "```go\npackage reverse\n") || len(code) < 800 {
				t.Errorf("topic answer = %q; want the lead, then a long answer with a Go code block", code)
			}
			if got := ask(s, "Hello there"); got != s.Answer(p.model) {
				t.Errorf("other prompt = %q; want the Answer", got)
			}
			if got := ask(plain, "Write a Go function that reverses a string"); got != plain.Answer(p.model) {
				t.Errorf("without Topics = %q; want the Answer", got)
			}
		})
	}
}

// A fault or server name that is not one says which ones are.
func TestUnknownNamesListTheKnownOnes(t *testing.T) {
	if _, err := ParseFault("explode"); err == nil || !strings.HasPrefix(err.Error(), `unknown fault "explode": one of healthy, `) || !strings.Contains(err.Error(), "refuse") {
		t.Errorf("ParseFault(explode) = %v; want the fault names", err)
	}
	f, err := StartDemo()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := NewDemo(f, nil)
	if _, err := d.SetFault("gpt-4o", "healthy"); err == nil || err.Error() != `no demo server "gpt-4o": one of qwen3-8b, llama3.2-3b, qwen3-32b-vllm, mistral-7b-llamacpp` {
		t.Errorf("SetFault(gpt-4o) = %v; want the server names", err)
	}
	if _, err := d.SetFault("qwen3-8b", "explode"); err == nil || !strings.HasSuffix(err.Error(), ", or vram_pressure (GPU memory pressure)") {
		t.Errorf("SetFault(explode) = %v; want the fault names with vram_pressure", err)
	}
	// A bad parameter says what the fault takes, in words, and nothing of
	// vram_pressure, which is no answer to it.
	if _, err := d.SetFault("qwen3-8b", "status:abc"); err == nil || err.Error() != `fault status takes a whole number (HTTP N), not "abc"` {
		t.Errorf("SetFault(status:abc) = %v; want what status takes", err)
	}
	if _, err := ParseFault("slow:soon"); err == nil || !strings.Contains(err.Error(), "takes a duration such as 250ms or 2s") {
		t.Errorf("ParseFault(slow:soon) = %v; want what slow takes", err)
	}
	// A caller's long name is clipped before it is echoed.
	long := strings.Repeat("r", 1<<20)
	for _, err := range []error{func() error { _, err := d.SetFault(long, "healthy"); return err }(), func() error { _, err := ParseFault(long); return err }()} {
		if err == nil || len(err.Error()) > 1<<10 {
			t.Errorf("error for a name of 1 MiB: %d bytes; want at most 1 KiB", len(fmt.Sprint(err)))
		}
	}
}
