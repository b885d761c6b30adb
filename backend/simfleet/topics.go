package simfleet

import "strings"

// A topic is a longer answer, in markdown, that a demo server gives to a
// prompt that mentions one of its keys, so the demo shows lists, code
// blocks and long answers that scroll (Config.Topics). Every other prompt
// gets the server's short Answer.
type topic struct {
	keys []string // lower case; any one in the prompt picks the topic
	text string
}

var topics = []topic{
	{keys: []string{"circuit breaker"}, text: `A circuit breaker stops sending requests to a server that keeps failing, so that callers get a fast answer from elsewhere instead of waiting on a dead one. After a **cool-down** it lets a single trial request through: if that succeeds the breaker closes and traffic returns, if it fails the breaker trips again.

In Switchyard each candidate has its own breaker:

1. **Healthy** (closed): requests go through; failures that were the server's fault are counted.
2. **Tripped** (open): after ` + "`failure_threshold`" + ` failures in a row the candidate is skipped until its cool-down ends.
3. **Trying again** (half-open): one trial request decides.`},
	{keys: []string{"go function", "reverses a string", "golang"}, text: "Here is a function that reverses a string by runes, so that multi-byte characters stay whole, and a table test for it.\n\n" +
		"```go\npackage reverse\n\n// Reverse returns s with its runes in the opposite order.\nfunc Reverse(s string) string {\n\tr := []rune(s)\n\tfor i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {\n\t\tr[i], r[j] = r[j], r[i]\n\t}\n\treturn string(r)\n}\n```\n\n" +
		"```go\npackage reverse\n\nimport \"testing\"\n\nfunc TestReverse(t *testing.T) {\n\ttests := []struct{ in, want string }{\n\t\t{\"\", \"\"},\n\t\t{\"abc\", \"cba\"},\n\t\t{\"héllo\", \"olléh\"},\n\t\t{\"日本語\", \"語本日\"},\n\t}\n\tfor _, tt := range tests {\n\t\tif got := Reverse(tt.in); got != tt.want {\n\t\t\tt.Errorf(\"Reverse(%q) = %q; want %q\", tt.in, got, tt.want)\n\t\t}\n\t}\n}\n```\n\n" +
		"Run it with `go test ./...`. Reversing bytes instead of runes would break every character outside ASCII."},
	{keys: []string{"slowly", "slow", "long story", "long answer"}, text: `When a local model answers slowly, look at these, roughly in order of how often they are the cause:

1. **The model is not loaded.** The first request after a while loads it from disk; Ollama unloads idle models after five minutes. Check with ` + "`ollama ps`" + `, and set ` + "`keep_alive`" + ` longer if you want it to stay.
2. **It spilled out of GPU memory.** When the model and its context do not fit in VRAM, part of it runs on the CPU and every token gets slower. ` + "`ollama ps`" + ` shows the split; a smaller quantisation or a shorter context fits again.
3. **The context is long.** The prompt is read before the first token comes: a long conversation or a big document costs seconds before anything appears.
4. **Something else uses the GPU.** Another model, a game, a training run: the Fleet screen's GPU panel shows what is on each card and its memory over time.
5. **The server queues.** A server that runs one request at a time makes the second wait for the first.

A quick measurement tells them apart:

` + "```sh\ntime curl -s http://127.0.0.1:11434/api/generate -d '{\"model\":\"qwen3:8b\",\"prompt\":\"hi\",\"stream\":false}' | jq .load_duration,.prompt_eval_duration,.eval_duration\n```" + `

A large ` + "`load_duration`" + ` is loading, a large ` + "`prompt_eval_duration`" + ` is the context, and a slow ` + "`eval_duration`" + ` per token is memory or a busy GPU.

Switchyard helps with all of these without you watching: it learns each candidate's usual time to first token, gives up on one that is much slower than usual and asks the next, and moves a candidate whose GPU is short of memory to the end of the line. The line under each answer says when that happened and why.`},
}

// topicOf returns the text of the first topic prompt mentions, or "".
func topicOf(prompt string) string {
	p := strings.ToLower(prompt)
	for _, t := range topics {
		for _, k := range t.keys {
			if strings.Contains(p, k) {
				return t.text
			}
		}
	}
	return ""
}

// answerTokens are the content tokens of the answer to prompt for model:
// with Topics, a topic's text after the server's lead; else AnswerTokens.
func (s *Server) answerTokens(model, prompt string) []string {
	if !s.cfg.Topics {
		return s.AnswerTokens(model)
	}
	text := topicOf(prompt)
	if text == "" {
		return s.AnswerTokens(model)
	}
	return append([]string{s.cfg.Name + " here (" + model + "):"}, words("\n\n"+text)...)
}
