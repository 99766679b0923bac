package builtin

import (
	"os"
	"testing"

	"github.com/capstan-dev/capstan/procguard"
)

// TestMain wires the command supervisor in, as capstan's main does (through
// sandbox.Init): ExecRunner re-executes the test binary as the supervisor.
func TestMain(m *testing.M) {
	procguard.Init()
	os.Exit(m.Run())
}
