//go:build unix

package history

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on f, without waiting: it
// fails with errJournalHeld when another open file holds one, in this
// process or another. Closing f lets go of it, as does the process's end,
// a kill -9 included.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errJournalHeld
		default:
			return err
		}
	}
}
