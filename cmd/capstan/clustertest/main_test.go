// Package clustertest holds capstan's end-to-end tests of runs, issues and
// workers on a real Temporal dev server: workers killed mid-run, an API
// outage mid-iteration, cancel and resume of a run that lives on Temporal,
// issue workflows as Temporal workflows. They drive the capstan binary,
// built once for the test binary (with the race detector when the tests
// run with it), as a user's shell would. Local runs that are killed and
// resumed are tested in package durabletest.
package clustertest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/journal"
)

// capstanBin is the capstan binary the tests run.
var capstanBin clitest.Binary

func TestMain(m *testing.M) {
	testenv.FakeGHMain() // the workflow tests re-execute this binary as a fake gh
	os.Exit(clitest.RunWithCapstan(m, raceEnabled, &capstanBin))
}

// cliCommand is the capstan command with args, in a process group of its
// own (so a test can kill it with everything it started).
func cliCommand(args ...string) *exec.Cmd { return capstanBin.Command(args...) }

// captureConfigCLI runs capstan with args and returns its exit code,
// stdout and stderr.
func captureConfigCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return capstanBin.Capture(t, args...)
}

func writeFiles(t *testing.T, files map[string]string) string { return clitest.WriteFiles(t, files) }

func testStore(t testing.TB) journal.Store { return clitest.Store(t) }

func sleepingAgent(t *testing.T, seconds int) string { return clitest.SleepingAgent(t, seconds) }

func readFileT(t testing.TB, p string) string { return clitest.ReadFile(t, p) }

// pathWithCapstan is the environment with the built capstan first on
// PATH, for a test that pastes a printed command into a shell.
func pathWithCapstan() []string { return capstanBin.PathEnv() }

// exitUsage is capstan's exit code for a usage or configuration error.
const exitUsage = 2
