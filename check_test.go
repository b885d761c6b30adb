package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/backend/system"
	"github.com/switchyard/switchyard/backend/team"
)

// check's summary line says what is wrong with the team database, not
// "did not answer" for a database that answered or a variable unset.
func TestCheckSaysWhatIsWrongWithTheTeam(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: $TEAM_DB is empty or unset", system.ErrTeamUnset), "the team database is not set up: see its FAIL line"},
		{fmt.Errorf("team.database_env: $TEAM_DB: %w: write postgres://…", team.ErrConnString), "the team database is not set up: see its FAIL line"},
		{fmt.Errorf("%w (schema 99, this binary knows 1)", team.ErrSchemaTooNew), "the team database is newer than this binary"},
		{fmt.Errorf("connect: %w", &pgconn.PgError{Code: "28P01", Message: `password authentication failed for user "postgres"`}),
			`the team database refused this node: password authentication failed for user "postgres"`},
		{fmt.Errorf("connect: dial tcp 127.0.0.1:1: connect: connection refused"), "the team database did not answer"},
	} {
		if got := printTeam(io.Discard, &system.TeamCheck{Node: "n1", Env: "TEAM_DB", Err: tt.err}); got != tt.want {
			t.Errorf("printTeam(%v) = %q; want %q", tt.err, got, tt.want)
		}
	}
}

// check counts what went wrong by kind, leaves disabled candidates alone,
// and says when api_key_env holds nothing.
func TestCheckSortsWhatWentWrong(t *testing.T) {
	locked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":"Invalid API key"}}`)
			return
		}
		io.WriteString(w, `{"data":[{"id":"m"}]}`)
	}))
	defer locked.Close()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(`chat:
  candidates:
    - {id: keyless, provider: openai, url: "`+locked.URL+`/v1", model: m, api_key_env: SWITCHYARD_TEST_UNSET_KEY}
    - {id: keyed, provider: openai, url: "`+locked.URL+`/v1", model: m, api_key_env: SWITCHYARD_TEST_KEY}
    - {id: nobody-home, provider: ollama, url: "http://127.0.0.1:1", model: m}
    - {id: switched-off, provider: ollama, url: "http://127.0.0.1:1", model: m, enabled: false}
`), 0o600)
	t.Setenv("SWITCHYARD_TEST_KEY", "k")
	code, out, errOut := runCLI(t, "check", "--config", cfg)
	if code != exitUnhealthy {
		t.Errorf("exit code = %d; want %d", code, exitUnhealthy)
	}
	for _, want := range []string{
		"FAIL  keyless", "api_key_env: $SWITCHYARD_TEST_UNSET_KEY is empty or unset, so no key was sent; upstream HTTP 401: Invalid API key",
		"ok    keyed", "FAIL  nobody-home", "off   switched-off", "enabled: false: not asked",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if want := "switchyard: 1 of 3 candidates did not answer; 1 of 3 answered with an error\n"; errOut != want {
		t.Errorf("stderr = %q; want %q", errOut, want)
	}
	os.WriteFile(cfg, []byte("chat:\n  candidates:\n    - {id: switched-off, provider: ollama, url: \"http://127.0.0.1:1\", model: m, enabled: false}\n"), 0o600)
	if code, _, errOut := runCLI(t, "check", "--config", cfg); code != exitUnhealthy || !strings.Contains(errOut, "no candidate is enabled") {
		t.Errorf("every candidate disabled: exit %d, stderr %q; want %d saying nothing would be routed", code, errOut, exitUnhealthy)
	}
}
