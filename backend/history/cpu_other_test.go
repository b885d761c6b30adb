//go:build !unix

package history

import "time"

// cpuTime is not measured here: BenchmarkRecordCPU reports 0.
func cpuTime() time.Duration { return 0 }
