package verdict

import (
	"os"
	"testing"

	"github.com/capstan-dev/capstan/sandbox"
)

// TestMain wires the sandbox helper in, as capstan's main does: sandboxed
// validator commands re-execute the test binary as their helper.
func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}
