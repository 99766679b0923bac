package builtin

import (
	"os"
	"testing"

	"github.com/capstan-dev/capstan/proc"
)

// TestMain wires the command supervisor in, as capstan's main does (through
// sandbox.Init): ExecRunner re-executes the test binary as the supervisor.
func TestMain(m *testing.M) {
	proc.InitSupervisor()
	os.Exit(m.Run())
}
