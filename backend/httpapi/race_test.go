//go:build race

package httpapi

// raceEnabled: the race detector drops some of what goes into a
// sync.Pool on purpose, so allocation counts are not this build's to check.
const raceEnabled = true
