package scaleout

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agenterr"
)

// A work dir whose repository has no commit is refused with a hint that,
// pasted, makes the commit the run's branch starts from.
func TestNoCommitHintWorks(t *testing.T) {
	def, err := agent.LoadPinned(filepath.Join("..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	wd := filepath.Join(t.TempDir(), "my work") // the hint quotes it
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, wd, "init", "-q")
	if err := os.WriteFile(filepath.Join(wd, "notes.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = PrepareRun(context.Background(), Submission{Agent: def, WorkDir: wd})
	if err == nil {
		t.Fatal("a repository without a commit was accepted")
	}
	_, hint, ok := strings.Cut(err.Error(), "commit the work dir's files first")
	if !ok {
		t.Fatalf("no command in %v", err)
	}
	hint = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(hint, ": "), " ("), ")")
	cmd := exec.Command("sh", "-c", hint)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", hint, err, out)
	}
	if _, err := PrepareRun(context.Background(), Submission{Agent: def, WorkDir: wd}); err != nil {
		t.Fatalf("after the hint: %v", err)
	}
}

// A work dir inside a repository is refused with the repository's top as
// the --workdir to pass, quoted for the shell.
func TestInsideARepositoryHintIsQuoted(t *testing.T) {
	def, err := agent.LoadPinned(filepath.Join("..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(t.TempDir(), "my repo")
	sub := filepath.Join(top, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, top, "init", "-q")
	_, err = PrepareRun(context.Background(), Submission{Agent: def, WorkDir: sub})
	_, word, ok := strings.Cut(fmt.Sprint(err), "hint: pass --workdir ")
	if !ok {
		t.Fatalf("no --workdir hint in %v", err)
	}
	out, err := exec.Command("sh", "-c", "printf %s "+word).Output()
	if err != nil || string(out) != top {
		t.Fatalf("the hint's --workdir %s is, pasted, %q (%v), want %q", word, out, err, top)
	}
}

// A run whose workflow failed on its worker is reported with the worker's
// message and a capstan code, without Temporal's wrappers.
func TestRunFailedIsACapstanError(t *testing.T) {
	for _, tc := range []struct {
		err      error
		code     string
		message  string
		withHint bool
	}{
		{temporal.NewNonRetryableApplicationError("work dir /w is not a directory on the worker", ErrTypeNoWorkDir, os.ErrNotExist),
			agenterr.CodeConfigurationValidation, "run r1 failed on its worker: work dir /w is not a directory on the worker", true},
		{temporal.NewNonRetryableApplicationError("UNKNOWN_PROVIDER: no provider nope", agenterr.CodeUnknownProvider, nil),
			agenterr.CodeUnknownProvider, "run r1 failed on its worker: no provider nope", false},
		{temporal.NewNonRetryableApplicationError("branch moved", ErrTypeConflict, nil),
			agenterr.CodeExternalState, "run r1 failed on its worker: branch moved", false},
	} {
		err := runFailed("r1", fmt.Errorf("workflow execution error: %w", tc.err))
		e := agenterr.From(err)
		if e == nil || e.Code != tc.code || e.Message != tc.message || (e.Hint != "") != tc.withHint {
			t.Errorf("%v: got %v", tc.err, err)
		}
		if strings.Contains(err.Error(), "(type: ") || strings.Contains(err.Error(), "workflow execution error") {
			t.Errorf("Temporal's chain in %v", err)
		}
	}
}
