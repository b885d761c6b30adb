package simfleet

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/switchyard/switchyard/backend/fleet"
)

// VRAMPressure is the demo's fault that is not a server's: a simulated GPU
// near out of memory under a candidate, which demotes it rather than breaks
// it. Demo reports it through its onPressure callback.
const VRAMPressure = "vram_pressure"

// vramPressure describes VRAMPressure among the faults of Demo.Faults.
var vramPressure = FaultInfo{
	Name:        VRAMPressure,
	Label:       "GPU memory pressure",
	Description: "Answers normally, but its GPU reads as nearly out of memory, so the router demotes it.",
}

// DemoServer is one server of a demo fleet as a UI shows it.
type DemoServer struct {
	Candidate string
	Provider  string
	URL       string
	// Fault is the name of the server's fault (Fault.String), or
	// VRAMPressure.
	Fault string
}

// Demo is the fault control of a fleet in demo mode: the faults a UI
// offers, and the server faults plus the simulated GPU pressure it sets.
// Its methods are safe for concurrent use.
type Demo struct {
	f          *Fleet
	onPressure func(candidate string, on bool)

	mu        sync.Mutex
	pressured map[string]bool // candidates under VRAMPressure
}

// NewDemo returns the fault control of f. After every fault Demo.SetFault
// sets, it calls onPressure (unless nil) with on true when the fault is
// VRAMPressure, false otherwise; the caller makes the candidate's GPU read
// accordingly.
func NewDemo(f *Fleet, onPressure func(candidate string, on bool)) *Demo {
	return &Demo{f: f, onPressure: onPressure, pressured: make(map[string]bool)}
}

// Servers returns the fleet's servers in priority order.
func (d *Demo) Servers() []DemoServer {
	cands := d.f.Candidates()
	out := make([]DemoServer, 0, len(cands))
	for _, c := range cands {
		out = append(out, d.server(c.ID))
	}
	return out
}

// server returns the server of candidate id, which is in the fleet.
func (d *Demo) server(id string) DemoServer {
	srv := d.f.Server(id)
	c := srv.Candidate(id, 0)
	fault := srv.Fault().String()
	d.mu.Lock()
	if d.pressured[id] {
		fault = VRAMPressure
	}
	d.mu.Unlock()
	return DemoServer{Candidate: id, Provider: string(c.Provider), URL: c.URL, Fault: fault}
}

// Faults returns the faults SetFault takes: every fault kind in the order
// of FaultKinds, then VRAMPressure.
func (d *Demo) Faults() []FaultInfo { return append(faultInfos(), vramPressure) }

// SetFault sets the fault of candidate's server, named as ParseFault reads
// it, or VRAMPressure, which makes the server healthy and reports the
// pressure through onPressure. It returns the server as Servers shows it.
func (d *Demo) SetFault(candidate, fault string) (DemoServer, error) {
	if d.f.Server(candidate) == nil {
		var ids []string
		for _, c := range d.f.Candidates() {
			ids = append(ids, c.ID)
		}
		return DemoServer{}, fmt.Errorf("no demo server %q: one of %s", fleet.ClipTo(candidate, 100), strings.Join(ids, ", "))
	}
	pressure := fault == VRAMPressure
	if pressure {
		fault = string(FaultHealthy)
	}
	f, err := ParseFault(fault)
	if errors.Is(err, ErrUnknownFault) {
		return DemoServer{}, fmt.Errorf("%w, or %s (GPU memory pressure)", err, VRAMPressure)
	}
	if err != nil {
		return DemoServer{}, err
	}
	if err := d.f.SetFault(candidate, f); err != nil {
		return DemoServer{}, err
	}
	if d.onPressure != nil {
		d.onPressure(candidate, pressure)
	}
	d.mu.Lock()
	d.pressured[candidate] = pressure
	d.mu.Unlock()
	return d.server(candidate), nil
}
