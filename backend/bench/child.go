package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/simfleet"
	"github.com/switchyard/switchyard/backend/system"
)

// The processes section runs the upstream, the bare proxy and Switchyard
// each in a process of its own, as a user runs them: a model server, a
// router and an app are three programs, and every hop between them wakes
// a thread of another process. It starts them from its own executable
// (Options.Executable) with ChildEnv set to the role, JSON-encoded;
// RunChild, called first thing by the switchyard command and by this
// package's tests, plays it.

// ChildEnv names the environment variable that makes a process a bench
// child (RunChild).
const ChildEnv = "SWITCHYARD_BENCH_CHILD"

// childSpec is a child's role, as ChildEnv carries it.
type childSpec struct {
	// Role is "upstream" (the fast simulated OpenAI server), "proxy"
	// (the bare proxy) or "switchyard" (system.New, as serve runs it).
	Role string `json:"role"`
	// HeadWithFirstToken: the upstream sends its headers with its first
	// token, as Ollama does (simfleet.Config).
	HeadWithFirstToken bool `json:"head_with_first_token,omitempty"`
	// Target is the proxy's upstream, a base URL.
	Target string `json:"target,omitempty"`
	// Config and DB are Switchyard's config file and history.
	Config string `json:"config,omitempty"`
	DB     string `json:"db,omitempty"`
}

// childAddrPrefix starts the first line a child writes: its address.
const childAddrPrefix = "addr "

// RunChild plays the role that ChildEnv names and reports true, or reports
// false at once when it names none. A child writes "addr HOST:PORT" as its
// first line of standard output, serves until its standard input closes,
// then stops (Switchyard writes its history first).
func RunChild() (bool, error) {
	v := os.Getenv(ChildEnv)
	if v == "" {
		return false, nil
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		return true, fmt.Errorf("%s: %w", ChildEnv, err)
	}
	return true, playChild(spec, os.Stdin, os.Stdout)
}

func playChild(spec childSpec, in io.Reader, out io.Writer) error {
	var addr string
	var stop func() error
	switch spec.Role {
	case "upstream":
		s, err := simfleet.Start(simfleet.Config{
			Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: upID}},
			TTFT: simfleet.FastTTFT, Tokens: upTokens, HeadWithFirstToken: spec.HeadWithFirstToken,
		})
		if err != nil {
			return err
		}
		addr, stop = s.Addr(), func() error { s.Close(); return nil }
	case "proxy":
		p, err := startProxy(spec.Target)
		if err != nil {
			return err
		}
		addr, stop = p.ln.Addr().String(), func() error { p.close(); return nil }
	case "switchyard":
		ctx, cancel := context.WithCancel(context.Background())
		sys, err := system.New(ctx, system.Options{ConfigPath: spec.Config, Addr: "127.0.0.1:0", DBPath: spec.DB, ShutdownGrace: time.Second})
		if err != nil {
			cancel()
			return err
		}
		ran := make(chan error, 1)
		go func() { ran <- sys.Run(ctx) }()
		addr, stop = sys.Addr(), func() error { cancel(); return <-ran }
	default:
		return fmt.Errorf("no bench child role %q", spec.Role)
	}
	if _, err := fmt.Fprintln(out, childAddrPrefix+addr); err != nil {
		stop()
		return err
	}
	io.Copy(io.Discard, in)
	return stop()
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	errs  strings.Builder // its standard error, for the report of a failure
}

// childStartTimeout bounds a child's start, Switchyard's included.
const childStartTimeout = 30 * time.Second

// startChild starts exe as the child spec describes and returns once it
// has said its address.
func startChild(ctx context.Context, exe string, spec childSpec) (*child, error) {
	env, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	c := &child{cmd: exec.CommandContext(ctx, exe)}
	c.cmd.Env = append(os.Environ(), ChildEnv+"="+string(env))
	c.cmd.Stderr = &c.errs
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the %s child: %w", spec.Role, err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Scan()
		line <- sc.Text()
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		if a, ok := strings.CutPrefix(l, childAddrPrefix); ok {
			c.addr = a
			return c, nil
		}
		c.stop()
		return nil, fmt.Errorf("the %s child said %q, not its address: %s", spec.Role, l, strings.TrimSpace(c.errs.String()))
	case <-time.After(childStartTimeout):
		c.stop()
		return nil, fmt.Errorf("the %s child said no address within %v", spec.Role, childStartTimeout)
	}
}

// url is the child's base URL.
func (c *child) url() string { return "http://" + c.addr }

// stop closes the child's standard input, which ends it, and waits for it;
// a child still running after childStartTimeout is killed.
func (c *child) stop() error {
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(c.errs.String()))
		}
		return nil
	case <-time.After(childStartTimeout):
		c.cmd.Process.Kill()
		return errors.Join(errors.New("a bench child did not stop; killed"), <-done)
	}
}
