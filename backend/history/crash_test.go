package history

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// crashChildEnv names the history file a re-executed test binary records
// into until it is killed (see TestMain).
const crashChildEnv = "SWITCHYARD_HISTORY_CRASH_CHILD"

// crashChild records requests from several goroutines and prints each id
// on stdout once Record has returned for it. It stops by itself after a
// bounded number of records in case the parent never kills it.
func crashChild(path string) int {
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	const writers, perWriter = 4, 20000
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				id := fmt.Sprintf("%d-%d-%d", os.Getpid(), w, i)
				if err := s.Record(context.Background(), rec(id, time.Now())); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				out.Lock()
				os.Stdout.WriteString(id + "\n") // one write: a kill cannot split it
				out.Unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

// TestCrashKeepsAcknowledgedRecords kills a recording process with SIGKILL
// and checks the file it leaves: intact, still in WAL mode, and holding
// every record whose Record returned, in requests or in the inbox; then
// that a Store opened on it returns every one of them, with the inbox
// moved. Two rounds on one file also check that writing resumes after
// recovery.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs a killable child process")
	}
	path := filepath.Join(t.TempDir(), "history.db")
	var acked []string
	for round, killAfter := range []int{150, 400} {
		acked = append(acked, crashRound(t, path, killAfter)...)
		checkAfterCrash(t, path, round, acked)
	}
}

// crashRound starts a child recording into path, SIGKILLs it once it has
// acknowledged killAfter records, and returns every id it acknowledged.
func crashRound(t *testing.T, path string, killAfter int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		acked = append(acked, sc.Text())
		if len(acked) == killAfter {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
		}
		// Lines written before the kill are still read: they were
		// acknowledged too.
	}
	err = cmd.Wait()
	if len(acked) < killAfter {
		t.Fatalf("child acknowledged %d records before exiting (%v); want %d\nstderr: %s", len(acked), err, killAfter, stderr.String())
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.Exited() {
		t.Fatalf("child ended with %v; want killed by a signal\nstderr: %s", err, stderr.String())
	}
	return acked
}

func checkAfterCrash(t *testing.T, path string, round int, acked []string) {
	t.Helper()
	// A plain connection: no pragmas of ours, so journal_mode is what the
	// file itself says.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var integrity, journal string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil {
		t.Fatal(err)
	}
	if integrity != "ok" {
		t.Errorf("round %d: integrity_check = %q; want ok", round, integrity)
	}
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&journal); err != nil {
		t.Fatal(err)
	}
	if journal != "wal" {
		t.Errorf("round %d: journal_mode = %q; want wal", round, journal)
	}
	// The records are in the files themselves, as the killed process left
	// them: the history's tables, and the journal.
	stored := map[string]bool{}
	inbox := idsIn(t, db, "inbox")
	journaled := journalIDs(t, path)
	for _, id := range append(append(idsIn(t, db, "requests"), inbox...), journaled...) {
		stored[id] = true
	}
	missing := 0
	for _, id := range acked {
		if !stored[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("round %d: %d of %d acknowledged records missing from the file after SIGKILL", round, missing, len(acked))
	}
	// A Switchyard started on the file shows every one of them.
	s := openAt(t, path, Options{})
	missing = 0
	for _, id := range acked {
		if _, err := s.Request(context.Background(), id); err != nil {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("round %d: %d of %d acknowledged records missing from the reopened history", round, missing, len(acked))
	}
	if n := len(idsIn(t, s.db, "inbox")); n != 0 {
		t.Errorf("round %d: %d records still in the inbox after Open; want all moved", round, n)
	}
	if ids := journalIDs(t, path); len(ids) != 0 {
		t.Errorf("round %d: %d records still in the journal after Open; want all replayed", round, len(ids))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("round %d: %d acknowledged, %d stored, %d of them in the inbox and %d in the journal", round, len(acked), len(stored), len(inbox), len(journaled))
}

// journalIDs lists the ids of the records in the journal of the history
// file at path.
func journalIDs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path + journalSuffix)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := frames(b)
	var ids []string
	for _, rec := range recs {
		rows, err := decodeRecord(rec)
		if err != nil {
			t.Fatalf("a journaled record can't be read: %v", err)
		}
		ids = append(ids, rows[0][0].(string))
	}
	return ids
}

// idsIn lists the ids table holds.
func idsIn(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.Query("SELECT id FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
