package scaleout

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The worker reads the refs it needs per iteration from the checkout's
// files instead of a git process per ref; what it reads is what git
// reads, loose or packed, and a ref that is not there is missing, not an
// error. Where the files do not settle it (a link in place of a ref, a
// value that is no object id) it asks git.
func TestReadRefAnswersAsGitDoes(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required")
	}
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "commit", "-q", "--allow-empty", "-m", "one")
	first := gitT(t, dir, "rev-parse", "HEAD")
	gitT(t, dir, "update-ref", "refs/remotes/origin/packed", first)
	gitT(t, dir, "pack-refs", "--all")
	gitT(t, dir, "commit", "-q", "--allow-empty", "-m", "two")
	second := gitT(t, dir, "rev-parse", "HEAD")
	w := &Activities{Root: t.TempDir()}
	ctx := context.Background()
	for _, c := range []struct {
		ref, want string
	}{
		{"HEAD", second},                      // HEAD → the loose refs/heads/main
		{"refs/heads/main", second},           // loose, newer than its packed line
		{"refs/remotes/origin/packed", first}, // packed only
		{"refs/remotes/origin/none", ""},      // missing
	} {
		got, found, err := w.readRef(ctx, dir, c.ref)
		if err != nil || found != (c.want != "") || got != c.want {
			t.Errorf("readRef(%s) = %q, %v, %v; want %q", c.ref, got, found, err, c.want)
		}
	}
	if _, _, ok := refFromFiles(filepath.Join(dir, ".git"), "refs/heads/../../config"); ok {
		t.Error("a ref name leaving refs/ was read from the files")
	}
	// A link where the branch's ref was: the files are not read through
	// it; git answers (it does not follow it into another repository
	// either: the ref is read as git reads it).
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte(first+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(dir, ".git", "refs", "heads", "linked")
	if err := os.Symlink(target, ref); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := refFromFiles(filepath.Join(dir, ".git"), "refs/heads/linked"); ok {
		t.Error("a ref that is a link was read from the files")
	}
	// Not a repository: an error, not a missing ref.
	if _, _, err := w.readRef(ctx, t.TempDir(), "HEAD"); err == nil {
		t.Error("readRef outside a repository: no error")
	}
}

// Clones run in the worker's Root with the pins read there once, as long
// as Root is in no repository; a repository made there since is noticed.
func TestOutsideRepositories(t *testing.T) {
	root := t.TempDir()
	if !outsideRepositories(filepath.Join(root, "a", "b")) {
		t.Fatal("a temp dir is in a repository")
	}
	gitT(t, root, "init", "-q")
	if outsideRepositories(filepath.Join(root, "a")) {
		t.Error("a directory under a repository's top level is outside repositories")
	}
	bare := t.TempDir()
	gitT(t, bare, "init", "-q", "--bare", ".")
	if outsideRepositories(bare) {
		t.Error("a bare repository is outside repositories")
	}
}
