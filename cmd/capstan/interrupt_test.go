package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/capstan-dev/capstan/verify"
)

// Ctrl-C (SIGINT to the capstan process) while the test baseline runs
// ends the run as canceled with exit 130 and the printed resume command,
// pasted, takes the baseline again and completes the run.
func TestInterruptDuringTheBaselineIsResumable(t *testing.T) {
	needSandbox(t)
	needSystemPytest(t)
	repo, script := fixRepo(t, "pytest")
	// The baseline waits until the test lets it go: the first run is
	// interrupted while it waits, the resumed one finds the file.
	release := filepath.Join(t.TempDir(), "release")
	tests := "tests=while ! test -e " + verify.ShellQuote(release) + "; do sleep 0.1; done; python3 -m pytest -v -p no:cacheprovider"
	cmd := cliCommand("fix", "make the failing tests pass", "--check", tests, "--model", "script:"+script)
	cmd.Dir = repo
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var out strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "tests-pass: while") {
			break // the baseline's validator runs
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("Ctrl-C during the baseline: %v, want exit 130\n%s", err, out.String())
	}
	for _, want := range []string{"NOT COMPLETED  canceled", "error CANCELED: run canceled (interrupted)", "(recoverable: true)"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	resume := "capstan resume " + pastedCommand(t, out.String(), "continue with: capstan resume ")
	code, rout := pasteShell(t, t.TempDir())(resume)
	if code != 0 || !strings.Contains(rout, "COMPLETED  completed") || !strings.Contains(rout, "2 ran (0 passed, 2 failed)") {
		t.Fatalf("%s: exit %d\n%s\nfirst run:\n%s", resume, code, rout, out.String())
	}
}
