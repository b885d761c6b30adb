package simfleet

import (
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
