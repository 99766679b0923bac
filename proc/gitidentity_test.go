package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// userEnv is an environment whose HOME is a new folder, with no system
// git configuration, plus extra.
func userEnv(t *testing.T, gitconfig string, extra ...string) []string {
	t.Helper()
	home := t.TempDir()
	if gitconfig != "" {
		if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(gitconfig), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1"}, extra...)
}

// The identity the model's git commits as in a sandbox (whose HOME is
// private) is the user's: from ~/.gitconfig, or the environment's
// GIT_AUTHOR_NAME, … first; none when the user has none; and a
// repository that sets its own says so (local), whatever the user's.
func TestCommitIdentity(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := t.Context()
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	global := "[user]\n\tname = Ada Lovelace\n\temail = ada@example.invalid\n"
	want := []string{"GIT_AUTHOR_NAME=Ada Lovelace", "GIT_AUTHOR_EMAIL=ada@example.invalid",
		"GIT_COMMITTER_NAME=Ada Lovelace", "GIT_COMMITTER_EMAIL=ada@example.invalid"}
	for name, c := range map[string]struct {
		env  []string
		want []string
	}{
		"global configuration": {userEnv(t, global), want},
		"environment first": {userEnv(t, global, "GIT_AUTHOR_NAME=Grace", "GIT_COMMITTER_NAME=Grace"), []string{"GIT_AUTHOR_NAME=Grace",
			"GIT_AUTHOR_EMAIL=ada@example.invalid", "GIT_COMMITTER_NAME=Grace", "GIT_COMMITTER_EMAIL=ada@example.invalid"}},
		"no identity":         {userEnv(t, ""), nil},
		"only a name":         {userEnv(t, "[user]\n\tname = Ada\n"), nil},
		"a name of two lines": {userEnv(t, "[user]\n\tname = \"Ada\\nGIT_DIR=/x\"\n\temail = ada@example.invalid\n"), nil},
		"only in the env":     {userEnv(t, "", "GIT_AUTHOR_NAME=G", "GIT_AUTHOR_EMAIL=g@x", "GIT_COMMITTER_NAME=G", "GIT_COMMITTER_EMAIL=g@x"), []string{"GIT_AUTHOR_NAME=G", "GIT_AUTHOR_EMAIL=g@x", "GIT_COMMITTER_NAME=G", "GIT_COMMITTER_EMAIL=g@x"}},
	} {
		g, err := NewGit(c.env, repo)
		if err != nil {
			t.Fatal(err)
		}
		got, local := g.CommitIdentity(ctx, repo, c.env)
		if local || !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q local %v, want %q", name, got, local, c.want)
		}
	}
	for _, kv := range [][]string{{"user.name", "Repo Bot"}, {"user.email", "bot@example.invalid"}} {
		if out, err := exec.Command("git", "-C", repo, "config", kv[0], kv[1]).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	env := userEnv(t, global)
	g, err := NewGit(env, repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, local := g.CommitIdentity(ctx, repo, env); !local || got != nil {
		t.Errorf("a repository with its own identity: got %q local %v", got, local)
	}
}
