package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher reloads a config file when it changes. Set its fields, then call
// Run; a Watcher runs once.
//
// It watches the file's directory, not the file, so it sees every way an
// editor saves: writing in place, writing a new file and renaming it over
// the old one, deleting and re-creating. A file that does not exist yet is
// seen when it is created. Not seen: edits to the target of a symlink at
// Path made in the target's own directory, and anything after the directory
// itself is removed or renamed.
type Watcher struct {
	// Path is the config file. Its directory must exist; the file need
	// not.
	Path string
	// Apply is called with each new valid version of the file. An error
	// it returns (the caller could not use the version) goes to Rejected.
	// A version is handled once: saving it again unchanged does not call
	// Apply again. Required.
	Apply func(Config) error
	// Rejected is called with the error of each version that could not be
	// read, parsed or applied; the caller keeps the config it has. A
	// removed file is rejected with an error that satisfies
	// errors.Is(err, fs.ErrNotExist). Nil means ignore.
	Rejected func(error)
	// Ready, when set, is called once the watch is in place: every change
	// made after it returns is seen. A caller that loads the file itself
	// should load it after Ready, so that no edit falls between its load
	// and the watch.
	Ready func()
	// Settle is how long the file must stay quiet after a change before it
	// is read, so that a save made of several writes is read once and
	// whole. Zero means 100ms.
	Settle time.Duration

	after func(time.Duration) <-chan time.Time // time.After; tests drive Settle through it
}

// Run watches w.Path until ctx is done, then returns nil, having stopped
// every goroutine it started. Ready, Apply and Rejected are called from the
// goroutine that runs Run, one at a time, and Run does not return while one
// of them runs. Run reads the file only after it changes: the version that
// is there when Run starts is the caller's to load.
//
// Run returns an error at once, without calling anything, when the watch
// cannot be set up (the directory does not exist, the system's inotify
// limits are reached).
func (w *Watcher) Run(ctx context.Context) error {
	if w.Apply == nil {
		return errors.New("watch config: no Apply func")
	}
	dir := filepath.Dir(w.Path)
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config: %w", err)
	}
	defer fw.Close() // waits for fsnotify's goroutine to end
	if err := fw.Add(dir); err != nil {
		return fmt.Errorf("watch config directory %s: %w", dir, err)
	}
	// The file is watched through its directory, so that every way an
	// editor saves is seen. A config that is a link (dotfiles, stow) is
	// edited where the link leads: every link's and the file's directory
	// is watched too, and followed when a link is pointed elsewhere. A
	// watched directory that is removed takes its watch with it: it is
	// looked for again every second until it is back.
	dirs := map[string]bool{dir: true} // watched
	var files map[string]bool          // the config, the links it leads through, the file
	follow := func() (all bool) {
		files, all = map[string]bool{}, true
		p := filepath.Clean(w.Path)
		for range maxLinks {
			files[p] = true
			if d := filepath.Dir(p); !dirs[d] {
				if fw.Add(d) == nil {
					dirs[d] = true
				} else {
					all = false
				}
			}
			fi, err := os.Lstat(p)
			if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				break
			}
			next, err := os.Readlink(p)
			if err != nil {
				break
			}
			if !filepath.IsAbs(next) {
				next = filepath.Join(filepath.Dir(p), next)
			}
			p = filepath.Clean(next)
		}
		return all
	}
	follow()
	if w.Ready != nil {
		w.Ready()
	}

	after := w.after
	if after == nil {
		after = time.After
	}
	settle := w.Settle
	if settle <= 0 {
		settle = 100 * time.Millisecond
	}
	var (
		quiet <-chan time.Time // fires once the file settled; nil when nothing changed
		retry <-chan time.Time // fires when a removed directory is looked for again
		last  []byte           // the version handled last; nil when none or unreadable
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return fmt.Errorf("watch config %s: watcher closed", w.Path)
			}
			name := filepath.Clean(ev.Name)
			switch {
			case dirs[name] && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0:
				delete(dirs, name) // its watch went with it
				fw.Remove(name)
				retry = after(time.Second)
				quiet = after(settle)
			case files[name] && changes(ev, filepath.Base(name)):
				quiet = after(settle) // restart the wait: the save may go on
			}
		case _, ok := <-fw.Errors:
			if !ok {
				return fmt.Errorf("watch config %s: watcher closed", w.Path)
			}
			// Most likely an event queue overflow, which may have hidden
			// a change: read the file to be sure.
			quiet = after(settle)
		case <-retry:
			retry = nil
			if follow() {
				quiet = after(settle) // back: read what it holds now
			} else {
				retry = after(time.Second)
			}
		case <-quiet:
			quiet = nil
			if !follow() && retry == nil {
				retry = after(time.Second)
			}
			last = w.reload(last)
		}
	}
}

// maxLinks bounds the links followed from the config to its file, as the
// system's own limit does for a loop of links.
const maxLinks = 40

// changes reports whether ev may have changed the content of the file
// named base in the watched directory. A change of mode alone does not.
func changes(ev fsnotify.Event, base string) bool {
	return filepath.Base(ev.Name) == base &&
		ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Remove|fsnotify.Rename) != 0
}

// reload reads the file and hands it to Apply or Rejected, unless it holds
// the same bytes as last, the version handled before: each version is
// handled once, whether it was applied or not, so that a touch or an
// unchanged save does nothing. It returns the version it handled, nil when
// the file could not be read.
func (w *Watcher) reload(last []byte) []byte {
	data, err := readFile(w.Path)
	if err != nil {
		w.reject(err)
		return nil
	}
	if last != nil && bytes.Equal(data, last) {
		return last // touched or re-saved unchanged
	}
	cfg, err := parseFile(w.Path, data)
	if err != nil {
		w.reject(err)
		return data
	}
	if err := w.Apply(cfg); err != nil {
		w.reject(fmt.Errorf("apply config %s: %w", w.Path, err))
	}
	return data
}

func (w *Watcher) reject(err error) {
	if w.Rejected != nil {
		w.Rejected(err)
	}
}
