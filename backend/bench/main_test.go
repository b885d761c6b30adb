package bench

import (
	"fmt"
	"os"
	"testing"
)

// TestMain plays a bench child when the processes section started this
// test binary as one (RunChild), and runs the tests otherwise.
func TestMain(m *testing.M) {
	if played, err := RunChild(); played {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
