//go:build !unix

package history

import (
	"errors"
	"time"
)

// cpuTime is not measured here: BenchmarkRecordCPU reports 0.
func cpuTime() time.Duration { return 0 }

// mkfifo: no named pipes to make here.
func mkfifo(string) error { return errors.ErrUnsupported }
