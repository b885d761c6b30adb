//go:build !(linux && cgo)

package gpu

import (
	"context"
	"runtime"
	"time"
)

// NVML stands in for the NVML reader in builds without it (not Linux, or
// cgo disabled): go-nvml needs cgo and Linux's dynamic loader. It always
// reports MessageNoNVML. It is safe for concurrent use; the zero value is
// ready.
type NVML struct{}

var _ Reader = (*NVML)(nil)

// WhyNoNVML says why this build reads no GPU; "" in a build with NVML.
func WhyNoNVML() string {
	if runtime.GOOS != "linux" {
		return "NVML is read on Linux only"
	}
	return "this binary was built without cgo (CGO_ENABLED=0: no C compiler when it was built); build it again with gcc installed (make run installs it)"
}

// OpenNVML returns the stub reader.
func OpenNVML() *NVML { return &NVML{} }

// Read reports no GPU.
func (*NVML) Read(context.Context) (Snapshot, error) {
	return Snapshot{Message: MessageNoNVML, Devices: []Device{}, At: time.Now()}, nil
}

// Close does nothing.
func (*NVML) Close() error { return nil }
