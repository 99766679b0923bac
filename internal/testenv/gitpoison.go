package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// PoisonRepo makes a git repository in a new temporary directory, with
// one commit and a modified file (so status, diff and log have work to
// do), and poisons it (see Poison). It skips the test when git is
// missing, and fails it in CI.
func PoisonRepo(t testing.TB) (dir, marker string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
	dir = t.TempDir()
	Git(t, dir, "init", "-q", ".")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "add", "-A")
	Git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
	marker = Poison(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, marker
}

// Poison writes, into the git repository at dir, the configuration a
// model would: every program it can name — gpg, fsmonitor, hooks, a
// filter, an external diff, a textconv, a merge driver, a credential
// helper, a pager, an editor, an ssh command — becomes a script that
// appends to the returned marker file and fails. The attributes that
// select the filter and drivers for every file go to .git/info/attributes.
func Poison(t testing.TB, dir string) (marker string) {
	t.Helper()
	marker = filepath.Join(t.TempDir(), "marker")
	script := filepath.Join(t.TempDir(), "evil.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$0 $*\" >> '"+marker+"'\ncat >/dev/null 2>&1\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "info", "attributes"), []byte("* filter=evil diff=evil merge=evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"gpg.program", script}, {"gpg.ssh.program", script}, {"log.showSignature", "true"}, {"commit.gpgSign", "true"},
		{"core.fsmonitor", script}, {"filter.evil.clean", script}, {"filter.evil.smudge", script},
		{"filter.evil.process", script}, {"filter.evil.required", "true"}, {"diff.external", script},
		{"diff.evil.textconv", script}, {"diff.evil.command", script}, {"merge.evil.driver", script},
		{"credential.helper", script}, {"credential.https://example.com.helper", script}, {"core.pager", script},
		{"pager.log", script}, {"core.editor", script}, {"core.sshCommand", script}, {"core.askPass", script},
		{"user.name", "t"}, {"user.email", "t@t"},
	} {
		Git(t, dir, "config", kv[0], kv[1])
	}
	hooks := filepath.Join(dir, ".git", "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-checkout", "reference-transaction", "pre-auto-gc", "post-index-change"} {
		if err := os.WriteFile(filepath.Join(hooks, h), []byte("#!/bin/sh\necho hook-"+h+" >> '"+marker+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return marker
}

// Git runs git in dir without the user's or the system's configuration,
// failing the test when it fails.
func Git(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// PoisonMarker is what the poisoned programs wrote to marker ("" when none
// ran).
func PoisonMarker(marker string) string {
	b, _ := os.ReadFile(marker)
	return string(b)
}
