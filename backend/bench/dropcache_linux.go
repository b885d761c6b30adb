package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropCache asks the kernel to drop path's pages from its page cache, so
// that the next open reads it from disk: a cold start without dropping
// the whole machine's cache.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
