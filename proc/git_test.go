package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/testenv"
)

// TestGitRunsNothingTheRepositoryNames: capstan's git reads, diffs,
// commits and checks out in a repository whose configuration names a
// program everywhere it can, and none of them runs; the same commands
// without the pins run them (the control).
func TestGitRunsNothingTheRepositoryNames(t *testing.T) {
	dir, marker := testenv.PoisonRepo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := NewGit(os.Environ(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status", "--porcelain"},
		{"rev-parse", "--is-shallow-repository"},
		{"log", "-1", "--format=%H %G?"},
		{"log", "-p", "-1"},
		{"show", "HEAD"},
		{"diff", "--no-ext-diff", "--no-textconv"},
		{"add", "-A"},
		{"commit", "-q", "-m", "two"},
		{"checkout", "-q", "-b", "other"},
		{"remote", "-v"},
	} {
		// A diff through a driver the repository names (log -p, show)
		// fails rather than run it.
		if _, err := g.Output(ctx, dir, args...); err != nil && args[0] != "diff" && args[0] != "show" && !slices.Contains(args, "-p") {
			t.Errorf("git %v: %v", args, err)
		}
	}
	// A diff that would need a driver fails rather than run it.
	_, _ = g.Output(ctx, dir, "diff", "HEAD~1")
	if m := testenv.PoisonMarker(marker); m != "" {
		t.Fatalf("capstan's git ran what the repository names:\n%s", m)
	}
	if out, err := g.Output(ctx, dir, "log", "--format=%s"); err != nil || strings.TrimSpace(string(out)) != "two\none" {
		t.Errorf("log after the commit = %q, %v", out, err)
	}
	// The control: plain git runs them.
	cmd := exec.Command("git", "-C", dir, "-c", "filter.evil.process=", "status", "--porcelain")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
	_ = cmd.Run()
	if testenv.PoisonMarker(marker) == "" {
		t.Fatal("control: plain git ran none of the repository's programs; the test proves nothing")
	}
}

// TestGitConfigEnvPinsAValidatorsGit: a command validator's own git
// status and log, given GitConfigEnv, run nothing the repository names.
func TestGitConfigEnvPinsAValidatorsGit(t *testing.T) {
	dir, marker := testenv.PoisonRepo(t)
	ctx := context.Background()
	g, err := NewGit(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	env := append(ForCommands(os.Environ(), nil), GitConfigEnv(ctx, g, dir)...)
	cmd := exec.Command("sh", "-c", "git status --porcelain && git log -1 --format=%G? && git add -A && git commit -q -m v")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("validator's git: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "M a.txt") {
		t.Errorf("git status missed the change:\n%s", out)
	}
	if m := testenv.PoisonMarker(marker); m != "" {
		t.Fatalf("the validator's git ran what the repository names:\n%s", m)
	}
}

// TestLookPathRefusesTheWorkDir: a git planted in a PATH entry inside the
// work dir is refused with a coded error, before a real git later on PATH;
// a PATH entry inside the work dir without the program is passed over.
func TestLookPathRefusesTheWorkDir(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	w := t.TempDir()
	venv := filepath.Join(w, ".venv", "bin")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	path := venv + string(filepath.ListSeparator) + filepath.Dir(real)
	if p, err := LookPath("git", path, w); err != nil || p != filepath.Join(filepath.Dir(real), "git") {
		t.Errorf("LookPath with an empty venv = %q, %v", p, err)
	}
	if err := os.WriteFile(filepath.Join(venv, "git"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = LookPath("git", path, w)
	if agenterr.CodeOf(err) != agenterr.CodeDependencyResolution || !strings.Contains(err.Error(), "inside the work dir") {
		t.Fatalf("LookPath with a planted git: %v", err)
	}
	// Through a symbolic link to the work dir, and by a path with a slash.
	link := filepath.Join(t.TempDir(), "w")
	if err := os.Symlink(w, link); err != nil {
		t.Fatal(err)
	}
	if _, err := LookPath("git", filepath.Join(link, ".venv", "bin"), w); err == nil {
		t.Error("a PATH entry linked into the work dir was accepted")
	}
	if _, err := LookPath(filepath.Join(venv, "git"), "", w); err == nil {
		t.Error("a program named inside the work dir was accepted")
	}
	if _, err := NewGit([]string{"PATH=" + path}, w); err == nil {
		t.Error("NewGit accepted the planted git")
	}
	if _, err := LookPath("no-such-program-capstan", path, w); !IsProgramNotFound(err) {
		t.Errorf("missing program: %v", err)
	}
}

// gitIn runs plain git (the test's own, not capstan's) in dir.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestGitIgnoresAPlantedWorktreeAndURLRewrite: a work dir's .git/config
// whose core.worktree points at another directory does not change what
// capstan's git reads (a dirty work dir stays dirty, the other
// directory's files are not seen), and one whose url.<base>.insteadOf
// rewrites the remote makes capstan's push refuse, naming the key, rather
// than push where the model points it; plain git follows both (the
// control).
func TestGitIgnoresAPlantedWorktreeAndURLRewrite(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx := context.Background()
	dir, elsewhere := t.TempDir(), t.TempDir()
	gitIn(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644)
	gitIn(t, dir, "add", "a.txt")
	gitIn(t, dir, "commit", "-q", "-m", "one")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("changed"), 0o644) // uncommitted work
	os.WriteFile(filepath.Join(elsewhere, "outside.txt"), []byte("x"), 0o644)
	gitIn(t, dir, "config", "core.worktree", elsewhere)
	if out := gitIn(t, dir, "status", "--porcelain"); !strings.Contains(out, "outside.txt") {
		t.Fatalf("control: plain git did not follow core.worktree: %q", out)
	}
	g, err := NewGit(os.Environ(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := g.Output(ctx, dir, "status", "--porcelain")
	if err != nil || !strings.Contains(string(out), "a.txt") || strings.Contains(string(out), "outside.txt") {
		t.Fatalf("capstan's git status with a planted core.worktree = %q, %v; want the work dir's own change", out, err)
	}
	// A validator's git gets the same pin through its environment.
	cmd := exec.Command("git", "-C", dir, "status", "--porcelain")
	cmd.Env = append(append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null"), GitConfigEnv(ctx, g, dir)...)
	if b, err := cmd.Output(); err != nil || !strings.Contains(string(b), "a.txt") || strings.Contains(string(b), "outside.txt") {
		t.Fatalf("a validator's git status with a planted core.worktree = %q, %v", b, err)
	}
	gitIn(t, dir, "config", "--unset", "core.worktree")

	remote, evil := filepath.Join(t.TempDir(), "remote.git"), filepath.Join(t.TempDir(), "evil.git")
	gitIn(t, t.TempDir(), "init", "-q", "--bare", remote)
	gitIn(t, t.TempDir(), "init", "-q", "--bare", evil)
	gitIn(t, dir, "config", "url."+evil+".insteadOf", remote)
	_, err = g.WithUserCredentials(ctx, os.Environ()).Output(ctx, dir, "push", "-q", remote, "HEAD:refs/heads/run")
	if err == nil || !strings.Contains(err.Error(), "rewrites remote URLs") || !strings.Contains(err.Error(), "insteadof") {
		t.Fatalf("push through a planted url rewrite: %v", err)
	}
	if heads := gitIn(t, evil, "for-each-ref"); heads != "" {
		t.Fatalf("capstan's git pushed where the rewrite points: %q", heads)
	}
	// The printed fix, run as printed, removes the rewrite; the push then
	// reaches the real remote.
	_, fix, _ := strings.Cut(err.Error(), "remove it with ")
	fix, _, _ = strings.Cut(fix, " (put")
	if out, err := exec.Command("sh", "-c", fix).CombinedOutput(); err != nil {
		t.Fatalf("the printed fix %q: %v\n%s", fix, err, out)
	}
	if _, err := g.WithUserCredentials(ctx, os.Environ()).Output(ctx, dir, "push", "-q", remote, "HEAD:refs/heads/run"); err != nil {
		t.Fatalf("push after the fix: %v", err)
	}
	if heads := gitIn(t, remote, "for-each-ref", "--format=%(refname)"); heads != "refs/heads/run" {
		t.Fatalf("the real remote has %q", heads)
	}
}

// TestGitWithRepoPinsReadsTheConfigurationOnce: a Git given a
// repository's pins (the scale-out worker's, for a checkout whose
// configuration it restores before each use) pins exactly the driver keys
// that reading the configuration before each command pins, and runs
// nothing the repository names; in another directory it reads that one's
// configuration as usual.
func TestGitWithRepoPinsReadsTheConfigurationOnce(t *testing.T) {
	dir, marker := testenv.PoisonRepo(t)
	ctx := context.Background()
	g, err := NewGit(os.Environ(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pinned := g.WithRepoPins(g.ReadRepoPins(ctx, dir))
	want := g.config(ctx, dir)
	if got := pinned.config(ctx, dir); !slices.Equal(got, want) || len(want) <= len(pinnedConfig) {
		t.Fatalf("pins given once:\n%v\nread before the command:\n%v", got, want)
	}
	if got, want := pinned.keysOf(ctx, dir), g.repoKeys(ctx, dir); !slices.Equal(got, want) || len(want) == 0 {
		t.Fatalf("keys given once %v, read before the command %v", got, want)
	}
	for _, args := range [][]string{{"status", "--porcelain"}, {"add", "-A"}, {"commit", "-q", "-m", "two"}, {"checkout", "-q", "-b", "other"}} {
		if _, err := pinned.Output(ctx, dir, args...); err != nil {
			t.Errorf("git %v: %v", args, err)
		}
	}
	if m := testenv.PoisonMarker(marker); m != "" {
		t.Fatalf("capstan's git ran what the repository names:\n%s", m)
	}
	other, _ := testenv.PoisonRepo(t)
	if got := pinned.config(ctx, other); !slices.Equal(got, g.config(ctx, other)) {
		t.Fatalf("another repository's pins: %v", got)
	}
}

// TestLookPathOfARememberedProgramRefusesWhatANewSearchRefuses: a program
// found once is remembered for the next lookup of the same PATH, and the
// next lookup still refuses what a first one would: the program replaced
// by a link into the work dir, the program's own entry lying inside the
// next lookup's work dir, and a program planted in an entry inside the work
// dir before the remembered one's.
func TestLookPathOfARememberedProgramRefusesWhatANewSearchRefuses(t *testing.T) {
	bin := t.TempDir()
	prog := filepath.Join(bin, "capstan-remembered")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := t.TempDir()
	if p, err := LookPath("capstan-remembered", bin, w); err != nil || p != prog {
		t.Fatalf("first lookup = %q, %v", p, err)
	}
	// The remembered program's entry is the next lookup's work dir.
	if _, err := LookPath("capstan-remembered", bin, bin); agenterr.CodeOf(err) != agenterr.CodeDependencyResolution {
		t.Errorf("the entry inside the work dir: %v", err)
	}
	// A program planted in an entry inside the work dir, before it.
	venv := filepath.Join(w, "bin")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	path := venv + string(filepath.ListSeparator) + bin
	if p, err := LookPath("capstan-remembered", path, w); err != nil || p != prog {
		t.Fatalf("lookup with an empty entry in the work dir = %q, %v", p, err)
	}
	if err := os.WriteFile(filepath.Join(venv, "capstan-remembered"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := LookPath("capstan-remembered", path, w); agenterr.CodeOf(err) != agenterr.CodeDependencyResolution {
		t.Errorf("a program planted before the remembered one: %v", err)
	}
	// The program replaced by a link into the work dir.
	planted := filepath.Join(w, "planted")
	if err := os.WriteFile(planted, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(planted, prog); err != nil {
		t.Fatal(err)
	}
	if _, err := LookPath("capstan-remembered", bin, w); agenterr.CodeOf(err) != agenterr.CodeDependencyResolution {
		t.Errorf("the program replaced by a link into the work dir: %v", err)
	}
	// Gone: not found, as a new search says.
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	if _, err := LookPath("capstan-remembered", bin, w); !IsProgramNotFound(err) {
		t.Errorf("the program removed: %v", err)
	}
}
