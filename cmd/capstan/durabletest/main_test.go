// Package durabletest holds capstan's end-to-end tests of runs that
// survive being killed: local runs killed and resumed, and runs, issues
// and workers on a real Temporal dev server. They drive the capstan
// binary, built once for the test binary (with the race detector when the
// tests run with it), as a user's shell would.
package durabletest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/internal/fakegh"
	"github.com/capstan-dev/capstan/internal/statetest"
	"github.com/capstan-dev/capstan/journal"
)

// capstanBin is the capstan binary the tests run.
var capstanBin string

func TestMain(m *testing.M) {
	fakegh.Main() // the workflow tests re-execute this binary as a fake gh
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "capstan-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	capstanBin = filepath.Join(dir, "capstan")
	args := []string{"build", "-o", capstanBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/capstan-dev/capstan/cmd/capstan")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build capstan: %v\n%s", err, out)
		return 1
	}
	return statetest.Run(m)
}

// cliCommand is the capstan command with args, in a process group of its
// own (so a test can kill it with everything it started).
func cliCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(capstanBin, args...)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// captureConfigCLI runs capstan with args and returns its exit code,
// stdout and stderr.
func captureConfigCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), capstanBin, args...)
	// In a process group of its own, as a shell runs a command: what
	// capstan signals as its group never reaches the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("capstan %v: %v", args, err)
	}
	return 0, stdout.String(), stderr.String()
}

// exitUsage is capstan's exit code for a usage or configuration error.
const exitUsage = 2

func writeFiles(t *testing.T, files map[string]string) string { return clitest.WriteFiles(t, files) }

func testStore(t testing.TB) journal.Store { return clitest.Store(t) }

func sleepingAgent(t *testing.T, seconds int) string { return clitest.SleepingAgent(t, seconds) }

// pathWithCapstan is the environment with the built capstan first on
// PATH, for a test that pastes a printed command into a shell.
func pathWithCapstan() []string {
	return append(os.Environ(), "PATH="+filepath.Dir(capstanBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
}
