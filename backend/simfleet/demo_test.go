package simfleet

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

// pressureLog records the calls of a Demo's onPressure.
type pressureLog struct {
	mu    sync.Mutex
	calls []string // "candidate on" or "candidate off"
}

func (l *pressureLog) report(candidate string, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, candidate+map[bool]string{true: " on", false: " off"}[on])
}

// take returns the calls since the last take.
func (l *pressureLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	calls := l.calls
	l.calls = nil
	return calls
}

func startDemo(t *testing.T) (*Fleet, *Demo, *pressureLog) {
	t.Helper()
	f, err := StartFast(2, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	log := &pressureLog{}
	return f, NewDemo(f, log.report), log
}

func TestDemoServers(t *testing.T) {
	f, d, _ := startDemo(t)
	got := d.Servers()
	var want []DemoServer
	for _, c := range f.Candidates() {
		want = append(want, DemoServer{Candidate: c.ID, Provider: string(c.Provider), URL: c.URL, Fault: "healthy"})
	}
	if !slices.Equal(got, want) {
		t.Errorf("Servers() = %+v; want %+v", got, want)
	}
}

func TestDemoSetFault(t *testing.T) {
	f, d, log := startDemo(t)
	faultOf := func(id string) string {
		for _, s := range d.Servers() {
			if s.Candidate == id {
				return s.Fault
			}
		}
		t.Fatalf("Servers() has no %s", id)
		return ""
	}
	steps := []struct {
		fault     string
		want      string   // the server's fault as Servers shows it
		serverIs  string   // the simulated server's own fault
		pressure  []string // onPressure calls
		wantError bool
	}{
		{fault: "status:503", want: "status:503", serverIs: "status:503", pressure: []string{"fast-1 off"}},
		{fault: "vram_pressure", want: "vram_pressure", serverIs: "healthy", pressure: []string{"fast-1 on"}},
		// A bad fault changes nothing, pressure included.
		{fault: "nonsense", want: "vram_pressure", serverIs: "healthy", wantError: true},
		{fault: "status:200", want: "vram_pressure", serverIs: "healthy", wantError: true},
		{fault: "die_after:3", want: "die_after:3", serverIs: "die_after:3", pressure: []string{"fast-1 off"}},
		{fault: "slow", want: "slow", serverIs: "slow", pressure: []string{"fast-1 off"}},
		{fault: "healthy", want: "healthy", serverIs: "healthy", pressure: []string{"fast-1 off"}},
	}
	for _, st := range steps {
		got, err := d.SetFault("fast-1", st.fault)
		if (err != nil) != st.wantError {
			t.Fatalf("SetFault(fast-1, %s) = %+v, %v; want error %v", st.fault, got, err, st.wantError)
		}
		if !st.wantError && (got.Candidate != "fast-1" || got.Fault != st.want || got.URL != f.Server("fast-1").URL()) {
			t.Errorf("SetFault(fast-1, %s) = %+v; want fast-1 at its URL with fault %s", st.fault, got, st.want)
		}
		if shown := faultOf("fast-1"); shown != st.want {
			t.Errorf("after %s: Servers() shows %s; want %s", st.fault, shown, st.want)
		}
		if own := f.Server("fast-1").Fault().String(); own != st.serverIs {
			t.Errorf("after %s: the server's fault is %s; want %s", st.fault, own, st.serverIs)
		}
		if calls := log.take(); !slices.Equal(calls, st.pressure) {
			t.Errorf("after %s: onPressure calls %q; want %q", st.fault, calls, st.pressure)
		}
		if other := faultOf("fast-2"); other != "healthy" {
			t.Errorf("after %s on fast-1: fast-2 shows %s", st.fault, other)
		}
	}
	if got, err := d.SetFault("nope", "healthy"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("SetFault(nope) = %+v, %v; want an error naming the candidate", got, err)
	}
	if calls := log.take(); len(calls) != 0 {
		t.Errorf("SetFault(nope) called onPressure: %q", calls)
	}
	// onPressure may be nil.
	if _, err := NewDemo(f, nil).SetFault("fast-2", VRAMPressure); err != nil {
		t.Errorf("SetFault without onPressure = %v", err)
	}
}

// Faults lists every fault kind, each with the words a UI needs and a name
// SetFault takes, then the demo's GPU pressure.
func TestDemoFaults(t *testing.T) {
	_, d, _ := startDemo(t)
	infos := d.Faults()
	var names []string
	for _, info := range infos {
		names = append(names, info.Name)
	}
	var want []string
	for _, k := range FaultKinds() {
		want = append(want, string(k))
	}
	want = append(want, VRAMPressure)
	if !slices.Equal(names, want) {
		t.Fatalf("Faults() names = %q; want %q", names, want)
	}
	labels := map[string]bool{}
	for _, info := range infos {
		if info.Label == "" || info.Description == "" || labels[info.Label] {
			t.Errorf("Faults() has %+v; want a label of its own and a description", info)
		}
		labels[info.Label] = true
		if _, err := d.SetFault("fast-2", info.Name); err != nil {
			t.Errorf("SetFault(fast-2, %s) = %v; want it set", info.Name, err)
		}
	}
	// The faults that take a parameter say so, with their placeholder.
	args := map[string]string{}
	for _, info := range infos {
		if info.Arg != "" {
			args[info.Name] = info.Arg
		}
	}
	for name, placeholder := range map[string]string{"status": "N", "die_after": "N", "busy": "DUR", "slow": "DUR"} {
		if !slices.Contains(strings.Fields(args[name]), placeholder) {
			t.Errorf("Arg of %s = %q; want a description with %s", name, args[name], placeholder)
		}
		delete(args, name)
	}
	if len(args) != 0 {
		t.Errorf("faults without a parameter have an Arg: %v", args)
	}
}
