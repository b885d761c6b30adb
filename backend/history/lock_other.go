//go:build !unix

package history

import (
	"errors"
	"os"
)

// lockFile: where this build can't lock a file, a Store works without a
// journal, committing each record before Record returns.
func lockFile(*os.File) error { return errors.ErrUnsupported }
