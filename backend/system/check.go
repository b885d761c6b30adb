package system

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/upstream"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
	"github.com/switchyard/switchyard/backend/upstream/openai"
)

// CheckResult is one candidate's reachability.
type CheckResult struct {
	Candidate fleet.Candidate
	// Answered: the server answered; OK: and it serves the model.
	Answered, OK bool
	Detail       string // what answered, or why not
	Err          error  // why it did not answer; nil when it did
	Took         time.Duration
}

// CheckReport is what `switchyard check` prints.
type CheckReport struct {
	Path    string
	Missing bool // no config file: the embedded default applies
	// Probes, with no config file: where serve would look for servers,
	// and what answered.
	Probes  []Probe
	Results []CheckResult
	GPU     gpu.Snapshot // this machine's GPUs, or why there are none
}

// Check validates the config file and asks each candidate's server whether
// it serves the candidate's model. A config error is returned as is (it
// names the key); unreachable candidates are reported, not returned.
func Check(ctx context.Context, o Options) (CheckReport, error) {
	path := o.ConfigPath
	if path == "" {
		path = config.DefaultPath(o.ConfigHome)
	}
	rep := CheckReport{Path: path}
	nv := gpu.OpenNVML()
	rep.GPU, _ = nv.Read(ctx)
	nv.Close()
	pool := upstream.NewPool(upstream.Settings{DialTimeout: 3 * time.Second, ResponseHeaderTimeout: 5 * time.Second})
	defer pool.CloseIdle()
	ol, oa := ollama.New(pool), openai.New(pool)
	cfg, err := config.Load(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && o.ConfigPath == "":
		rep.Missing = true
		defaultDiscovery(&o)
		rep.Probes = probe(ctx, o, ol, oa)
		return rep, nil
	case errors.Is(err, fs.ErrNotExist):
		return rep, config.ErrNoFile(path)
	case err != nil:
		return rep, err
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	for _, c := range cfg.Candidates(o.Getenv) {
		rep.Results = append(rep.Results, checkCandidate(ctx, ol, oa, c))
	}
	return rep, nil
}

// checkCandidate asks c's server for its models, within 5 seconds.
func checkCandidate(ctx context.Context, ol *ollama.Backend, oa *openai.Backend, c fleet.Candidate) CheckResult {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	r := CheckResult{Candidate: c}
	var models []string
	var err error
	if c.Provider == fleet.ProviderOllama {
		var ms []ollama.Model
		ms, err = ol.Models(ctx, c.URL)
		for _, m := range ms {
			models = append(models, m.Name)
		}
	} else {
		models, err = oa.Models(ctx, c.URL, c.APIKey)
	}
	r.Took = time.Since(start)
	r.Answered, r.Err = err == nil, err
	switch {
	case err != nil:
		r.Detail = err.Error()
	case !slices.ContainsFunc(models, func(m string) bool { return fleet.SameModel(m, c.Model) }):
		r.Detail = fmt.Sprintf("the server answers but does not serve model %q (it lists %d others)", c.Model, len(models))
	default:
		r.OK = true
		r.Detail = fmt.Sprintf("serves %s", c.Model)
	}
	return r
}
