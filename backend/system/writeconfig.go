package system

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/switchyard/switchyard/backend/config"
)

// WriteConfig writes the config in force, when it came from discovery, as
// the config file at the default path (the one Switchyard reads and
// watches), and returns the path. It never overwrites: an existing file is
// an error wrapping fs.ErrExist. The demo's config is not written: its
// servers exist only while the demo runs. Once written, the file is the
// config (the watcher applies it).
func (s *System) WriteConfig() (string, error) {
	s.mu.Lock()
	source, cfg := s.source, s.cfg
	s.mu.Unlock()
	text := "# written by Switchyard from the servers it found at start: edit freely (docs/CONFIG.md)\n" + config.Render(cfg)
	path := config.DefaultPath(s.o.ConfigHome)
	switch source {
	case SourceFile:
		return "", fmt.Errorf("the config in force is a file already (%s): edit it", s.cfgPath)
	case SourceDemo:
		return "", errors.New("the demo's config names simulated servers that exist only while the demo runs: there is nothing to keep")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("write config %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%s exists already: Switchyard never overwrites it (%w)", path, fs.ErrExist)
	}
	if err != nil {
		return "", fmt.Errorf("write config %s: %w", path, err)
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write config %s: %w", path, err)
	}
	s.o.Logf("wrote the config in force to %s", path)
	return path, nil
}
