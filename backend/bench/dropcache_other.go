//go:build !linux

package bench

import "errors"

// dropCache is not available here: cold starts are measured warm.
func dropCache(string) error { return errors.ErrUnsupported }
