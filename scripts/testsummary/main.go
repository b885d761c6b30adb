// Command testsummary reads `go test -json` on its standard input and
// prints what plain `go test` prints (each package's result line, and the
// output of the tests that failed), then, to the file named by its one
// argument, one line per skipped test with the reason it gave: `make
// test` says in its summary which tests were skipped, and why. It exits 1
// when a test or package failed, as go test does.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ./... | testsummary SKIPS-FILE")
		os.Exit(2)
	}
	skips, failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(strings.Join(skips, "")), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// summarize copies the plain output of in to out and returns the skipped
// tests, one "package Test: reason\n" line each, and whether anything
// failed.
func summarize(in io.Reader, out io.Writer) (skips []string, failed bool, err error) {
	outputs := map[string][]string{} // by package and test: the test's output so far
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(out, sc.Text()) // a build error, say: as it came
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "output" && e.Test == "":
			if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "--- ") && e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case e.Action == "output":
			outputs[key] = append(outputs[key], e.Output)
		case e.Action == "fail" && e.Test != "":
			failed = true
			fmt.Fprint(out, strings.Join(outputs[key], ""))
			delete(outputs, key)
		case e.Action == "fail":
			failed = true
		case e.Action == "skip" && e.Test != "":
			skips = append(skips, fmt.Sprintf("%s %s: %s\n", e.Package, e.Test, skipReason(outputs[key])))
			delete(outputs, key)
		case e.Action == "pass":
			delete(outputs, key)
		}
	}
	return skips, failed, sc.Err()
}

// skipReason is what a skipped test said before "--- SKIP", trimmed of
// its file:line prefix.
func skipReason(lines []string) string {
	var said []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		if _, rest, ok := strings.Cut(l, ".go:"); ok {
			if _, msg, ok := strings.Cut(rest, ": "); ok {
				l = msg
			}
		}
		said = append(said, l)
	}
	if len(said) == 0 {
		return "no reason given"
	}
	return strings.Join(said, " ")
}
