package history

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fullDisk makes every write that grows the file fail with SQLITE_FULL, as
// a full filesystem does, until undone: SQLite's max_page_count caps the
// file at its current size on the writer's connection.
func fullDisk(t *testing.T, s *Store) (undo func()) {
	t.Helper()
	onWriter(t, s, func(w *conn) {
		rows, err := w.query("PRAGMA page_count")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.exec(fmt.Sprintf("PRAGMA max_page_count = %d", rows[0][0])); err != nil {
			t.Fatal(err)
		}
	})
	return func() {
		onWriter(t, s, func(w *conn) {
			if _, err := w.exec("PRAGMA max_page_count = 1073741823"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// onWriter runs f with the writer's connection, on the writer goroutine.
func onWriter(t testing.TB, s *Store, f func(*conn)) {
	t.Helper()
	if err := s.do(context.Background(), func() error { f(s.w.c); return nil }); err != nil {
		t.Fatal(err)
	}
}

// logs collects what a Store logs.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// With the disk full, records used to be dropped without a word: Record's
// error was discarded and nothing was logged or counted. Now they are kept
// and written, oldest first, once the disk has room again, and the failure
// is logged and reported by Health meanwhile (issue 12, item 2).
func TestFullDiskLosesNothing(t *testing.T) {
	l := &logs{}
	// No move on a timer or a count: a move empties the inbox, which
	// would make room in the capped file.
	s, _ := openTemp(t, Options{Logf: l.logf}, hooks{retryPause: 20 * time.Millisecond, moveAt: -1, moveDelay: -1, noJournal: true})
	mustRecord(t, s, rec("before", t0))
	undo := fullDisk(t, s)
	// The last page has room for a few rows; then the disk is full, and
	// every record after is kept rather than written.
	const n = 300
	full := -1
	for i := range n {
		err := s.Record(context.Background(), rec(fmt.Sprintf("during-%03d", i), t0.Add(time.Duration(i)*time.Millisecond)))
		switch {
		case errors.Is(err, ErrNotDurable) && full < 0:
			full = i
		case err == nil && full >= 0:
			t.Fatalf("Record during-%03d = nil after the disk was full", i)
		case err != nil && !errors.Is(err, ErrNotDurable):
			t.Fatalf("Record during-%03d = %v; want ErrNotDurable", i, err)
		}
	}
	if full < 0 {
		t.Fatal("the disk never filled")
	}
	h := s.Health()
	if h.Err == nil || h.Since.IsZero() || h.Pending == 0 || h.WriteErrors == 0 {
		t.Fatalf("Health() on a full disk = %+v; want the error, since when, what waits", h)
	}
	if !strings.Contains(l.text(), "can't write") {
		t.Errorf("log = %q; want the failure said", l.text())
	}
	undo()
	deadline := time.Now().Add(10 * time.Second)
	for s.Health().Err != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h := s.Health(); h.Err != nil || h.Pending != 0 || h.Lost != 0 {
		t.Fatalf("Health() after room came back = %+v; want healthy, nothing waiting or lost", h)
	}
	if got := count(t, s, "requests"); got != n+1 {
		t.Errorf("%d requests in history; want all %d", got, n+1)
	}
	if !strings.Contains(l.text(), "writing") || !strings.Contains(l.text(), "again") {
		t.Errorf("log = %q; want the recovery said", l.text())
	}
	mustRecord(t, s, rec("after", t0.Add(time.Hour)))
}

// Writing a backlog of thousands of records once the disk has room again
// keeps the WAL bounded: it grew to 73 MB for 10,000, and filled the room
// a user had just made.
func TestBacklogDrainKeepsTheWALBounded(t *testing.T) {
	s, path := openTemp(t, Options{}, hooks{retryPause: time.Hour, noJournal: true})
	mustRecord(t, s, rec("before", t0))
	undo := fullDisk(t, s)
	const n = 3000
	for i := range n {
		s.Record(context.Background(), rec(fmt.Sprintf("during-%04d", i), t0.Add(time.Duration(i)*time.Millisecond)))
	}
	if h := s.Health(); h.Pending < n-100 {
		t.Fatalf("Health() on a full disk = %+v; want about %d records waiting", h, n)
	}
	undo()
	if err := s.do(context.Background(), func() error { s.retryWrites(); return nil }); err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); h.Err != nil || h.Pending != 0 {
		t.Fatalf("Health() after the backlog was written = %+v", h)
	}
	if got := count(t, s, "requests"); got != n+1 {
		t.Errorf("%d requests in history; want all %d", got, n+1)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WAL: %d KiB after a backlog of %d records", fi.Size()>>10, n)
	if fi.Size() > 8<<20 {
		t.Errorf("WAL is %d MiB after a backlog of %d records was written; want a few MiB", fi.Size()>>20, n)
	}
}

// The first try after a full disk cuts the WAL to nothing, so that the
// room a user freed goes to the records that wait, not to the WAL.
func TestRetryAfterAFullDiskCutsTheWAL(t *testing.T) {
	s, path := openTemp(t, Options{}, hooks{retryPause: time.Hour, noJournal: true})
	for i := range 300 {
		mustRecord(t, s, rec(fmt.Sprintf("before-%03d", i), t0))
	}
	undo := fullDisk(t, s)
	// The last page has room for a few rows; then the disk is full.
	n := 0
	for ; n < 300 && !errors.Is(s.Record(context.Background(), rec(fmt.Sprintf("during-%03d", n), t0)), ErrNotDurable); n++ {
	}
	n++
	// keep tells Record before it counts what waits: a job after it sees
	// both done.
	if err := s.do(context.Background(), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); h.Pending == 0 {
		t.Fatalf("Health() on a full disk = %+v; want records waiting", h)
	}
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := walSize()
	undo()
	if err := s.do(context.Background(), func() error { s.retryWrites(); return nil }); err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); h.Err != nil || h.Pending != 0 {
		t.Fatalf("Health() after the retry = %+v; want all written", h)
	}
	if after := walSize(); after > before/4 {
		t.Errorf("WAL %d bytes after the retry, %d before; want it cut, the waiting records only", after, before)
	}
	if got := count(t, s, "requests"); got != 300+n {
		t.Errorf("%d requests; want %d", got, 300+n)
	}
}

// The backlog is bounded: past it the oldest records are lost, and counted.
func TestBacklogIsBounded(t *testing.T) {
	s, _ := openTemp(t, Options{}, hooks{retryPause: time.Hour, maxBacklog: 10, moveAt: -1, moveDelay: -1, noJournal: true})
	mustRecord(t, s, rec("before", t0))
	fullDisk(t, s)
	for i := range 400 {
		s.Record(context.Background(), rec(fmt.Sprintf("r%03d", i), t0))
	}
	if h := s.Health(); h.Pending != 10 || h.Lost < 1 {
		t.Errorf("Health() = %+v; want 10 pending and the rest counted lost", h)
	}
}

// A file whose header is sound but whose pages are damaged used to open and
// then lose new rows and fail listings; it is refused at start with what to
// do (issue 12, item 2), when Open checks it: after an unclean shutdown, or
// when asked to (issue 24: not at every start).
func TestDamagedFileIsRefused(t *testing.T) {
	path := damagedFile(t)
	_, err := Open(path, Options{Check: true})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "move it aside") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open(damaged, Check) = %v; want ErrDamaged saying what to do, on one line", err)
	}
	// Without the marker of a clean shutdown, as after a crash.
	os.Remove(path + cleanSuffix)
	_, err = Open(path, Options{})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open(damaged) after an unclean shutdown = %v; want ErrDamaged", err)
	}
}

// damagedFile is a history of 2000 requests, closed cleanly, with garbage
// written over every other 4 KiB page but the first, its header.
func damagedFile(t *testing.T) string {
	t.Helper()
	s, path := openTemp(t, Options{})
	for i := range 2000 {
		mustRecord(t, s, rec(fmt.Sprintf("r%04d", i), t0.Add(time.Duration(i)*time.Second)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	garbage := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024))
	for off := int64(8192); off+int64(len(garbage)) < st.Size(); off += 16384 {
		f.WriteAt(garbage, off) // the header (page 1) stays sound
	}
	return path
}

// Damage done while Switchyard was stopped after a clean shutdown is not
// looked for at start (TestWholeFileCheckOnlyAfterUncleanShutdown): the
// first query, write or sweep that reads it says what to do, and the
// history shows it until Switchyard starts on a sound file.
func TestDamageFoundAfterOpenIsSaid(t *testing.T) {
	l := &logs{}
	path := damagedFile(t)
	s := openAt(t, path, Options{Logf: l.logf, Now: func() time.Time { return t0 }})
	_, err := s.Requests(context.Background(), Filter{Limit: 1000})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "move it aside (mv "+path+" "+path+".damaged)") {
		t.Fatalf("Requests() on a damaged file = %v; want ErrDamaged saying what to do", err)
	}
	if h := s.Health(); !errors.Is(h.Err, ErrDamaged) || h.Since.IsZero() {
		t.Errorf("Health() = %+v; want the damage shown", h)
	}
	if !strings.Contains(l.text(), "history database is damaged") {
		t.Errorf("log = %q; want the damage said", l.text())
	}
	// It stays said, whatever works meanwhile: a record written, another
	// query that reads sound pages.
	s.Record(context.Background(), rec("after", t0))
	s.Requests(context.Background(), Filter{Limit: 1})
	if h := s.Health(); !errors.Is(h.Err, ErrDamaged) {
		t.Errorf("Health() after a write and a small query = %+v; want the damage still shown", h)
	}
	if n := strings.Count(l.text(), "history database is damaged"); n != 1 {
		t.Errorf("the damage was logged %d times; want once:\n%s", n, l.text())
	}

	// Found by the sweep after Open, before any query.
	path = damagedFile(t)
	swept := openAt(t, path, Options{Now: func() time.Time { return t0.Add(DefaultRetention + 1000*time.Second) }})
	<-swept.startSwept
	if h := swept.Health(); !errors.Is(h.Err, ErrDamaged) || !strings.Contains(h.Err.Error(), "move it aside") {
		t.Errorf("Health() after a sweep through damaged pages = %+v; want the damage and what to do", h)
	}
}

// A path that can't hold a history is said for what it is, never taken
// for a damaged file whose advice would move a user's folder aside.
func TestOpenSaysWhyAPathCantBeUsed(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrUnusable) || errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), dir+" is a directory: name a file in it, such as "+filepath.Join(dir, "history.db")) {
		t.Errorf("Open(a directory) = %v; want ErrUnusable naming a file in it", err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo.db")
	if err := mkfifo(fifo); err == nil {
		_, err = Open(fifo, Options{})
		if !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), fifo+" is a named pipe, not a file") {
			t.Errorf("Open(a named pipe) = %v; want ErrUnusable saying what it is", err)
		}
	}
	if _, err := os.Stat("/dev/null"); err == nil {
		_, err = Open("/dev/null", Options{})
		if !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), "/dev/null is a character device, not a file") {
			t.Errorf("Open(/dev/null) = %v; want ErrUnusable saying what it is", err)
		}
		if _, err := os.Stat("/dev/null-journal"); err == nil {
			t.Error("Open(/dev/null) left /dev/null-journal")
		}
	}
	if runtime.GOOS == "linux" {
		// Nobody, root included, makes files in /proc.
		_, err = Open("/proc/switchyard-history.db", Options{})
		if !errors.Is(err, ErrUnusable) || errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "can't make files in /proc") {
			t.Errorf("Open(a file in /proc) = %v; want ErrUnusable saying files can't be made there", err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Open left %d files in %s", len(entries), dir)
	}
}

// A start after a clean shutdown reads no more of the file than it needs:
// quick_check reads every page, seconds for a big history (issue 24). A
// start that does not find the marker of a clean shutdown (a crash, a
// kill, a file from before the marker) checks the whole file.
func TestWholeFileCheckOnlyAfterUncleanShutdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	for i, step := range []struct {
		name      string
		want      bool // whether this start checks the whole file
		thenCrash bool // this Store ends as a killed process's does
	}{
		{"new file", true, false},
		{"after a clean shutdown", false, true},
		{"after an unclean shutdown", true, false},
		{"after a clean shutdown again", false, false},
	} {
		s, err := Open(path, Options{Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		if s.checked != step.want {
			t.Errorf("start %d (%s): whole-file check %v; want %v", i, step.name, s.checked, step.want)
		}
		mustRecord(t, s, rec(fmt.Sprintf("r%d", i), t0))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if step.thenCrash {
			// A killed process never writes the marker.
			os.Remove(path + cleanSuffix)
		}
	}
}
