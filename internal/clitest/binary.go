package clitest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testenv"
)

// Binary is the path of a capstan binary built for a test package, which
// its tests run as a user's shell would.
type Binary string

// capstanPkg is the capstan command's package.
const capstanPkg = "github.com/capstan-dev/capstan/cmd/capstan"

// binKeep is how long a built binary nobody has used is kept.
const binKeep = 24 * time.Hour

// BuildCapstan returns the capstan command built from this source tree,
// with the race detector when race is set (a test package passes whether
// it was itself built with it), using the test binary's build cache. The
// binary is shared: it is kept in a directory of this user's in the
// system's temporary directory, named by the build ID that go list gives
// the command's main package (which changes with any source file of it or
// of its dependencies) and the go flags, so the test packages of one
// go test run — and later runs of the same source — link it once, not
// once per package. A lock file keeps two packages from building the same
// binary at once; binaries unused for a day are removed.
func BuildCapstan(race bool) (Binary, error) {
	root := filepath.Join(os.TempDir(), fmt.Sprintf("capstan-test-bin-%d", os.Getuid()))
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("build capstan: %w", err)
	}
	key, err := capstanKey(race)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, key)
	bin := filepath.Join(dir, "capstan")
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("build capstan: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("build capstan: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too
	now := time.Now()
	_ = os.Chtimes(lock.Name(), now, now) // in use: kept by removeUnused
	if _, err := os.Stat(bin); err == nil {
		_ = os.Chtimes(dir, now, now)
		return Binary(bin), nil
	}
	removeUnused(root, now)
	tmp, err := os.MkdirTemp(root, key+".new-")
	if err != nil {
		return "", fmt.Errorf("build capstan: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := []string{"build", "-o", filepath.Join(tmp, "capstan")}
	if race {
		args = append(args, "-race")
	}
	build := testenv.GoCommand(append(args, capstanPkg)...)
	if out, err := build.CombinedOutput(); err != nil {
		return "", errors.New("build capstan: " + err.Error() + "\n" + string(out))
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another package built it meanwhile (its lock file had been
		// removed as unused): either binary is the same.
		if _, statErr := os.Stat(bin); statErr != nil {
			return "", fmt.Errorf("build capstan: %w", err)
		}
	}
	return Binary(bin), nil
}

// capstanKey names the capstan binary that this source tree, race and the
// go flags build.
func capstanKey(race bool) (string, error) {
	args := []string{"list", "-export", "-f", "{{.BuildID}}"}
	if race {
		args = append(args, "-race")
	}
	out, err := testenv.GoCommand(append(args, capstanPkg)...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, exit.Stderr)
		}
		return "", fmt.Errorf("build capstan: go list: %w", err)
	}
	goflags, err := testenv.GoCommand("env", "GOFLAGS", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("build capstan: go env: %w", err)
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\n%s\nrace=%t", out, goflags, race)))
	return hex.EncodeToString(sum[:12]), nil
}

// removeUnused removes the binaries under root (and their lock files) not
// used for binKeep. A test package using one touches it first, so only a
// binary of a source tree nobody has tested for a day goes.
func removeUnused(root string, now time.Time) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > binKeep {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
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

// RunWithCapstan runs a test package's tests with the capstan binary of
// this source tree (BuildCapstan), stored in *bin first, and the test
// binary's own state directory (testenv.Run).
// Call it from TestMain: os.Exit(clitest.RunWithCapstan(m, raceEnabled, &capstanBin)).
func RunWithCapstan(m *testing.M, race bool, bin *Binary) int {
	var err error
	if *bin, err = BuildCapstan(race); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return testenv.Run(m)
}
