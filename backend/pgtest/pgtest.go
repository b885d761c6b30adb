// Package pgtest starts a private PostgreSQL cluster for Go tests, the way
// backend/realserver starts real model servers: Debian's PostgreSQL 15
// binaries (initdb, pg_ctl, postgres) run a cluster in a temporary
// directory on a free port of 127.0.0.1, trusted and unlogged (no fsync),
// and the test's Cleanup stops it and removes the directory.
//
// initdb refuses to run as root, so a root test runs the binaries as the
// postgres user (runuser -u postgres --) in a directory it owns. Start
// skips the test with one line when the binaries are absent (install
// Debian's postgresql package). Server.Stop, Server.Start, Server.Freeze
// and Server.Thaw are for fault tests: a crashed, restarted or frozen
// database.
//
// The package holds no state; each Start is its own cluster.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinDir is where Debian's postgresql-15 package puts its binaries;
// $SWITCHYARD_PGBIN replaces it.
const BinDir = "/usr/lib/postgresql/15/bin"

// EnvBin names a directory holding initdb and pg_ctl, for other installs.
const EnvBin = "SWITCHYARD_PGBIN"

// Server is one private cluster. Its methods are for the test goroutine.
type Server struct {
	t    testing.TB
	bin  string
	dir  string // owns data/, the socket and the log
	port int
	user *user.User // the postgres user when the test runs as root; nil otherwise
	dbs  atomic.Int64
}

// Start initialises and starts a cluster, and registers its removal with
// t.Cleanup. It skips t when the PostgreSQL binaries are not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv(EnvBin)
	if bin == "" {
		bin = BinDir
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		t.Skipf("pgtest: no PostgreSQL at %s: install Debian's postgresql package (or set %s)", bin, EnvBin)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s := &Server{t: t, bin: bin, dir: dir}
	t.Cleanup(func() {
		s.Thaw()
		s.Stop()
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("pgtest: running as root and no postgres user to run PostgreSQL as: %v", err)
		}
		s.user = u
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	if out, err := s.cmd("initdb", "-D", s.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.port = freePort(t)
	s.Start()
	return s
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// cmd runs one of the cluster's binaries, as the postgres user when the
// test runs as root.
func (s *Server) cmd(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if s.user != nil {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

// Start starts the stopped cluster again on its port and waits until it
// accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200",
		s.port, s.dir)
	out, err := s.cmd("pg_ctl", "start", "-w", "-t", "60", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		s.t.Fatalf("pgtest: pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// Stop stops the cluster at once, as a crash would (pg_ctl -m immediate).
// It is a no-op on a stopped cluster.
func (s *Server) Stop() {
	if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err != nil {
		return
	}
	if out, err := s.cmd("pg_ctl", "stop", "-w", "-m", "immediate", "-D", s.data()).CombinedOutput(); err != nil {
		s.t.Logf("pgtest: pg_ctl stop: %v\n%s", err, out)
	}
}

// Freeze stops every process of the cluster with SIGSTOP, the postmaster
// first: connections stay open and nothing answers, as on a hung host.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw lets a frozen cluster run again.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	pid := s.postmaster()
	if pid == 0 {
		return
	}
	pids := append([]int{pid}, children(pid)...)
	if sig == syscall.SIGCONT {
		pids = append(pids[1:], pid) // children first, then the postmaster
	}
	for _, p := range pids {
		syscall.Kill(p, sig)
	}
}

// postmaster is the pid the cluster's postmaster.pid names, 0 when none.
func (s *Server) postmaster() int {
	b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// children are the processes whose parent is pid, read from /proc.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// Port is the cluster's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// URL is the connection string of database db.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// NewDatabase creates an empty database and returns its connection string.
func (s *Server) NewDatabase() string {
	s.t.Helper()
	name := fmt.Sprintf("t%d", s.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		s.t.Fatalf("pgtest: create database: %v", err)
	}
	return s.URL(name)
}

// freePort is a TCP port of 127.0.0.1 nothing listens on now.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
