package report

import (
	"math"
	"strings"
	"testing"
	"testing/iotest"
)

func TestScrapeProm(t *testing.T) {
	page := `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-32B"} 3.0
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-32B"} 12.0 1712345678000
vllm:kv_cache_usage_perc{model_name="a\"b}c",engine="1"} 0.5
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="Qwen/Qwen3-32B"} 0.0
vllm:kv_cache_usage_perc NaN
vllm:kv_cache_usage_perc{model_name="broken 1.0
vllm:kv_cache_usage_perc{model_name="x"} not-a-number
vllm:kv_cache_usage_perc{} +Inf
` + "vllm:kv_cache_usage_perc{model_name=\"long\"} " + strings.Repeat("9", maxPromLine) + `
  vllm:num_requests_running   7

# EOF
`
	type got struct {
		name, model string
		value       float64
	}
	var all []got
	want := func(n string) bool { return strings.HasPrefix(n, "vllm:") && !strings.HasSuffix(n, "_bucket") }
	err := scrapeProm(strings.NewReader(page), want, func(s promSample) {
		all = append(all, got{s.name, s.label("model_name"), s.value})
	})
	if err != nil {
		t.Fatalf("scrapeProm() = %v", err)
	}
	wantAll := []got{
		{"vllm:num_requests_running", "Qwen/Qwen3-32B", 3},
		{"vllm:num_requests_waiting", "Qwen/Qwen3-32B", 12},
		{"vllm:kv_cache_usage_perc", `a"b}c`, 0.5},
		{"vllm:kv_cache_usage_perc", "", math.NaN()},
		{"vllm:kv_cache_usage_perc", "", math.Inf(1)},
		{"vllm:num_requests_running", "", 7},
	}
	if len(all) != len(wantAll) {
		t.Fatalf("scrapeProm() found %d samples %v; want %d", len(all), all, len(wantAll))
	}
	for i, w := range wantAll {
		g := all[i]
		if g.name != w.name || g.model != w.model || !(g.value == w.value || math.IsNaN(g.value) && math.IsNaN(w.value)) {
			t.Errorf("sample %d = %+v; want %+v", i, g, w)
		}
	}
}

func TestScrapePromReadError(t *testing.T) {
	err := scrapeProm(iotest.TimeoutReader(strings.NewReader(strings.Repeat("x 1\n", 100000))), func(string) bool { return true }, func(promSample) {})
	if err == nil {
		t.Error("scrapeProm() on a failing reader = nil; want the error")
	}
}

func TestPromLabel(t *testing.T) {
	s := promSample{labels: `engine="0", model_name="m\\1\n",le="+Inf"`}
	for key, want := range map[string]string{"engine": "0", "model_name": "m\\1\n", "le": "+Inf", "absent": ""} {
		if got := s.label(key); got != want {
			t.Errorf("label(%q) = %q; want %q", key, got, want)
		}
	}
}
