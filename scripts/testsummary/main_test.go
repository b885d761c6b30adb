package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"pass","Package":"p/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"p/a","Test":"TestReal","Output":"=== RUN   TestReal\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestReal","Output":"    real_test.go:12: realserver: SWITCHYARD_REALSERVERS is not set\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestReal","Output":"--- SKIP: TestReal (0.00s)\n"}`,
		`{"Action":"skip","Package":"p/a","Test":"TestReal"}`,
		`{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t0.01s\n"}`,
		`{"Action":"output","Package":"p/b","Test":"TestBad","Output":"    b_test.go:3: got 1; want 2\n"}`,
		`{"Action":"fail","Package":"p/b","Test":"TestBad"}`,
		`{"Action":"output","Package":"p/b","Output":"FAIL\tp/b\t0.01s\n"}`,
		`{"Action":"fail","Package":"p/b"}`,
	}, "\n")
	var out strings.Builder
	skips, failed, err := summarize(strings.NewReader(in), &out)
	if err != nil || !failed {
		t.Fatalf("summarize() failed %v, err %v; want failed, nil", failed, err)
	}
	if got, want := strings.Join(skips, ""), "p/a TestReal: realserver: SWITCHYARD_REALSERVERS is not set\n"; got != want {
		t.Errorf("skips = %q; want %q", got, want)
	}
	if got, want := out.String(), "ok  \tp/a\t0.01s\n    b_test.go:3: got 1; want 2\nFAIL\tp/b\t0.01s\n"; got != want {
		t.Errorf("output = %q; want %q", got, want)
	}
}
