package system

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// A server that was down when Switchyard started is asked again what its
// model can do once it answers: a thinking model is routed thinking
// requests without a restart.
func TestServerDownAtStartIsLearnedLater(t *testing.T) {
	f, err := simfleet.StartFleet([]simfleet.Member{
		{ID: "ol", Priority: 1, Config: simfleet.Config{Provider: fleet.ProviderOllama, Models: []simfleet.Model{{Name: "qwen3:8b", Thinking: true}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	if err := f.SetFault("ol", simfleet.Fault{Kind: simfleet.FaultRefuse}); err != nil {
		t.Fatal(err)
	}
	sys, err := New(t.Context(), Options{ConfigPath: fleetConfig(t, f, "", "ol", ""), Addr: "127.0.0.1:0", DBPath: t.TempDir() + "/h.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	thinking := func() bool { return sys.router.Fleet().Targets[0].Candidate.SupportsThinking }
	// What Run does, alone (no config watcher to ask for a relearn): a
	// first round while the server refuses, then the rounds after.
	sys.learnModels(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); sys.relearnModels(ctx, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	if thinking() {
		t.Fatal("thinking learned from a server that refused")
	}
	if err := f.SetFault("ol", simfleet.Fault{Kind: simfleet.FaultHealthy}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "ol's thinking learned once its server answers", thinking)
}

// An edit made between the start's read of the config and its watch, that
// can't be applied (a new listen address), is shown as rejected, as any
// later one is, not dropped.
func TestEditBeforeTheWatchIsJudged(t *testing.T) {
	f, err := simfleet.StartFleet([]simfleet.Member{{ID: "a", Priority: 1, Config: simfleet.Config{Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "m"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port for the config's listen
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := fleetConfig(t, f, "listen: "+addr+"\n", "a", "")
	sys, err := New(t.Context(), Options{ConfigPath: path, DBPath: t.TempDir() + "/h.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), addr, "127.0.0.1:1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	sys.watching()
	if doc := sys.Config(); !strings.Contains(doc.Error, "needs a restart") {
		t.Errorf("config error = %q; want the edit rejected, saying it needs a restart", doc.Error)
	}
}

// An OpenAI-compatible candidate whose server once said it has no such
// model is put back when the server lists the model again, as an Ollama
// candidate is (u3 review, item 2); while its server lists nothing, it
// stays out.
func TestOpenAIModelFoundAgain(t *testing.T) {
	f, err := simfleet.StartFleet([]simfleet.Member{{ID: "a", Priority: 1, Config: simfleet.Config{Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: "m"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	sys, err := New(t.Context(), Options{ConfigPath: fleetConfig(t, f, "", "a", ""), Addr: "127.0.0.1:0", DBPath: t.TempDir() + "/h.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	missing := func() string { return sys.router.States()[0].Missing }
	sys.router.Missing("a", "the model `m` does not exist")
	if err := f.SetFault("a", simfleet.Fault{Kind: simfleet.FaultRefuse}); err != nil {
		t.Fatal(err)
	}
	sys.learnModels(t.Context())
	if missing() == "" {
		t.Fatal("put back while its server answered nothing")
	}
	if err := f.SetFault("a", simfleet.Fault{Kind: simfleet.FaultHealthy}); err != nil {
		t.Fatal(err)
	}
	sys.learnModels(t.Context())
	if m := missing(); m != "" {
		t.Errorf("still missing (%q) once its server lists the model", m)
	}
}
