package main

import (
	"fmt"
	"io"
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
