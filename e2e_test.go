package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests run the real binary: the test binary re-executed as
// switchyard (TestMain), in a private network or mount namespace where the
// test needs an address or a filesystem of its own.

func TestMain(m *testing.M) {
	switch os.Getenv("SWITCHYARD_TEST_MAIN") {
	case "switchyard":
		log.SetFlags(0)
		log.SetPrefix("switchyard: ")
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	case "get":
		// get URL KEY: print the status of a GET with the key (none when
		// KEY is empty).
		os.Exit(get(os.Args[1], os.Args[2]))
	}
	os.Exit(m.Run())
}

func get(url, key string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		fmt.Println("error")
		return 0
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	return 0
}

// canUnshare reports whether this process may make namespaces of its own
// (root, with unshare and ip from util-linux and iproute2).
func canUnshare(kind string) bool {
	return exec.Command("unshare", kind, "true").Run() == nil
}

// testBinary is the path of this test binary, which runs as switchyard
// with SWITCHYARD_TEST_MAIN=switchyard.
func testBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// TestReloadNeverExposesWithoutAKey is issue 12's first item: started on a
// non-loopback address with an api_key, and the key then deleted from the
// file, the reload was applied and every endpoint answered anyone. It runs
// the binary in a private network namespace on 192.0.2.1 (TEST-NET-1,
// never routed), with the address set each way it can be: --addr, and the
// config's listen.
func TestReloadNeverExposesWithoutAKey(t *testing.T) {
	const key = "a-long-enough-key-0123"
	addr := "192.0.2.1:8484"
	wrap := []string{"unshare", "--net"}
	setup := "ip link set lo up && ip addr add 192.0.2.1/32 dev lo"
	if _, err := exec.LookPath("ip"); err != nil || !canUnshare("--net") {
		// Without a namespace of its own, bind every interface of this
		// machine for the few seconds of the test and talk over loopback:
		// the key is what keeps it closed.
		t.Log("no private network namespace here (needs root, unshare and ip from iproute2): binding 0.0.0.0, talking over 127.0.0.1")
		addr, wrap, setup = "0.0.0.0:"+freePort(t), nil, "true"
	}
	base := "http://" + strings.Replace(addr, "0.0.0.0", "127.0.0.1", 1)
	for _, how := range []string{"--addr", "listen"} {
		t.Run("set by "+how, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "config.yaml")
			listen, flag := "", "--addr "+addr
			if how == "listen" {
				listen, flag = "listen: "+addr+"\n", ""
			}
			write := func(name, body string) {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write("config.yaml", listen+"api_key: "+key+"\n")
			write("nokey.yaml", listen)
			write("short.yaml", listen+"api_key: short\n")
			script := fmt.Sprintf(`
set -u
%s || { echo "network setup failed"; exit 1; }
SWITCHYARD_TEST_MAIN=switchyard %q serve --demo --config %q --db %q %s 2>%q &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null' EXIT
get() { SWITCHYARD_TEST_MAIN=get %q "$1" "$2"; }
models=%q/v1/models
for i in $(seq 200); do [ "$(get $models %s)" = 200 ] && break; sleep 0.05; done
rejections() { grep -c rejected %q || true; }
echo "start-key $(get $models %s)"
echo "start-none $(get $models '')"
mv %q %q
for i in $(seq 200); do [ "$(rejections)" -ge 1 ] && break; sleep 0.05; done
echo "removed-none $(get $models '')"
echo "removed-key $(get $models %s)"
mv %q %q
for i in $(seq 200); do [ "$(rejections)" -ge 2 ] && break; sleep 0.05; done
echo "short-short $(get $models short)"
echo "short-key $(get $models %s)"
`, setup, testBinary(t), cfg, filepath.Join(dir, "history.db"), flag, filepath.Join(dir, "log"),
				testBinary(t), base, key, filepath.Join(dir, "log"), key,
				filepath.Join(dir, "nokey.yaml"), cfg, key, filepath.Join(dir, "short.yaml"), cfg, key)
			args := append(append([]string(nil), wrap...), "bash", "-c", script)
			out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
			logText, _ := os.ReadFile(filepath.Join(dir, "log"))
			if err != nil {
				t.Fatalf("script: %v\n%s\nlog:\n%s", err, out, logText)
			}
			got := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if k, v, ok := strings.Cut(line, " "); ok {
					got[k] = v
				}
			}
			want := map[string]string{
				"start-key": "200", "start-none": "401",
				"removed-none": "401", "removed-key": "200", // the key stays in force
				"short-short": "401", "short-key": "200",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: status %s; want %s\noutput:\n%s\nlog:\n%s", k, got[k], v, out, logText)
				}
			}
			if !strings.Contains(string(logText), "rejected") {
				t.Errorf("log does not say the edits were rejected:\n%s", logText)
			}
		})
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestFullDiskLosesNoHistory is issue 12's second item, end to end: the
// history database on a full filesystem (a 1 MiB tmpfs in a private mount
// namespace) used to answer every chat with 200 and record nothing, and
// say nothing. Now the failure shows in the log, the metrics and the
// status, and once there is room every answered request is in history.
func TestFullDiskLosesNoHistory(t *testing.T) {
	if !canUnshare("--mount") {
		t.Skip("needs a private mount namespace for a small tmpfs (root and unshare)")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	if err := os.Mkdir(db, 0o700); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	base := "http://127.0.0.1:" + port
	logPath := filepath.Join(dir, "log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "bash", "-c",
		fmt.Sprintf("mount -t tmpfs -o size=1m tmpfs %q && exec %q serve --demo --addr 127.0.0.1:%s --db %q",
			db, testBinary(t), port, filepath.Join(db, "history.db")))
	cmd.Env = append(os.Environ(), "SWITCHYARD_TEST_MAIN=switchyard")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	inNS := func(script string) {
		t.Helper()
		out, err := exec.Command("nsenter", "--target", fmt.Sprint(cmd.Process.Pid), "--mount", "bash", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("in the namespace: %s: %v\n%s", script, err, out)
		}
	}
	status := func() map[string]any {
		var doc map[string]any
		resp, err := http.Get(base + "/switchyard/v1/status")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&doc)
		return doc
	}
	waitFor(t, 20*time.Second, "the server answers", func() bool { return status() != nil })

	inNS(fmt.Sprintf("dd if=/dev/zero of=%q bs=4k 2>/dev/null; true", filepath.Join(db, "filler")))
	var ids []string
	for i := range 15 {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"model":"auto","messages":[{"role":"user","content":"question %d"}]}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("chat %d on a full disk: %d; the caller must still be answered", i, resp.StatusCode)
		}
		ids = append(ids, resp.Header.Get("X-Switchyard-Request-Id"))
	}
	hist, _ := status()["history"].(map[string]any)
	if hist["ok"] != false || hist["error"] == "" || hist["pending"].(float64) == 0 {
		t.Errorf("status history on a full disk = %v; want the error and what waits", hist)
	}
	metrics := fetch(t, base+"/metrics")
	for _, want := range []string{"switchyard_history_writable 0", "switchyard_history_write_errors_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	logText, _ := os.ReadFile(logPath)
	if !bytes.Contains(logText, []byte("can't write")) {
		t.Errorf("log does not say history can't be written:\n%s", logText)
	}

	inNS(fmt.Sprintf("rm %q", filepath.Join(db, "filler")))
	waitFor(t, 70*time.Second, "history writes again", func() bool {
		h, _ := status()["history"].(map[string]any)
		return h["ok"] == true
	})
	body := fetch(t, base+"/switchyard/v1/requests?limit=500")
	for _, id := range ids {
		if !strings.Contains(body, id) {
			t.Errorf("request %s, answered while the disk was full, is not in history", id)
		}
	}
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		b.Write(sc.Bytes())
		b.WriteByte('\n')
	}
	return b.String()
}

// waitFor polls cond every 50 ms until it holds, or fails t after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
