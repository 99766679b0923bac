package scaleout

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
)

// A work dir whose repository has no commit is refused with a hint that,
// pasted, makes the commit the run's branch starts from.
func TestNoCommitHintWorks(t *testing.T) {
	def, err := agent.LoadPinned(filepath.Join("..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	wd := t.TempDir()
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
