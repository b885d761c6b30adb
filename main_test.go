package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/realserver"
)

// runCLI runs the command line in-process with throwaway XDG directories.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCommandLine(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("selection:\n  open_duration: soon\n"), 0o600)
	good := filepath.Join(t.TempDir(), "good.yaml")
	os.WriteFile(good, []byte("chat:\n  default_model: nobody-home\n  candidates:\n    - {id: nobody-home, provider: ollama, url: \"http://127.0.0.1:1\", model: m}\n"), 0o600)

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string
		wantErr    string
		errOneLine bool
	}{
		{name: "version", args: []string{"version"}, wantCode: exitOK, wantOut: "switchyard 0."},
		{name: "version --help is its help", args: []string{"version", "--help"}, wantCode: exitOK, wantOut: "Usage: switchyard version"},
		{name: "version with an argument", args: []string{"version", "extra"}, wantCode: exitUsage, wantErr: `unexpected argument "extra"`, errOneLine: true},
		{name: "no command in the headless build says how to get the window", args: nil, wantCode: exitUsage,
			wantErr: "this is the headless build, without the window: run `make run`", errOneLine: true},
		{name: "help", args: []string{"help"}, wantCode: exitOK, wantOut: "switchyard serve"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: exitUsage, wantErr: `unknown command "frobnicate"`},
		{name: "serve with a bad flag", args: []string{"serve", "--nope"}, wantCode: exitUsage, wantErr: "flag provided but not defined", errOneLine: true},
		{name: "serve with an invalid config names the key", args: []string{"serve", "--config", bad, "--addr", "127.0.0.1:0"},
			wantCode: exitError, wantErr: "selection.open_duration", errOneLine: true},
		{name: "serve refuses a non-loopback address without a key", args: []string{"serve", "--demo", "--addr", "0.0.0.0:0"},
			wantCode: exitError, wantErr: "set api_key", errOneLine: true},
		{name: "check an invalid config", args: []string{"check", "--config", bad}, wantCode: exitError, wantErr: "selection.open_duration"},
		{name: "check without a config says what it looked for", args: []string{"check"}, wantCode: exitOK,
			wantOut: "the embedded default applies. Looked for local model servers:\n  Ollama             http://127.0.0.1:11434"},
		{name: "check a config that is not there", args: []string{"check", "--config", "/nonexistent/sy.yaml"}, wantCode: exitError,
			wantErr: "config /nonexistent/sy.yaml: no such file (write one", errOneLine: true},
		{name: "serve a config that is not there, in the same words", args: []string{"serve", "--config", "/nonexistent/sy.yaml"}, wantCode: exitError,
			wantErr: "config /nonexistent/sy.yaml: no such file (write one", errOneLine: true},
		{name: "serve --help", args: []string{"serve", "--help"}, wantCode: exitOK, wantOut: "--addr ADDR"},
		{name: "demo --help has no --demo", args: []string{"demo", "--help"}, wantCode: exitOK, wantOut: "Serve the simulated demo fleet"},
		{name: "demo --help counts what the UI shows", args: []string{"demo", "--help"}, wantCode: exitOK, wantOut: "four model servers in-process (Ollama,\nvLLM and llama.cpp wire formats) offering six candidates"},
		{name: "a taken port is one clear line", args: []string{"serve", "--config", good, "--addr", taken.Addr().String()}, wantCode: exitAddrInUse,
			wantErr: "is taken by another program (another Switchyard?): choose another address with --addr", errOneLine: true},
		{name: "an unknown flag is one line and a pointer", args: []string{"demo", "--demo"}, wantCode: exitUsage,
			wantErr: "switchyard demo: flag provided but not defined: -demo (see switchyard demo --help)", errOneLine: true},
		{name: "an address that is no address", args: []string{"serve", "--addr", "nonsense"}, wantCode: exitError,
			wantErr: "--addr", errOneLine: true},
		{name: "check --help", args: []string{"check", "--help"}, wantCode: exitOK, wantOut: "Exit 0 when all is well"},
		{name: "experiment --help", args: []string{"experiment", "--help"}, wantCode: exitOK, wantOut: "--requests int"},
		{name: "check an unreachable candidate", args: []string{"check", "--config", good}, wantCode: exitUnhealthy, wantOut: "FAIL  nobody-home"},
		{name: "bench help names its flags", args: []string{"bench", "--help"}, wantCode: exitOK, wantOut: "--profile DIR"},
		{name: "bench with an argument", args: []string{"bench", "now"}, wantCode: exitUsage, wantErr: `unexpected argument "now"`, errOneLine: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d; want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("stdout = %q; want it to contain %q", out, tt.wantOut)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q; want it to contain %q", errOut, tt.wantErr)
			}
			if tt.errOneLine {
				if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 {
					t.Errorf("stderr has %d lines; want one clear line:\n%s", len(lines), errOut)
				}
			}
		})
	}
}

// TestCheckAgainstRealOllama: names written without :latest are Ollama's
// names, and a server that answers but lacks a model is said to lack it,
// not to be silent (issue 10, finding 7).
func TestCheckAgainstRealOllama(t *testing.T) {
	b := realserver.Find(t)
	oll := b.Ollama(t, realserver.OllamaOptions{})
	oll.Create(t, "tiny", realserver.ChatMLModelfile(b.Tiny(t)))
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("chat:\n  default_model: short\n  candidates:\n"+
		"    - {id: short, provider: ollama, url: %q, model: tiny}\n"+
		"    - {id: tagged, provider: ollama, url: %q, model: \"tiny:latest\"}\n"+
		"    - {id: missing, provider: ollama, url: %q, model: \"qwen3:8b\"}\n", oll.Root, oll.Root, oll.Root)), 0o600)
	code, out, errOut := runCLI(t, "check", "--config", cfg)
	if code != exitUnhealthy {
		t.Errorf("exit code = %d; want %d", code, exitUnhealthy)
	}
	for _, want := range []string{"ok    short", "ok    tagged", "FAIL  missing"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if want := "1 of 3 answered but do not serve their model"; !strings.Contains(errOut, want) || strings.Contains(errOut, "did not answer") {
		t.Errorf("stderr = %q; want only %q", errOut, want)
	}
}

// TestServeSaysWhenItHasNoNVML: a binary built without NVML (cgo off, as
// on a machine without a C compiler) says so, and why, in one line at
// start-up; one with NVML says nothing of it (issue 20, item 11). Run it
// in both builds: go test and CGO_ENABLED=0 go test.
func TestServeSaysWhenItHasNoNVML(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sy.yaml")
	os.WriteFile(cfg, []byte("chat:\n  default_model: nobody-home\n  candidates:\n    - {id: nobody-home, provider: ollama, url: \"http://127.0.0.1:1\", model: m}\n"), 0o600)
	cmd := exec.CommandContext(t.Context(), os.Args[0], "serve", "--config", cfg, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "h.db"))
	cmd.Env = append(os.Environ(), "SWITCHYARD_TEST_MAIN=switchyard", "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var before []string // what serve said before it served
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "serving on") {
		before = append(before, sc.Text())
	}
	said := strings.Join(before, "\n")
	switch why := gpu.WhyNoNVML(); {
	case why == "":
		if strings.Contains(said, "no NVML support") { // not "NVML": the temp dir is named after the test
			t.Errorf("a build with NVML said at start-up:\n%s", said)
		}
	case strings.Count(said, "no NVML support") != 1 || !strings.Contains(said, why):
		t.Errorf("start-up said:\n%s\nwant one line: no NVML support ... %s", said, why)
	}
}
