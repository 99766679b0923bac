package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/proc"
)

// TestGitCleanSeesHiddenWork: work the model hid from git status — a
// changed file marked skip-worktree, another marked assume-unchanged, a
// new file behind a pattern it added to .git/info/exclude — fails the
// git-clean validator as git-dirty, naming each path in the output and in
// the extracted params. Without hidden work the validator passes, and a
// pattern the exclude file had before the validator was made (the user's)
// hides nothing.
func TestGitCleanSeesHiddenWork(t *testing.T) {
	dir := gitRepo(t)
	write(t, dir, "untouched.txt", "u\n")
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "commit", "-qm", "more")
	write(t, filepath.Join(dir, ".git", "info"), "exclude", "# mine\n*.local\n")
	write(t, dir, "editor.local", "the user's own ignored file\n")
	g, err := proc.NewGit(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(t, ValidatorConfig{Validators: registryValidators(), WorkDir: dir, Git: g})
	conds := []agentdir.CompletionCondition{{Validator: "git-clean"}}
	ctx := context.Background()
	if r, err := v.Validate(ctx, conds); err != nil || !r.Valid {
		t.Fatalf("clean repo: %+v %v", r.Output, err)
	}
	// The model's hiding.
	write(t, dir, "main.go", "package main // cheated\n")
	run(t, dir, "git", "update-index", "--skip-worktree", "main.go")
	write(t, dir, "old name.txt", "changed\n")
	run(t, dir, "git", "update-index", "--assume-unchanged", "old name.txt")
	write(t, filepath.Join(dir, ".git", "info"), "exclude", "# mine\n*.local\nsecret-work/\n")
	write(t, dir, "secret-work/plan.md", "hidden\n")
	if out, _ := runOut(dir, "git", "status", "--porcelain"); out != "" {
		t.Fatalf("the setup hides nothing from git status: %q", out)
	}
	r, err := v.Validate(ctx, conds)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid || r.Pattern != "git-dirty" {
		t.Fatalf("hidden work passed git-clean: %+v", r)
	}
	for _, want := range []string{" M main.go", " M old name.txt", "?? secret-work/plan.md"} {
		if !strings.Contains(r.Output.Stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.Output.Stdout)
		}
	}
	for _, want := range []string{"main.go (skip-worktree)", "old name.txt (assume-unchanged)", "secret-work/plan.md (info/exclude)"} {
		if !strings.Contains(r.Output.Stderr, want) {
			t.Errorf("note lacks %q:\n%s", want, r.Output.Stderr)
		}
	}
	if strings.Contains(r.Output.Stdout, "editor.local") {
		t.Errorf("the user's own exclude pattern was reported:\n%s", r.Output.Stdout)
	}
	changed, _ := r.Params["changedFiles"].([]string)
	if !slices.Contains(changed, "main.go") || !slices.Contains(changed, "old name.txt") {
		t.Errorf("changedFiles = %q", changed)
	}
}

// runOut runs a command in dir and returns its trimmed standard output.
func runOut(dir string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}
