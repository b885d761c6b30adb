package system

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/config"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/gpu"
	"github.com/switchyard/switchyard/backend/team"
	"github.com/switchyard/switchyard/backend/upstream"
	"github.com/switchyard/switchyard/backend/upstream/ollama"
	"github.com/switchyard/switchyard/backend/upstream/openai"
)

// CheckResult is one candidate's reachability.
type CheckResult struct {
	Candidate fleet.Candidate
	// Disabled: enabled is false; the server was not asked.
	Disabled bool
	// Answered: the server answered; OK: and it serves the model.
	// Refused: it answered with an HTTP error (a 401, a 404 where the
	// API should be, a proxy's page): not a server of this provider, or
	// not with this key.
	Answered, OK, Refused bool
	Detail                string // what answered, or why not
	Err                   error  // why it did not answer; nil when it did
	Took                  time.Duration
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
	// Team is what the team database said, nil without a team.
	Team *TeamCheck
}

// ErrTeamUnset: team.database_env names a variable that holds nothing.
var ErrTeamUnset = errors.New("no team database")

// TeamCheck is what check found of the team database.
type TeamCheck struct {
	Node  string     // this node's name in the team
	Env   string     // team.database_env
	Found team.Found // the server, the schema and the nodes
	Err   error      // why it could not be read; nil when it was
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
	for i, c := range cfg.Candidates(o.Getenv) {
		if !c.Enabled {
			rep.Results = append(rep.Results, CheckResult{Candidate: c, Disabled: true, Detail: "enabled: false: not asked, never routed to"})
			continue
		}
		r := checkCandidate(ctx, ol, oa, c)
		if env := cfg.Chat.Candidates[i].APIKeyEnv; env != "" && c.APIKey == "" {
			r.Detail = fmt.Sprintf("api_key_env: $%s is empty or unset, so no key was sent; %s", env, r.Detail)
		}
		rep.Results = append(rep.Results, r)
	}
	rep.Team = checkTeam(ctx, cfg, o.Getenv)
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
	if se, ok := errors.AsType[*fleet.StatusError](err); ok {
		r.Refused = true
		if se.StatusCode == http.StatusNotFound && c.Provider == fleet.ProviderOllama {
			err = fmt.Errorf("%w: not Ollama's API at this url (is it an OpenAI-compatible server? then provider: openai)", err)
		}
	}
	switch {
	case err != nil:
		r.Detail = err.Error()
	case !slices.ContainsFunc(models, func(m string) bool { return fleet.SameModel(m, c.Model) }):
		r.Detail = fmt.Sprintf("the server answers but does not serve model %q (%s)", c.Model, listsModels(models))
	default:
		r.OK = true
		r.Detail = fmt.Sprintf("serves %s", c.Model)
	}
	return r
}

// checkTeam connects to the team database, when cfg names one.
func checkTeam(ctx context.Context, cfg config.Config, getenv func(string) string) *TeamCheck {
	env := cfg.Team.DatabaseEnv
	if env == "" {
		return nil
	}
	tc := &TeamCheck{Env: env}
	tc.Node, tc.Err = nodeName(cfg)
	if tc.Err != nil {
		return tc
	}
	url := getenv(env)
	if url == "" {
		tc.Err = fmt.Errorf("%w: $%s is empty or unset", ErrTeamUnset, env)
		return tc
	}
	tc.Found, tc.Err = team.Probe(ctx, url, 5*time.Second)
	return tc
}

// listsModels names the first models a server lists, for a reader looking
// for the name they meant: "it lists llama3.2:1b, qwen3:8b and 4 more".
func listsModels(models []string) string {
	const shown = 3
	switch n := len(models); {
	case n == 0:
		return "it lists none"
	case n <= shown:
		return "it lists " + strings.Join(models, ", ")
	default:
		return fmt.Sprintf("it lists %s and %d more", strings.Join(models[:shown], ", "), n-shown)
	}
}
