package clitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/capstan-dev/capstan/internal/statetest"
)

// Binary is the path of a capstan binary built for a test package, which
// its tests run as a user's shell would.
type Binary string

// BuildCapstan builds the capstan command into dir, with the race detector
// when race is set (a test package passes whether it was itself built with
// it), using the test binary's build cache.
func BuildCapstan(dir string, race bool) (Binary, error) {
	bin := filepath.Join(dir, "capstan")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	build := statetest.GoCommand(append(args, "github.com/capstan-dev/capstan/cmd/capstan")...)
	if out, err := build.CombinedOutput(); err != nil {
		return "", errors.New("build capstan: " + err.Error() + "\n" + string(out))
	}
	return Binary(bin), nil
}

// Command is the capstan command with args, in a process group of its own
// (so a test can kill it with everything it started).
func (b Binary) Command(args ...string) *exec.Cmd {
	cmd := exec.Command(string(b), args...)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Capture runs capstan with args and returns its exit code, stdout and
// stderr.
func (b Binary) Capture(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), string(b), args...)
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

// PathEnv is the environment with the binary's directory first on PATH,
// for a test that pastes a printed command into a shell.
func (b Binary) PathEnv() []string {
	return append(os.Environ(), "PATH="+filepath.Dir(string(b))+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// ExitCode is the exit code of a command's error from Run or Wait: 0 for
// nil, -1 when the command did not exit on its own.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	return -1
}

// HasLine reports whether a line of s matches the regular expression
// pattern.
func HasLine(s, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, line := range strings.Split(s, "\n") {
		if re.MatchString(line) {
			return true
		}
	}
	return false
}

// RunWithCapstan runs a test package's tests with a capstan binary built
// for them into a temporary directory (removed afterwards), stored in
// *bin first, and the test binary's own state directory (statetest.Run).
// Call it from TestMain: os.Exit(clitest.RunWithCapstan(m, raceEnabled, &capstanBin)).
func RunWithCapstan(m *testing.M, race bool, bin *Binary) int {
	dir, err := os.MkdirTemp("", "capstan-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = BuildCapstan(dir, race); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return statetest.Run(m)
}
