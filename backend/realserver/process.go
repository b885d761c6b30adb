package realserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one started server process (with its children). Its Cleanup,
// registered by the Bundle method that started it, kills it; Kill and
// Restart may be called at any time before that, from any goroutine.
type Server struct {
	// Kind is "llama-server" or "ollama".
	Kind string
	// Addr is the listen address, "127.0.0.1:PORT" (what OLLAMA_HOST takes).
	Addr string
	// Root is the server's root URL, "http://127.0.0.1:PORT".
	Root string
	// URL is the base URL OpenAI clients take, Root + "/v1".
	URL string
	// LogPath is the file that collects the server's stdout and stderr, in
	// the test's TempDir. Restarts append to it.
	LogPath string
	// ModelsDir is Ollama's OLLAMA_MODELS ("" for llama-server).
	ModelsDir string

	bundle *Bundle
	spec   procSpec
	home   string // Ollama's HOME

	mu sync.Mutex
	p  *proc // nil once killed
}

// procSpec is what is needed to start, and restart, a server process.
type procSpec struct {
	bin  string
	args func(port int) []string
	env  func(port int) []string
	// healthPath is polled until it answers 200 (or any HTTP status when
	// anyStatus).
	healthPath string
	anyStatus  bool
	timeout    time.Duration
}

// proc is one running process, the leader of its own process group.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait returned
	err  error         // cmd.Wait's result, valid after done
}

// start launches spec on a free port (retrying when another process took
// the port first), registers the Cleanup that kills it and prints its log
// tail when t failed, and waits until it is ready.
func (b *Bundle) start(t testing.TB, kind string, spec procSpec, dir string) *Server {
	t.Helper()
	logPath := filepath.Join(dir, kind+".log")
	s := &Server{Kind: kind, LogPath: logPath, bundle: b, spec: spec}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("realserver: %s %s log %s, tail:\n%s", kind, s.Addr, logPath, s.LogTail(40))
		}
	})
	var err error
	for range 3 {
		var port int
		if port, err = freePort(); err != nil {
			t.Fatalf("realserver: %v", err)
		}
		s.setPort(port)
		var before int64
		if fi, err := os.Stat(logPath); err == nil {
			before = fi.Size()
		}
		if err = s.launch(); err != nil {
			t.Fatalf("realserver: %v", err)
		}
		if err = s.waitReady(s.spec.anyStatus); err == nil {
			return s
		}
		s.Kill()
		if !s.logSince(before, "bind") { // not a lost race for the port
			break
		}
	}
	t.Fatalf("realserver: %v\n%s log tail:\n%s", err, kind, s.LogTail(40))
	return nil
}

func (s *Server) setPort(port int) {
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.Root = "http://" + s.Addr
	s.URL = s.Root + "/v1"
}

func (s *Server) port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

// launch starts the process in its own process group, appending its output
// to the log.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer logf.Close() // the child has its own copy
	args := s.spec.args(s.port())
	fmt.Fprintf(logf, "=== realserver %s: %s %s\n", time.Now().Format(time.RFC3339Nano), s.spec.bin, strings.Join(args, " "))
	cmd := exec.Command(s.spec.bin, args...)
	cmd.Env = s.spec.env(s.port())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.spec.bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return nil
}

// waitReady polls the health path until it answers 200 (any HTTP status
// when anyStatus), the process exits or the start timeout passes.
func (s *Server) waitReady(anyStatus bool) error {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p == nil {
		return errors.New("server was killed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.spec.timeout)
	defer cancel()
	url := s.Root + s.spec.healthPath
	last := "no answer"
	for {
		st, err := getStatus(ctx, url)
		switch {
		case err == nil && (st == http.StatusOK || anyStatus):
			return nil
		case err == nil:
			last = fmt.Sprintf("status %d", st)
		default:
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready: %v", s.Kind, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v (GET %s: %s)", s.Kind, s.spec.timeout, url, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitReady waits until the server is ready (llama-server's /health says
// 200), for a server started with NoWait; it fails t after the start
// timeout.
func (s *Server) WaitReady(t testing.TB) {
	t.Helper()
	if err := s.waitReady(false); err != nil {
		t.Fatalf("realserver: %v\nlog tail:\n%s", err, s.LogTail(40))
	}
}

// getStatus GETs url with a fresh connection (no proxy, at most 2 s) and
// returns the status.
func getStatus(ctx context.Context, url string) (int, error) {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Kill sends SIGKILL to the server's process group and to every descendant
// of the server (wherever its group), and waits until they are gone (at
// most 10 s). It is what a crash looks like to a client.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.p
	s.p = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	pgid := p.cmd.Process.Pid
	// Snapshot the tree before killing: orphans lose their parent link.
	pids := familyOf(pgid)
	syscall.Kill(-pgid, syscall.SIGKILL)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	select {
	case <-p.done:
	case <-time.After(time.Until(deadline)):
	}
	for len(alive(pids)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart kills the server (if still running) and starts it again on the
// same port with the same arguments and environment (for Ollama the same
// OLLAMA_MODELS, so created models survive), then waits as the first start
// did.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	if err := s.launch(); err != nil {
		t.Fatalf("realserver: restart: %v", err)
	}
	if err := s.waitReady(s.spec.anyStatus); err != nil {
		t.Fatalf("realserver: restart: %v\nlog tail:\n%s", err, s.LogTail(40))
	}
}

// Pid returns the server's own process (Ollama's runner is a child of it);
// 0 once the server was killed.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return 0
	}
	return s.p.cmd.Process.Pid
}

// Pids returns the live processes of the server: its process group and its
// descendants (Ollama's runner). It is empty once the server was killed.
func (s *Server) Pids() []int {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return alive(familyOf(p.cmd.Process.Pid))
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	f, err := os.Open(s.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	const max = 64 << 10
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := max64(fi.Size()-max, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logSince reports whether the log, from byte offset off on, contains sub.
func (s *Server) logSince(off int64, sub string) bool {
	b, err := os.ReadFile(s.LogPath)
	return err == nil && off <= int64(len(b)) && bytes.Contains(b[off:], []byte(sub))
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// freePort asks the kernel for a free port on 127.0.0.1. Another process
// may take it before the server binds it; start retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv is the test's environment without the variables that would
// change a server's behaviour behind the test's back, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OLLAMA_") || strings.HasPrefix(kv, "LLAMA_ARG_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// procInfo is what /proc/PID/stat says about a process.
type procInfo struct {
	pid, ppid, pgrp int
	zombie          bool
}

// processes reads /proc/*/stat.
func processes() []procInfo {
	ents, _ := os.ReadDir("/proc")
	var ps []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pi, ok := readStat(pid); ok {
			ps = append(ps, pi)
		}
	}
	return ps
}

func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return procInfo{pid: pid, ppid: ppid, pgrp: pgrp, zombie: f[0] == "Z" || f[0] == "X"}, true
}

// familyOf returns the members of process group pgid and every descendant
// of process pgid, whatever their group.
func familyOf(pgid int) []int {
	ps := processes()
	children := map[int][]int{}
	var out []int
	for _, p := range ps {
		children[p.ppid] = append(children[p.ppid], p.pid)
		if p.pgrp == pgid {
			out = append(out, p.pid)
		}
	}
	queue := []int{pgid}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if !slices.Contains(out, pid) {
			out = append(out, pid)
		}
		queue = append(queue, children[pid]...)
	}
	slices.Sort(out)
	return out
}

// alive returns the pids that still exist and are not zombies.
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if pi, ok := readStat(pid); ok && !pi.zombie {
			out = append(out, pid)
		}
	}
	return out
}
