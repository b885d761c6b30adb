// Package realserver starts real model servers — llama.cpp's llama-server and
// Ollama — for Go tests in other packages, so that those tests can pin how
// the real servers answer and fail.
//
// Find locates the servers (the bundle named by $SWITCHYARD_REALSERVERS, or
// ollama and llama-server on PATH) and skips the test when there are none.
// Bundle.LlamaServer and Bundle.Ollama start one server each on a free port
// of 127.0.0.1, in its own process group; the test's Cleanup kills the whole
// group (and every descendant found through /proc) with SIGKILL and waits
// for it. Server.Kill and Server.Restart are for crash and recovery tests.
// Bundle.WriteGGUF writes a random llama model, e.g. a big one that takes
// seconds to load. FINDINGS.md beside this file records what the real
// servers were seen to answer.
//
// The package holds no state but the cache of extracted bundles, one per
// tarball per process (the extraction itself happens once per machine).
package realserver

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables read by Find.
const (
	// EnvDir names a directory holding TarballName, TinyModel and
	// TinyBytesModel (e.g. /work/shared/realservers).
	EnvDir = "SWITCHYARD_REALSERVERS"
	// EnvModels names a directory holding TinyModel and TinyBytesModel, for
	// when the servers come from PATH.
	EnvModels = "SWITCHYARD_REALSERVERS_MODELS"
)

// File names inside the EnvDir directory.
const (
	TarballName    = "ollama-cpu-linux-amd64.tar.gz"
	TinyModel      = "tiny.gguf"
	TinyBytesModel = "tiny-bytes.gguf"
)

const skipMessage = "realserver: no real model servers: set " + EnvDir +
	" to a directory holding " + TarballName + ", " + TinyModel + " and " + TinyBytesModel +
	", or put ollama and llama-server on PATH (models then from " + EnvModels + ")"

// Bundle says where the server binaries and the tiny models are. A field is
// "" when that thing was not found; the methods that need it skip the test.
type Bundle struct {
	// OllamaBin is the ollama executable.
	OllamaBin string
	// LlamaServerBin is llama.cpp's llama-server.
	LlamaServerBin string
	// ModelsDir holds TinyModel and TinyBytesModel.
	ModelsDir string
}

// Find locates the real servers, extracting the bundle's tarball on first
// use, and skips t with one line saying what to install or set when there
// are none. A set but broken $SWITCHYARD_REALSERVERS fails t.
func Find(t testing.TB) *Bundle {
	t.Helper()
	if dir := os.Getenv(EnvDir); dir != "" {
		b, err := fromDir(dir)
		if err != nil {
			t.Fatalf("realserver: %s=%s: %v", EnvDir, dir, err)
		}
		return b
	}
	b := &Bundle{ModelsDir: os.Getenv(EnvModels)}
	b.OllamaBin, _ = exec.LookPath("ollama")
	b.LlamaServerBin, _ = exec.LookPath("llama-server")
	if b.OllamaBin == "" && b.LlamaServerBin == "" {
		t.Skip(skipMessage)
	}
	return b
}

// Tiny returns the absolute path of tiny.gguf, or skips t.
func (b *Bundle) Tiny(t testing.TB) string {
	t.Helper()
	return b.model(t, TinyModel)
}

// TinyBytes returns the absolute path of tiny-bytes.gguf (the tiny model
// that may emit invalid UTF-8), or skips t.
func (b *Bundle) TinyBytes(t testing.TB) string {
	t.Helper()
	return b.model(t, TinyBytesModel)
}

func (b *Bundle) model(t testing.TB, name string) string {
	t.Helper()
	if b.ModelsDir == "" {
		t.Skipf("realserver: no models: set %s (or %s) to a directory holding %s", EnvModels, EnvDir, name)
	}
	p, err := filepath.Abs(filepath.Join(b.ModelsDir, name))
	if err != nil {
		t.Fatalf("realserver: model path: %v", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("realserver: model %s missing: %v", name, err)
	}
	return p
}

// fromDir makes the Bundle of an $SWITCHYARD_REALSERVERS directory. A
// directory that already holds an extracted bundle/ is used as it is.
func fromDir(dir string) (*Bundle, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("abs: %w", err)
	}
	root := dir
	if !isFile(filepath.Join(dir, "bundle", "bin", "ollama")) {
		root, err = extractCached(filepath.Join(dir, TarballName))
		if err != nil {
			return nil, err
		}
	}
	b := &Bundle{
		OllamaBin:      filepath.Join(root, "bundle", "bin", "ollama"),
		LlamaServerBin: filepath.Join(root, "bundle", "lib", "ollama", "llama-server"),
		ModelsDir:      dir,
	}
	for _, p := range []string{b.OllamaBin, b.LlamaServerBin} {
		if !isFile(p) {
			return nil, fmt.Errorf("bundle lacks %s", p)
		}
	}
	return b, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// extracted caches, per tarball path, the directory it was extracted into,
// so that a test binary hashes and checks each tarball once.
var (
	extractMu sync.Mutex
	extracted = map[string]string{}
)

// extractCached extracts tarball once per machine into
// <user cache dir>/switchyard-realservers/<sha256 prefix>/ and returns that
// directory. Concurrent processes each extract into a temporary directory
// and rename it into place; the losers of the race use the winner's copy.
func extractCached(tarball string) (string, error) {
	extractMu.Lock()
	defer extractMu.Unlock()
	if dir, ok := extracted[tarball]; ok {
		return dir, nil
	}
	sum, err := fileSHA256(tarball)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	parent := filepath.Join(cache, "switchyard-realservers")
	dir := filepath.Join(parent, sum[:16])
	if !complete(dir) {
		if err := extractInto(tarball, parent, dir, sum); err != nil {
			return "", err
		}
	}
	extracted[tarball] = dir
	return dir, nil
}

const completeMarker = ".complete"

func complete(dir string) bool { return isFile(filepath.Join(dir, completeMarker)) }

func extractInto(tarball, parent, dir, sum string) error {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	removeStaleTemps(parent)
	tmp, err := os.MkdirTemp(parent, ".tmp-"+sum[:16]+"-")
	if err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := untar(tarball, tmp); err != nil {
		return fmt.Errorf("extract %s: %w", tarball, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("extract %s: %w", tarball, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), []byte(sum+"\n"), 0o644); err != nil {
		return fmt.Errorf("extract %s: %w", tarball, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if complete(dir) {
			return nil // another process won the race
		}
		return fmt.Errorf("extract %s: %w", tarball, err)
	}
	return nil
}

// removeStaleTemps removes temporary extraction directories left behind by
// processes that died more than an hour ago.
func removeStaleTemps(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".tmp-") {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("tarball: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash tarball: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// untar extracts a .tar.gz into dir, refusing entries and links that would
// land outside it.
func untar(tarball, dir string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		name, ok := inside(dir, h.Name)
		if !ok {
			return fmt.Errorf("tar entry %q escapes the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			err = writeEntry(name, tr, h.FileInfo().Mode().Perm())
		case tar.TypeSymlink:
			if filepath.IsAbs(h.Linkname) {
				return fmt.Errorf("tar symlink %q is absolute", h.Name)
			}
			if _, ok := inside(dir, filepath.Join(filepath.Dir(h.Name), h.Linkname)); !ok {
				return fmt.Errorf("tar symlink %q escapes the directory", h.Name)
			}
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				err = os.Symlink(h.Linkname, name)
			}
		case tar.TypeLink:
			target, ok := inside(dir, h.Linkname)
			if !ok {
				return fmt.Errorf("tar link %q escapes the directory", h.Name)
			}
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				err = os.Link(target, name)
			}
		}
		if err != nil {
			return fmt.Errorf("tar entry %q: %w", h.Name, err)
		}
	}
}

// inside joins a tar entry name to dir and reports whether it stays inside.
func inside(dir, name string) (string, bool) {
	rel := filepath.Clean(filepath.FromSlash(name))
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.Join(dir, rel), true
}

func writeEntry(name string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
