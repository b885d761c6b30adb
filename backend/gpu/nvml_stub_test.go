//go:build !(linux && cgo)

package gpu

import "testing"

// TestStubNVML: a build without NVML reports no GPU and never fails.
func TestStubNVML(t *testing.T) {
	r := OpenNVML()
	snap, err := r.Read(t.Context())
	if err != nil || snap.Available || snap.Message != MessageNoNVML || snap.Devices == nil {
		t.Errorf("Read() = %+v, %v; want unavailable, %q", snap, err, MessageNoNVML)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
}
