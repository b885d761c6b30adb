//go:build unix

package bench

import (
	"fmt"
	"syscall"
)

// raiseFDLimit raises the soft RLIMIT_NOFILE to at least need (up to the
// hard limit) and returns the soft limit in force. It fails when the hard
// limit is below need.
func raiseFDLimit(need uint64) (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if uint64(rl.Cur) >= need {
		return uint64(rl.Cur), nil
	}
	if uint64(rl.Max) < need {
		return uint64(rl.Cur), fmt.Errorf("need %d open files, the hard limit is %d (raise it with ulimit -Hn)", need, rl.Max)
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return uint64(rl.Cur), nil
}
