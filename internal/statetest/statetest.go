// Package statetest points capstan's state directory (where run journals
// are kept) and the user config directory at temporary directories for a
// test binary, so tests never write into the user's home nor read the
// user's own defaults.
package statetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/journal"
)

// Run sets journal.EnvStateDir to a new temporary directory and
// XDG_CONFIG_HOME to an empty one (both inherited by subprocesses the
// tests start), runs the tests and removes them; it returns m.Run's exit
// code. Call it from TestMain: os.Exit(statetest.Run(m)).
func Run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "capstan-state-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	state, cfg := filepath.Join(dir, "state"), filepath.Join(dir, "config")
	for _, d := range []string{state, cfg} {
		if err := os.Mkdir(d, 0o700); err != nil {
			panic(err)
		}
	}
	os.Setenv(journal.EnvStateDir, state)
	os.Setenv("XDG_CONFIG_HOME", cfg)
	return m.Run()
}
