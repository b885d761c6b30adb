package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// guard bounds every wait of these tests. It only turns a hang into a
// failure; channels do the synchronising.
const guard = 10 * time.Second

// version returns a valid config file whose only candidate has the given
// priority, so tests can tell versions apart.
func version(priority int) string {
	return fmt.Sprintf("%s      priority: %d\n", candidateYAML, priority)
}

func priority(c Config) int {
	if len(c.Chat.Candidates) == 0 {
		return -1
	}
	return c.Chat.Candidates[0].Priority
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakeClock stands in for time.After: each wait the Watcher starts is sent
// on armed, and ends when the test sends on it.
type fakeClock struct{ armed chan chan time.Time }

func (c *fakeClock) after(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.armed <- ch
	return ch
}

// watch runs a Watcher under test. Its callbacks feed channels, and its
// settle waits end only when the test says so: a test ends them after its
// writes are complete, so a reload never sees a half-written file.
type watch struct {
	clock    fakeClock
	applied  chan Config
	rejected chan error
	cancel   context.CancelFunc
	done     chan error // Run's result
	stopped  bool
}

// startWatch runs w until the test ends, and returns once the watch is in
// place. It sets w's Apply (unless set), Rejected, Ready and clock.
func startWatch(t *testing.T, w *Watcher) *watch {
	t.Helper()
	tw := &watch{
		clock:    fakeClock{armed: make(chan chan time.Time, 1000)},
		applied:  make(chan Config, 100),
		rejected: make(chan error, 100),
		done:     make(chan error, 1),
	}
	if w.Apply == nil {
		w.Apply = func(c Config) error { tw.applied <- c; return nil }
	}
	w.Rejected = func(err error) { tw.rejected <- err }
	ready := make(chan struct{})
	w.Ready = func() { close(ready) }
	w.after = tw.clock.after
	ctx, cancel := context.WithCancel(context.Background())
	tw.cancel = cancel
	go func() { tw.done <- w.Run(ctx) }()
	t.Cleanup(func() { tw.stop(t) })
	select {
	case <-ready:
	case err := <-tw.done:
		t.Fatalf("Run() = %v before the watch was in place", err)
	case <-time.After(guard):
		t.Fatal("watch not in place")
	}
	return tw
}

// stop cancels Run and waits for it to return nil.
func (tw *watch) stop(t *testing.T) {
	t.Helper()
	if tw.stopped {
		return
	}
	tw.stopped = true
	tw.cancel()
	select {
	case err := <-tw.done:
		if err != nil {
			t.Errorf("Run() = %v; want nil after cancel", err)
		}
	case <-time.After(guard):
		t.Fatal("Run did not return after cancel")
	}
}

// next ends every settle wait the Watcher starts until it calls Apply or
// Rejected, and returns what it was called with.
func (tw *watch) next(t *testing.T) (Config, error) {
	t.Helper()
	for {
		select {
		case ch := <-tw.clock.armed:
			ch <- time.Now()
		case c := <-tw.applied:
			return c, nil
		case err := <-tw.rejected:
			return Config{}, err
		case <-time.After(guard):
			t.Fatal("neither Apply nor Rejected called")
		}
	}
}

func (tw *watch) nextApplied(t *testing.T) Config {
	t.Helper()
	c, err := tw.next(t)
	if err != nil {
		t.Fatalf("Rejected(%v); want Apply", err)
	}
	return c
}

func (tw *watch) nextRejected(t *testing.T) error {
	t.Helper()
	c, err := tw.next(t)
	if err == nil {
		t.Fatalf("Apply(%+v); want Rejected", c)
	}
	return err
}

// wantApplied checks that the next call is Apply with priority want.
func (tw *watch) wantApplied(t *testing.T, want int) {
	t.Helper()
	if got := priority(tw.nextApplied(t)); got != want {
		t.Errorf("applied priority %d; want %d", got, want)
	}
}

// relink points the link at link to target.
func relink(t *testing.T, link, target string) {
	t.Helper()
	os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// noMoreCalls ends the settle waits still pending, stops the Watcher, so
// that no callback can still come, and checks that none came.
func (tw *watch) noMoreCalls(t *testing.T) {
	t.Helper()
	for len(tw.clock.armed) > 0 {
		(<-tw.clock.armed) <- time.Now()
	}
	tw.stop(t)
	select {
	case c := <-tw.applied:
		t.Errorf("extra Apply(%+v)", c)
	case err := <-tw.rejected:
		t.Errorf("extra Rejected(%v)", err)
	default:
	}
}

func TestWatcherAppliesValidEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, version(1))
	tw := startWatch(t, &Watcher{Path: path})

	writeFile(t, path, version(2))
	if got := priority(tw.nextApplied(t)); got != 2 {
		t.Errorf("applied priority %d; want 2", got)
	}
	writeFile(t, path, version(3))
	if got := priority(tw.nextApplied(t)); got != 3 {
		t.Errorf("applied priority %d; want 3", got)
	}
	tw.noMoreCalls(t)
}

func TestWatcherRejectsInvalidEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, version(1))
	tw := startWatch(t, &Watcher{Path: path})

	writeFile(t, path, version(1)+"      bogus: true\n")
	err := tw.nextRejected(t) // and no Apply
	if fes := fieldErrors(err); len(fes) != 1 || fes[0].Path != "chat.candidates[0].bogus" || !strings.Contains(err.Error(), path) {
		t.Errorf("Rejected(%v); want chat.candidates[0].bogus, naming the file", err)
	}

	// Fixing the file applies it.
	writeFile(t, path, version(4))
	if got := priority(tw.nextApplied(t)); got != 4 {
		t.Errorf("applied priority %d; want 4", got)
	}
	tw.noMoreCalls(t)
}

func TestWatcherRenameReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, version(1))
	tw := startWatch(t, &Watcher{Path: path})

	// How atomic writers save: a new file renamed over the old one.
	tmp := filepath.Join(dir, ".config.yaml.swp")
	writeFile(t, tmp, version(5))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if got := priority(tw.nextApplied(t)); got != 5 {
		t.Errorf("applied priority %d; want 5", got)
	}

	// How some editors save: the old file moved aside, a new one moved in.
	if err := os.Rename(path, path+"~"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, tmp, version(6))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if got := priority(tw.nextApplied(t)); got != 6 {
		t.Errorf("applied priority %d; want 6", got)
	}
	tw.noMoreCalls(t)
}

// A config that is a link to a file in another directory is watched
// where the file is: edits there apply, and so does a link pointed at
// another file.
func TestWatcherFollowsALink(t *testing.T) {
	dir, dots := t.TempDir(), t.TempDir()
	target := filepath.Join(dots, "switchyard.yaml")
	writeFile(t, target, version(1))
	path := filepath.Join(dir, "config.yaml")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	tw := startWatch(t, &Watcher{Path: path})

	writeFile(t, target, version(2))
	tw.wantApplied(t, 2)
	// Saved the atomic way, where the file is.
	tmp := filepath.Join(dots, ".switchyard.yaml.swp")
	writeFile(t, tmp, version(3))
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	tw.wantApplied(t, 3)
	// The link pointed at another file, then that file edited.
	other := filepath.Join(t.TempDir(), "other.yaml")
	writeFile(t, other, version(4))
	relink(t, path, other)
	tw.wantApplied(t, 4)
	writeFile(t, other, version(5))
	tw.wantApplied(t, 5)
	tw.noMoreCalls(t)
}

// A link that leads through another link is followed to the end, and a
// link in the middle pointed elsewhere is seen.
func TestWatcherFollowsAChainOfLinks(t *testing.T) {
	a, c, d, e := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	final, mid, path := filepath.Join(d, "final.yaml"), filepath.Join(c, "mid.yaml"), filepath.Join(a, "config.yaml")
	writeFile(t, final, version(1))
	if os.Symlink(final, mid) != nil || os.Symlink(mid, path) != nil {
		t.Fatal("symlink")
	}
	tw := startWatch(t, &Watcher{Path: path})
	writeFile(t, final, version(2))
	tw.wantApplied(t, 2)
	other := filepath.Join(e, "other.yaml")
	writeFile(t, other, version(3))
	relink(t, mid, other)
	tw.wantApplied(t, 3)
	writeFile(t, other, version(4))
	tw.wantApplied(t, 4)
	tw.noMoreCalls(t)
}

// The config's directory removed and made again: the file in it is
// watched again.
func TestWatcherDirectoryRemovedAndBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "switchyard")
	os.Mkdir(dir, 0o755)
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, version(1))
	tw := startWatch(t, &Watcher{Path: path})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	tw.nextRejected(t) // the file is gone
	os.Mkdir(dir, 0o755)
	writeFile(t, path, version(5))
	tw.wantApplied(t, 5)
	writeFile(t, path, version(6))
	tw.wantApplied(t, 6)
	tw.noMoreCalls(t)
}

func TestWatcherFileCreatedLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	tw := startWatch(t, &Watcher{Path: path})

	writeFile(t, path, version(7))
	if got := priority(tw.nextApplied(t)); got != 7 {
		t.Errorf("applied priority %d; want 7", got)
	}
	tw.noMoreCalls(t)
}

func TestWatcherRemovedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, version(1))
	tw := startWatch(t, &Watcher{Path: path})

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := tw.nextRejected(t); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Rejected(%v); want fs.ErrNotExist", err)
	}
	writeFile(t, path, version(1))
	if got := priority(tw.nextApplied(t)); got != 1 {
		t.Errorf("applied priority %d; want 1", got)
	}
	tw.noMoreCalls(t)
}

func TestWatcherApplyErrorIsRejected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, version(1))
	errRestart := errors.New("listen changed: restart needed")
	tw := startWatch(t, &Watcher{Path: path, Apply: func(Config) error { return errRestart }})

	writeFile(t, path, version(2))
	if err := tw.nextRejected(t); !errors.Is(err, errRestart) || !strings.Contains(err.Error(), path) {
		t.Errorf("Rejected(%v); want the error of Apply, naming the file", err)
	}
	tw.noMoreCalls(t)
}

func TestWatcherSettlesBeforeReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, version(1))
	tw := startWatch(t, &Watcher{Path: path})

	// The first write is seen, but the file is not read while the wait it
	// started runs, however many writes follow.
	writeFile(t, path, version(2))
	var first chan time.Time
	select {
	case first = <-tw.clock.armed:
	case <-time.After(guard):
		t.Fatal("write not seen")
	}
	writeFile(t, path, version(3))
	select {
	case c := <-tw.applied:
		t.Fatalf("Apply(priority %d) before the file settled", priority(c))
	case err := <-tw.rejected:
		t.Fatalf("Rejected(%v) before the file settled", err)
	default:
	}

	// Once the wait ends, the file is read as it is then: one Apply, of
	// the last version.
	first <- time.Now()
	if got := priority(tw.nextApplied(t)); got != 3 {
		t.Errorf("applied priority %d; want 3, the settled version", got)
	}
	tw.noMoreCalls(t)
}

func TestWatcherRealClock(t *testing.T) {
	// Settle with real time. The file is replaced atomically, so that the
	// wait's length cannot matter to the result.
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	ready := make(chan struct{})
	applied := make(chan Config, 10)
	w := &Watcher{
		Path:   path,
		Apply:  func(c Config) error { applied <- c; return nil },
		Ready:  func() { close(ready) },
		Settle: 10 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(guard):
			t.Fatal("Run did not return after cancel")
		}
	}()
	select {
	case <-ready:
	case <-time.After(guard):
		t.Fatal("watch not in place")
	}

	tmp := filepath.Join(dir, "config.yaml.tmp")
	writeFile(t, tmp, version(8))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-applied:
		if got := priority(c); got != 8 {
			t.Errorf("applied priority %d; want 8", got)
		}
	case <-time.After(guard):
		t.Fatal("Apply not called")
	}
}

func TestWatcherStopsOnCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, version(1))
	tw := startWatch(t, &Watcher{Path: path})
	writeFile(t, path, version(2))
	tw.nextApplied(t)

	tw.stop(t) // Run returned nil
	goleak.VerifyNone(t)
}

func TestWatchReturnsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := &Watcher{Path: filepath.Join(t.TempDir(), "config.yaml"), Apply: func(Config) error { return nil }}
	if err := w.Run(ctx); err != nil {
		t.Errorf("Run() = %v; want nil", err)
	}
	goleak.VerifyNone(t)
}

func TestWatcherSetupErrors(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	w := &Watcher{Path: filepath.Join(dir, "missing", "config.yaml"), Apply: func(Config) error { return nil }}
	if err := w.Run(ctx); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Run(no directory) = %v; want fs.ErrNotExist", err)
	}
	w = &Watcher{Path: filepath.Join(dir, "config.yaml")}
	if err := w.Run(ctx); err == nil {
		t.Error("Run(no Apply) = nil; want an error")
	}
}

func TestChanges(t *testing.T) {
	tests := []struct {
		ev   fsnotify.Event
		want bool
	}{
		{fsnotify.Event{Name: "/d/config.yaml", Op: fsnotify.Write}, true},
		{fsnotify.Event{Name: "/d/config.yaml", Op: fsnotify.Create}, true},
		{fsnotify.Event{Name: "/d/config.yaml", Op: fsnotify.Remove}, true},
		{fsnotify.Event{Name: "/d/config.yaml", Op: fsnotify.Rename}, true},
		{fsnotify.Event{Name: "/d/config.yaml", Op: fsnotify.Chmod | fsnotify.Write}, true},
		{fsnotify.Event{Name: "/d/config.yaml", Op: fsnotify.Chmod}, false},
		{fsnotify.Event{Name: "/d/config.yaml.swp", Op: fsnotify.Write}, false},
		{fsnotify.Event{Name: "/d/other.yaml", Op: fsnotify.Create}, false},
		{fsnotify.Event{Name: "/d", Op: fsnotify.Remove}, false},
	}
	for _, tt := range tests {
		if got := changes(tt.ev, "config.yaml"); got != tt.want {
			t.Errorf("changes(%v) = %v; want %v", tt.ev, got, tt.want)
		}
	}
}

func TestWatcherReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	var applied []int
	var rejected []error
	var applyErr error
	w := &Watcher{
		Path:     path,
		Apply:    func(c Config) error { applied = append(applied, priority(c)); return applyErr },
		Rejected: func(err error) { rejected = append(rejected, err) },
	}
	check := func(step string, wantApplied []int, wantRejected int) {
		t.Helper()
		if fmt.Sprint(applied) != fmt.Sprint(wantApplied) || len(rejected) != wantRejected {
			t.Fatalf("%s: applied %v, rejected %v; want applied %v, %d rejected", step, applied, rejected, wantApplied, wantRejected)
		}
	}

	last := w.reload(nil)
	check("missing file", nil, 1)
	if last != nil || !errors.Is(rejected[0], fs.ErrNotExist) {
		t.Fatalf("missing file: last %q, rejected %v", last, rejected[0])
	}

	writeFile(t, path, version(1))
	last = w.reload(last)
	check("new file", []int{1}, 1)

	last = w.reload(last)
	check("unchanged file", []int{1}, 1)

	writeFile(t, path, "selection: {bogus: 1}\n")
	last = w.reload(last)
	check("invalid file", []int{1}, 2)
	last = w.reload(last)
	check("unchanged invalid file", []int{1}, 2)

	writeFile(t, path, version(1))
	last = w.reload(last)
	check("reverted file", []int{1, 1}, 2)

	applyErr = errors.New("cannot apply")
	writeFile(t, path, version(2))
	last = w.reload(last)
	check("apply fails", []int{1, 1, 2}, 3)
	applyErr = nil
	w.reload(last)
	check("unchanged file after apply failed", []int{1, 1, 2}, 3)
}
