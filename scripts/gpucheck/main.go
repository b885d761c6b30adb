// Command gpucheck is the second half of scripts/gpu-check.sh, the check
// of NVML on a machine with an NVIDIA GPU (docs/DESIGN.md, "GPU
// awareness"). Given a switchyard binary built with NVML, it starts the
// demo fleet's simulated servers (switchyard demo), then `switchyard
// serve` in front of them with two candidates of one server: "gpu0"
// mapped to GPU 0 and "cpu" on no GPU. It prints what status and /metrics
// say of each GPU (name, memory, processes) and checks that they agree,
// that with a demotion threshold below GPU 0's free memory nothing is
// demoted, and that with one above it gpu0 is demoted (and tried last by
// a request) while cpu is not. It exits 0 when all of it holds, 1 when
// any of it is wrong, saying what.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard/switchyard/backend/pressure"
	"github.com/switchyard/switchyard/backend/schema"
)

func main() {
	bin := flag.String("bin", "", "the switchyard `binary` to check (built with cgo, so with NVML)")
	dir := flag.String("dir", "", "a scratch `folder` (default: a new temporary one)")
	timeout := flag.Duration("timeout", 3*time.Minute, "the most the whole check may take")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "gpucheck: -bin is required")
		os.Exit(2)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "gpucheck")
		if err != nil {
			fmt.Fprintln(os.Stderr, "gpucheck:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := check(ctx, os.Stdout, *bin, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck: FAIL:", err)
		cancel()
		os.Exit(1)
	}
}

// check runs the whole check, printing what it sees to out.
func check(ctx context.Context, out io.Writer, bin, dir string) error {
	demo, err := start(ctx, bin, filepath.Join(dir, "demo"), "demo")
	if err != nil {
		return fmt.Errorf("the demo fleet: %w", err)
	}
	defer demo.stop()
	st, err := demo.status(ctx)
	if err != nil {
		return fmt.Errorf("the demo fleet: %w", err)
	}
	server, err := llamaServer(st)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo fleet at %s; its llama.cpp server %s serves %s\n", demo.base, server.URL, server.Model)

	// Round one: a threshold below any free memory demotes nothing, and
	// the readings are shown and checked.
	sy, st, err := serveWith(ctx, bin, filepath.Join(dir, "low"), server, "1MiB")
	if err != nil {
		return err
	}
	metrics, err := sy.get(ctx, "/metrics")
	sy.stop()
	if err != nil {
		return err
	}
	printGPUs(out, st.GPU, metrics)
	if err := checkGPUs(st.GPU, metrics); err != nil {
		return err
	}
	free := st.GPU.Devices[0].MemoryFree
	if err := checkDemotion(st, false); err != nil && free > 1<<20 {
		return fmt.Errorf("gpu.demote_free_below 1MiB, GPU 0 with %s free: %w", gibs(free), err)
	}
	fmt.Fprintf(out, "gpu.demote_free_below 1MiB: gpu0 not demoted (GPU 0 has %s free)\n", gibs(free))

	// Round two: a threshold above GPU 0's free memory demotes gpu0, and
	// a request goes to cpu first.
	above := free/(1<<30) + 2
	sy, st, err = serveWith(ctx, bin, filepath.Join(dir, "high"), server, fmt.Sprintf("%dGiB", above))
	if err != nil {
		return err
	}
	defer sy.stop()
	if err := checkDemotion(st, true); err != nil {
		return fmt.Errorf("gpu.demote_free_below %dGiB, GPU 0 with %s free: %w", above, gibs(st.GPU.Devices[0].MemoryFree), err)
	}
	c := candidate(st, "gpu0")
	fmt.Fprintf(out, "gpu.demote_free_below %dGiB: gpu0 demoted: %s\n", above, c.Pressure.Reason)
	served, err := sy.chat(ctx)
	if err != nil {
		return err
	}
	if served != "cpu" {
		return fmt.Errorf("a request for gpu0 was served by %q; want cpu first, gpu0 demoted to the end", served)
	}
	fmt.Fprintln(out, "a request for gpu0 was served by cpu: the demoted candidate went last")
	return nil
}

// llamaServer is the demo fleet's llama.cpp server: an OpenAI-compatible
// server whose own reports demote nothing, so any demotion seen is
// NVML's.
func llamaServer(st schema.Status) (schema.Candidate, error) {
	for _, c := range st.Candidates {
		if c.Provider == "openai" && strings.Contains(c.ID, "llamacpp") {
			return c, nil
		}
	}
	return schema.Candidate{}, errors.New("the demo fleet has no llama.cpp server")
}

// serveWith writes a config of two candidates of server, gpu0 on GPU 0 and
// cpu on none, with gpu.demote_free_below at freeBelow, and starts
// switchyard serve with it; it returns the status once a GPU reading is in.
func serveWith(ctx context.Context, bin, dir string, server schema.Candidate, freeBelow string) (*process, schema.Status, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, schema.Status{}, err
	}
	cfg := fmt.Sprintf(`gpu:
  demote_free_below: %s
  demote_used_ratio: 1
chat:
  default_model: gpu0
  candidates:
    - {id: gpu0, provider: openai, url: %q, model: %q, priority: 1, gpus: [0]}
    - {id: cpu, provider: openai, url: %q, model: %q, priority: 2, gpus: []}
`, freeBelow, server.URL, server.Model, server.URL, server.Model)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, schema.Status{}, err
	}
	sy, err := start(ctx, bin, dir, "serve", "--config", path)
	if err != nil {
		return nil, schema.Status{}, fmt.Errorf("switchyard serve: %w", err)
	}
	st, err := sy.status(ctx)
	if err != nil {
		sy.stop()
		return nil, schema.Status{}, fmt.Errorf("switchyard serve: %w", err)
	}
	return sy, st, nil
}

// checkGPUs checks what status and /metrics say of the GPUs: NVML found
// at least one, with a name and memory that adds up, and /metrics says
// the same of each.
func checkGPUs(g schema.GPU, metrics string) error {
	switch {
	case g.Simulated:
		return errors.New("status shows the demo fleet's simulated GPUs, not NVML's")
	case !g.Available || len(g.Devices) == 0:
		return fmt.Errorf("status says %q: NVML read no GPU", g.Message)
	}
	for _, d := range g.Devices {
		switch {
		case d.Name == "" || d.UUID == "":
			return fmt.Errorf("GPU %d has no name or UUID: %+v", d.Index, d)
		case d.MemoryTotal == 0 || d.MemoryUsed+d.MemoryFree > d.MemoryTotal:
			return fmt.Errorf("GPU %d: used %d + free %d bytes of %d: memory that does not add up", d.Index, d.MemoryUsed, d.MemoryFree, d.MemoryTotal)
		case d.Processes == nil:
			return fmt.Errorf("GPU %d has no process list", d.Index)
		}
		total, ok := metric(metrics, "switchyard_gpu_memory_total_bytes", d.Index)
		if !ok || uint64(total) != d.MemoryTotal {
			return fmt.Errorf("/metrics switchyard_gpu_memory_total_bytes{gpu=\"%d\"} = %v (found %v); want status's %d", d.Index, total, ok, d.MemoryTotal)
		}
		if used, ok := metric(metrics, "switchyard_gpu_memory_used_bytes", d.Index); !ok || uint64(used) > d.MemoryTotal {
			return fmt.Errorf("/metrics switchyard_gpu_memory_used_bytes{gpu=\"%d\"} = %v (found %v); want at most %d", d.Index, used, ok, d.MemoryTotal)
		}
	}
	return nil
}

// checkDemotion checks that gpu0 is demoted, by GPU 0's reading, or not,
// as want says, and that cpu never is.
func checkDemotion(st schema.Status, want bool) error {
	g, c := candidate(st, "gpu0"), candidate(st, "cpu")
	switch {
	case g == nil || c == nil:
		return errors.New("status lacks the candidates gpu0 and cpu")
	case c.Demoted:
		return fmt.Errorf("cpu, on no GPU, is demoted: %+v", c.Pressure)
	case g.Demoted != want:
		return fmt.Errorf("gpu0 demoted = %v (%+v); want %v", g.Demoted, g.Pressure, want)
	case want && (g.Pressure == nil || g.Pressure.GPU != 0 || g.Pressure.Source != pressure.SourceNVML):
		return fmt.Errorf("gpu0 is demoted by %+v; want GPU 0's NVML reading", g.Pressure)
	}
	return nil
}

func candidate(st schema.Status, id string) *schema.Candidate {
	for i := range st.Candidates {
		if st.Candidates[i].ID == id {
			return &st.Candidates[i]
		}
	}
	return nil
}

// printGPUs prints each GPU as status shows it, and /metrics' GPU series.
func printGPUs(out io.Writer, g schema.GPU, metrics string) {
	fmt.Fprintf(out, "status: %d GPU(s), NVML available %v %s\n", len(g.Devices), g.Available, g.Message)
	for _, d := range g.Devices {
		fmt.Fprintf(out, "  GPU %d %s %s: %s total, %s used, %s free, %.0f%% busy\n",
			d.Index, d.Name, d.UUID, gibs(d.MemoryTotal), gibs(d.MemoryUsed), gibs(d.MemoryFree), d.UtilizationPct)
		if len(d.Processes) == 0 {
			fmt.Fprintln(out, "    no processes")
		}
		for _, p := range d.Processes {
			fmt.Fprintf(out, "    pid %d %s: %s\n", p.PID, p.Name, gibs(p.UsedBytes))
		}
	}
	fmt.Fprintln(out, "/metrics:")
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "switchyard_gpu_") {
			fmt.Fprintln(out, "  "+line)
		}
	}
}

// metric returns the value of a series name{gpu="index"} in Prometheus
// text.
func metric(text, name string, index int) (float64, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{gpu="` + strconv.Itoa(index) + `"\} (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

func gibs(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// process is a running switchyard and its base URL.
type process struct {
	cmd  *exec.Cmd
	base string
	log  *strings.Builder
	done chan struct{}
}

// start runs bin with args on a free loopback port, its own XDG folders
// and history under dir, and waits until it says it serves.
func start(ctx context.Context, bin, dir string, args ...string) (*process, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append(args, "--addr", addr, "--db", filepath.Join(dir, "history.db"))...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "data"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, base: "http://" + addr, log: new(strings.Builder), done: make(chan struct{})}
	serving := make(chan struct{})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			p.log.WriteString(sc.Text() + "\n")
			if !said && strings.Contains(sc.Text(), "serving on") {
				said = true
				close(serving)
			}
		}
		cmd.Wait()
	}()
	select {
	case <-serving:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s %s ended before it served:\n%s", bin, args[0], p.log)
	case <-ctx.Done():
		p.stop()
		return nil, fmt.Errorf("%s %s did not serve in time:\n%s", bin, args[0], p.log)
	}
}

// stop ends the process as a user would (SIGTERM), killing it after 10 s.
func (p *process) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// status returns the status document once it holds a GPU reading.
func (p *process) status(ctx context.Context) (schema.Status, error) {
	for {
		body, err := p.get(ctx, "/switchyard/v1/status")
		if err != nil {
			return schema.Status{}, err
		}
		var st schema.Status
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			return schema.Status{}, fmt.Errorf("status: %w", err)
		}
		if st.GPU.SampledAt != nil {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return schema.Status{}, errors.New("status never showed a GPU reading")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (p *process) get(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b), err
}

// chat sends one chat for gpu0 and returns the candidate that served it.
func (p *process) chat(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body := `{"model":"gpu0","messages":[{"role":"user","content":"hi"}],"max_tokens":8}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("a chat through switchyard: %d %s", resp.StatusCode, b)
	}
	return resp.Header.Get("X-Switchyard-Served-Model"), nil
}
