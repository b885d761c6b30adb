package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/backend/pressure"
	"github.com/switchyard/switchyard/backend/schema"
)

const gib = 1 << 30

// h200 is GPU 0 of a machine with one H200, as status shows it.
func h200() schema.GPU {
	return schema.GPU{Available: true, Devices: []schema.Device{{
		Index: 0, Name: "NVIDIA H200", UUID: "GPU-1234", MemoryTotal: 143 * gib, MemoryUsed: 1 * gib, MemoryFree: 141 * gib,
		Processes: []schema.Process{{PID: 7, Name: "python", UsedBytes: gib}},
	}}}
}

const h200Metrics = "# TYPE switchyard_gpu_memory_total_bytes gauge\n" +
	"switchyard_gpu_memory_total_bytes{gpu=\"0\"} 1.53545080832e+11\n" +
	"switchyard_gpu_memory_used_bytes{gpu=\"0\"} 1.073741824e+09\n"

func TestCheckGPUs(t *testing.T) {
	tests := []struct {
		name    string
		gpu     func(*schema.GPU)
		metrics string
		want    string // in the error; "" for none
	}{
		{"a GPU read and reported alike", func(*schema.GPU) {}, h200Metrics, ""},
		{"no GPU", func(g *schema.GPU) {
			*g = schema.GPU{Message: "no NVIDIA GPU found (NVML: ERROR_LIBRARY_NOT_FOUND)", Devices: []schema.Device{}}
		},
			h200Metrics, "NVML read no GPU"},
		{"the demo's GPUs", func(g *schema.GPU) { g.Simulated = true }, h200Metrics, "simulated"},
		{"no name", func(g *schema.GPU) { g.Devices[0].Name = "" }, h200Metrics, "no name"},
		{"memory that does not add up", func(g *schema.GPU) { g.Devices[0].MemoryUsed = 10 * gib }, h200Metrics, "does not add up"},
		{"no process list", func(g *schema.GPU) { g.Devices[0].Processes = nil }, h200Metrics, "no process list"},
		{"/metrics without the GPU", func(*schema.GPU) {}, "", "switchyard_gpu_memory_total_bytes"},
		{"/metrics with another total", func(*schema.GPU) {}, strings.Replace(h200Metrics, "1.53545080832e+11", "8e+10", 1), "want status's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := h200()
			tt.gpu(&g)
			err := checkGPUs(g, tt.metrics)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("checkGPUs() = %v; want %q", err, tt.want)
			}
		})
	}
}

func TestCheckDemotion(t *testing.T) {
	nvml := &schema.Reading{GPU: 0, Source: pressure.SourceNVML, Reason: "GPU 0 has 141.0 GiB free, below 143 GiB"}
	status := func(gpu0, cpu *schema.Reading) schema.Status {
		return schema.Status{Candidates: []schema.Candidate{
			{ID: "gpu0", Demoted: gpu0 != nil, Pressure: gpu0}, {ID: "cpu", Demoted: cpu != nil, Pressure: cpu}}}
	}
	tests := []struct {
		name string
		st   schema.Status
		want bool
		ok   bool
	}{
		{"demoted by GPU 0, as wanted", status(nvml, nil), true, true},
		{"not demoted, as wanted", status(nil, nil), false, true},
		{"not demoted under a threshold above the free memory", status(nil, nil), true, false},
		{"demoted under a threshold below it", status(nvml, nil), false, false},
		{"demoted by a server's report, not NVML", status(&schema.Reading{GPU: -1, Source: pressure.SourceOllamaPS}, nil), true, false},
		{"the candidate on no GPU demoted", status(nvml, nvml), true, false},
		{"no such candidates", schema.Status{}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkDemotion(tt.st, tt.want); (err == nil) != tt.ok {
				t.Errorf("checkDemotion(want %v) = %v; want ok %v", tt.want, err, tt.ok)
			}
		})
	}
}

// hasDriver reports whether this machine has NVML's library, as the
// script looks for it.
func hasDriver() bool {
	out, _ := exec.Command("ldconfig", "-p").Output()
	return bytes.Contains(out, []byte("libnvidia-ml.so.1"))
}

// Without the NVIDIA driver the script stops at once, saying so.
func TestScriptWithoutADriver(t *testing.T) {
	if hasDriver() {
		t.Skip("this machine has the NVIDIA driver")
	}
	cmd := exec.Command("bash", "../gpu-check.sh")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "gpu-check: FAIL: no NVIDIA driver here") {
		t.Errorf("gpu-check.sh = %v:\n%s\nwant exit 1 saying there is no driver", err, out)
	}
}

// The whole check against the real binary: on a machine without a GPU it
// fails, saying NVML read none, after the demo fleet and serve ran; on
// one with a GPU it passes.
func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds switchyard")
	}
	bin := filepath.Join(t.TempDir(), "switchyard")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var out strings.Builder
	err := check(t.Context(), &out, bin, t.TempDir())
	if hasDriver() {
		if err != nil {
			t.Errorf("check() = %v\n%s", err, out.String())
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "NVML read no GPU") || !strings.Contains(out.String(), "its llama.cpp server") {
		t.Errorf("check() without a GPU = %v\n%s\nwant it to fail, saying NVML read no GPU", err, out.String())
	}
}
