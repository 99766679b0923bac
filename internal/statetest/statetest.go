// Package statetest points capstan's state directory (where run journals
// are kept) at a temporary directory for a test binary, so tests never
// write into the user's home.
package statetest

import (
	"os"
	"testing"

	"github.com/capstan-dev/capstan/journal"
)

// Run sets journal.EnvStateDir to a new temporary directory (inherited by
// subprocesses the tests start), runs the tests and removes it; it returns
// m.Run's exit code. Call it from TestMain: os.Exit(statetest.Run(m)).
func Run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "capstan-state-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	os.Setenv(journal.EnvStateDir, dir)
	return m.Run()
}
