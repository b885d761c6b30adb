// Package history is Switchyard's durable record of requests, their
// attempts and circuit-breaker transitions (docs/DESIGN.md, "History"), kept in one SQLite file
// (modernc.org/sqlite, WAL, synchronous=NORMAL).
//
// Record returns once its record is in the journal beside the file
// (journal.go), which the writer goroutine commits soon after and Open
// replays after a crash, so an acknowledged record survives a crash of
// the process; with synchronous=NORMAL a power loss or OS crash may roll
// back the last commits, and the file is never left corrupt. Without the
// journal (a second Store on the file) Record returns once the
// transaction holding its record has committed: an idle writer commits
// it at once; records that arrive while a commit runs share the next one
// (group commit). One goroutine owns the connection that writes
// (writer.go). It commits a journaled record straight into the requests
// and attempts tables; one whose Record waits goes to a one-table inbox,
// which commits faster, and is moved into the tables off the request path
// (inbox.go). Queries read what waits beside the tables, so they see every
// acknowledged record (view.go).
//
// History keeps millisecond resolution: times and durations are truncated to
// the millisecond when written, and times come back in UTC.
package history

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrNotFound: no request has the id asked for.
	ErrNotFound = errors.New("not found")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("history closed")
	// ErrSchemaTooNew: the file was written by a newer Switchyard whose
	// schema this binary does not know.
	ErrSchemaTooNew = errors.New("history database is newer than this binary")
	// ErrNotDurable: Record could not write the record now (see Health);
	// it is kept in memory and written once the file can be written.
	ErrNotDurable = errors.New("history can't be written now; the record is kept in memory until it can")
	// ErrDamaged: the file is not a sound SQLite database (PRAGMA
	// quick_check found damage, or it is no database at all). Open checks
	// the whole file only after an unclean shutdown, or when
	// Options.Check asks it to.
	ErrDamaged = errors.New("history database is damaged")
	// ErrUnusable: the path can't hold a history Switchyard writes: a
	// directory, a read-only file, or a directory where SQLite can't make
	// the files it keeps beside it (the WAL).
	ErrUnusable = errors.New("history file can't be used")
)

// Defaults for the zero values of Options.
const (
	DefaultRetention  = 30 * 24 * time.Hour
	DefaultBatchSize  = 256
	DefaultPruneEvery = time.Hour
	busyTimeout       = 5 * time.Second
)

// Options tune a Store. The zero value means "all defaults".
type Options struct {
	// Retention is how long requests and breaker events are kept.
	// Zero means DefaultRetention (30 days); negative keeps everything.
	Retention time.Duration
	// BatchSize is the most records and breaker events written in one
	// transaction. Zero means DefaultBatchSize. The queue holds four
	// batches; a Record that finds it full waits.
	BatchSize int
	// PruneEvery is how often the writer deletes what is older than
	// Retention (it also prunes once at Open). Zero means
	// DefaultPruneEvery; negative prunes only at Open.
	PruneEvery time.Duration
	// Now is the clock that decides what Retention has expired.
	// Nil means time.Now.
	Now func() time.Time
	// Logf receives the writer's problems: dropped breaker events, failed
	// batches, failed prunes. Nil discards them.
	Logf func(format string, args ...any)
	// Check makes Open check the whole file (PRAGMA quick_check) even
	// after a clean shutdown; without it, Open checks only a file that was
	// not closed cleanly, as a check reads every page (seconds for a big
	// history).
	Check bool
}

// hooks are the tests' ways into a Store, all zero in production (Open):
// a test opens its Store with openWith. afterEnqueue runs in Record once its
// record is queued; beforeCommit runs before each transaction that
// writes records or breaker changes, with how many of each it writes.
type hooks struct {
	afterEnqueue func()
	beforeCommit func(records, events int)
	// retryPause, when set, replaces the growing pause between tries of a
	// file that can't be written; maxBacklog, when set, MaxBacklog.
	retryPause time.Duration
	maxBacklog int
	// moveAt and moveDelay, when set, replace the constants of the same
	// names; negative: never (queries and Close still move).
	moveAt    int
	moveDelay time.Duration
	// noJournal, when set, makes the Store work without a journal, as a
	// second Store on a file does.
	noJournal bool
	// viaInbox, when set, sends journaled records through the inbox too,
	// as records whose Record waits are: for tests of the inbox and the
	// move.
	viaInbox bool
	// journalLimit, when set, replaces journalTruncateAt; walMax,
	// walLimit as the WAL's size past which a checkpoint cuts it back.
	journalLimit int64
	walMax       int64
	// sweepBatch, when set, is the rows every step of a sweep deletes
	// (else it starts at sweepBatch and follows sweepStepTime); swept,
	// when set, runs on the writer goroutine after each transaction of a
	// sweep that deletes, with how many rows it deleted.
	sweepBatch int
	swept      func(deleted int64)
	// jobQueued, when set, runs once a job waits for the writer;
	// checkpointing, on the checkpoint's goroutine before each checkpoint.
	jobQueued     func()
	checkpointing func()
	// committing, when set, runs on the writer goroutine in each commit
	// of records or breaker changes, just before COMMIT; viewing, in a
	// query once it has read what waits in memory, before its snapshot.
	committing func()
	viewing    func()
	// viewMax, when set, replaces the constant of the same name.
	viewMax int
}

// settings are a Store's Options and hooks, with the defaults in place of
// zero values; fixed at Open, but for retention, which SetRetention
// changes on the writer goroutine, the only one that reads it.
type settings struct {
	retention  time.Duration
	batchSize  int
	pruneEvery time.Duration
	now        func() time.Time
	logf       func(format string, args ...any)
	hooks
}

// Store is an open history file, made by Open; the zero value is not
// usable. Its methods are safe for concurrent use. Whoever opened it closes
// it with Close.
type Store struct {
	db         *sql.DB // the pool, for queries
	path       string
	journal    *journal // nil: Record waits for its commit (journal.go)
	cfg        settings
	checked    bool          // Open ran quick_check
	startSwept chan struct{} // closed once the sweep at start is done

	q   queue   // what waits for the writer goroutine (writer.go)
	sig signals // how other goroutines reach the writer goroutine
	w   writer  // the writer goroutine's own: nothing else touches it

	views   views // view.go
	commits atomic.Int64
	dropped atomic.Int64

	healthMu sync.Mutex
	health   Health // backlog.go
	// damage is the damage found in the file since Open, with what to do,
	// and when; it stays until Switchyard starts on a sound file.
	damage      error
	damageSince time.Time
}

// Open opens the history file at path, creating it and its parent directory
// when missing, brings its schema up to date, prunes what Retention has
// expired and starts the writer. A file written by a newer binary is
// refused with ErrSchemaTooNew.
func Open(path string, o Options) (*Store, error) {
	return openWith(path, o, hooks{})
}

// openWith is Open with a test's hooks.
func openWith(path string, o Options, h hooks) (*Store, error) {
	s, err := open(path, o, h)
	if err != nil {
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	return s, nil
}

func open(path string, o Options, h hooks) (*Store, error) {
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.PruneEvery == 0 {
		o.PruneEvery = DefaultPruneEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	ms, err := loadMigrations(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := usable(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, err
	}
	// WAL lets readers run beside the one writer, which holds a
	// connection of its own; a few more are enough for the UI's queries.
	db.SetMaxOpenConns(1 + max(4, runtime.GOMAXPROCS(0)))
	db.SetMaxIdleConns(3)
	ctx := context.Background()
	// The marker of a clean shutdown is taken away while the file is
	// open: a start that does not find it follows a crash.
	clean := os.Remove(path+cleanSuffix) == nil
	checked := !clean || o.Check
	if checked {
		if err := check(ctx, db); err != nil {
			db.Close()
			return nil, fmt.Errorf("%w: %w: move it aside (mv %s %s.damaged) and start again; Switchyard then makes a new one", ErrDamaged, err, path, path)
		}
	}
	if v, err := userVersion(ctx, db); err == nil && v > 0 && v < len(ms) {
		// An older file: 0004 and 0005 read and rewrite all of it, once.
		o.Logf("history: upgrading %s from schema %d to %d, once; a large history takes a minute or more (15 s at 1M requests)", path, v, len(ms))
	}
	if err := migrate(ctx, db, ms); err != nil {
		db.Close()
		return nil, err
	}
	// The writer's connection never checkpoints in a commit: the writer
	// asks for one beside it (checkpoint.go). Its page cache
	// is 8 MiB (SQLite's default is 2): a sweep's deletes touch every
	// index of requests and attempts, and each page missing from the
	// cache is a read while the writer takes no job.
	w, err := openConn(db.Driver(), dsn(path, "wal_autocheckpoint(0)", "cache_size(-8192)"))
	if err != nil {
		db.Close()
		return nil, err
	}
	// The checkpoint's own connection (checkpoint.go) reads no table:
	// a small cache does.
	ck, err := openConn(db.Driver(), dsn(path, "cache_size(-512)"))
	if err != nil {
		w.close()
		db.Close()
		return nil, err
	}
	h.maxBacklog = cmp.Or(h.maxBacklog, MaxBacklog)
	h.moveAt = cmp.Or(h.moveAt, moveAt)
	h.moveDelay = cmp.Or(h.moveDelay, moveDelay)
	h.viewMax = cmp.Or(h.viewMax, viewMax)
	s := &Store{
		db:   db,
		path: path,
		cfg: settings{
			retention:  o.Retention,
			batchSize:  o.BatchSize,
			pruneEvery: o.PruneEvery,
			now:        o.Now,
			logf:       o.Logf,
			hooks:      h,
		},
		checked:    checked,
		startSwept: make(chan struct{}),
		q:          queue{room: make(chan struct{}, 4*o.BatchSize)},
		views:      views{idle: make(chan struct{}, 1)},
		sig: signals{
			commit:      make(chan struct{}, 1),
			commitTimer: stoppedTimer(),
			jobs:        make(chan job, 1),
			prunes:      make(chan chan pruned),
			quit:        make(chan struct{}),
			stopped:     make(chan struct{}),
		},
		w: writer{
			c:         w,
			ckpt:      checkpointer{c: ck, done: make(chan error, 1)},
			moveTimer: stoppedTimer(),
			retry:     stoppedTimer(),
			yield:     stoppedTimer(),
		},
	}
	if !h.noJournal {
		s.journal = s.openJournal(h.journalLimit)
	}
	// Move what a crash left in the inbox; the writer goroutine prunes,
	// after Open has returned.
	if err := s.moveAll(); err != nil {
		s.fail(err) // it says so
		s.armRetry()
	}
	go s.run()
	return s, nil
}

// stoppedTimer is a timer that has not been started.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// cleanSuffix names the marker of a clean shutdown beside the file:
// Close writes it, Open takes it away.
const cleanSuffix = "-clean"

// check runs SQLite's own consistency check of the whole file (PRAGMA
// quick_check): a file with a sound header but damaged pages would
// otherwise open, then lose new rows and fail listings.
// usable says why path can't hold a history Switchyard writes, before
// SQLite is asked, whose one "unable to open database file" would be
// taken for damage, with the advice to move the path aside: a directory,
// or a file on a read-only disk.
func usable(path string) error {
	what := "--db or history.path"
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%w: %s is a directory: name a file in it, such as %s, with %s", ErrUnusable, path, filepath.Join(path, "history.db"), what)
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is %s, not a file: name a file with %s", ErrUnusable, path, fileKind(fi.Mode()), what)
	case err == nil:
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("%w: %s can't be written (%w): make it writable, or name another file with %s", ErrUnusable, path, unwrapPath(err), what)
		}
		f.Close()
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".switchyard-probe-*")
	if err != nil {
		return fmt.Errorf("%w: can't make files in %s (%w), which SQLite needs beside %s for its WAL: make it writable, or name a file elsewhere with %s",
			ErrUnusable, dir, unwrapPath(err), filepath.Base(path), what)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// fileKind names what a path that is no regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "something else"
}

// unwrapPath is err without the path a *fs.PathError repeats.
func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

func check(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check(8)")
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) > 0 {
		// One line: SQLite's own lines may hold line breaks.
		more := ""
		if len(problems) > 2 {
			more = fmt.Sprintf(" (and %d more)", len(problems)-2)
			problems = problems[:2]
		}
		return fmt.Errorf("quick_check: %s%s", strings.Join(strings.Fields(strings.Join(problems, "; ")), " "), more)
	}
	return nil
}

// dsn is the driver's name for path with Switchyard's connection settings,
// applied to every connection the pool opens. _txlock=immediate makes BEGIN
// take the write lock at once, so two writers wait on busy_timeout instead
// of deadlocking on a lock upgrade.
func dsn(path string, pragmas ...string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// Free pages go back to the file system after a sweep (a new file is
	// made so; migration 0005 converts an older one), and the WAL is cut
	// back to this size after a checkpoint (docs/DESIGN.md, "History").
	q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
	q.Add("_pragma", "journal_size_limit("+strconv.Itoa(walLimit)+")")
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	// A file: URI with the path escaped, so that '?', '#' and '%' in a
	// directory name stay part of the name. SQLite wants a Windows drive
	// after a slash: file:/C:/Users/...
	p := filepath.ToSlash(path)
	if filepath.VolumeName(path) != "" {
		p = "/" + p
	}
	return "file:" + (&url.URL{Path: p}).EscapedPath() + "?" + q.Encode()
}

// Close writes everything still queued and moves the inbox, stops the
// writer and closes the file. Record and RecordBreaker calls after Close
// fail or drop; Close may be called more than once.
func (s *Store) Close() error {
	s.q.mu.Lock()
	if s.q.closed {
		s.q.mu.Unlock()
		return nil
	}
	s.q.closed = true
	s.q.mu.Unlock()
	close(s.sig.quit)
	<-s.sig.stopped
	s.sig.commitTimer.Stop()
	s.w.moveTimer.Stop()
	s.w.yield.Stop()
	s.w.retry.Stop()
	if err := errors.Join(s.w.closeErr, s.db.Close()); err != nil {
		return fmt.Errorf("close history %s: %w", s.path, err)
	}
	// Only the Store that held the journal speaks for the file: another
	// one on it may still be writing.
	if s.journal != nil {
		if err := os.WriteFile(s.path+cleanSuffix, nil, 0o600); err != nil {
			s.cfg.logf("history: %v; the next start checks the whole file", err)
		}
	}
	return nil
}

// Commits reports how many transactions have committed request records
// (a group commit each); moving them out of the inbox, breaker changes and
// pruning are not counted.
func (s *Store) Commits() int64 { return s.commits.Load() }

// Dropped reports how many breaker changes were lost: dropped because the
// queue was full or the Store closed, or lost in a failed write.
func (s *Store) Dropped() int64 { return s.dropped.Load() }

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered schema change; version n is the file whose name
// starts with n and an underscore ("0001_init.sql").
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the .sql files in dir of fsys, ordered by version.
// Versions must run 1, 2, 3... without gaps or repeats.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version and '_'", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d", m.name, m.version, i+1)
		}
	}
	return ms, nil
}

// migrate applies the migrations db has not seen, each in its own
// transaction together with the PRAGMA user_version that records it, so a
// crash leaves the schema at one version or the next, never between.
func migrate(ctx context.Context, db *sql.DB, ms []migration) error {
	latest := len(ms)
	for _, m := range ms {
		if err := applyMigration(ctx, db, m, latest); err != nil {
			return err
		}
	}
	// A file already at latest got no transaction above: check it here.
	v, err := userVersion(ctx, db)
	if err != nil {
		return err
	}
	if v > latest {
		return fmt.Errorf("%w: schema version %d, this binary knows up to %d", ErrSchemaTooNew, v, latest)
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, m migration, latest int) error {
	v, err := userVersion(ctx, db)
	if err != nil {
		return err
	}
	if v > latest {
		return fmt.Errorf("%w: schema version %d, this binary knows up to %d", ErrSchemaTooNew, v, latest)
	}
	if v >= m.version {
		return nil
	}
	if strings.HasPrefix(m.sql, outsideTx) {
		return applyOutsideTx(ctx, db, m)
	}
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		return fmt.Errorf("migrate to %d: %w", m.version, err)
	}
	defer tx.Rollback()
	// Read again under the lock: another process may have migrated since.
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("migrate to %d: %w", m.version, err)
	}
	if v >= m.version {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if code := migrationCode[m.version]; code != nil {
		if err := code(ctx, tx); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(m.version)); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	return nil
}

// outsideTx starts a migration that cannot run in a transaction (VACUUM):
// it runs on its own, then its version is recorded. It must be safe to
// run twice, as a crash between the two runs it again.
const outsideTx = "-- outside a transaction\n"

func applyOutsideTx(ctx context.Context, db *sql.DB, m migration) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := c.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(m.version)); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	return nil
}

// migrationCode is what a migration does beyond its SQL, in the same
// transaction: filling what its SQL made from the rows already there.
var migrationCode = map[int]func(context.Context, *sql.Tx) error{
	4: backfillRollups,
}

func userVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
