package github

import (
	"context"
	"os"
	"testing"

	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/proc"
)

// gitWorkDir makes a git repository whose remotes are name=url pairs.
func gitWorkDir(t *testing.T, remotes ...string) string {
	t.Helper()
	dir := t.TempDir()
	testenv.Git(t, dir, "init", "-q")
	for i := 0; i+1 < len(remotes); i += 2 {
		testenv.Git(t, dir, "remote", "add", remotes[i], remotes[i+1])
	}
	return dir
}

// gh's choice among remotes: the one `gh repo set-default` marked, else
// upstream, github, origin, then the others; only GitHub hosts count.
func TestRemoteRepoChoosesAsGHDoes(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		remotes []string
		ghHost  string
		want    string
	}{
		{[]string{"origin", "https://github.com/o/r.git"}, "", "o/r (from git remote origin)"},
		{[]string{"origin", "git@github.com:o/fork.git", "upstream", "ssh://git@ssh.github.com:443/up/r"}, "", "up/r (from git remote upstream)"},
		{[]string{"a", "https://gitlab.com/x/y", "b", "https://www.github.com/b/r/"}, "", "b/r (from git remote b)"},
		{[]string{"origin", "https://ghe.example.com/o/r.git"}, "ghe.example.com", "ghe.example.com/o/r (from git remote origin)"},
		{[]string{"origin", "https://ghe.example.com/o/r.git"}, "", "<nil>"},
		{[]string{"origin", "https://github.com/o/r.git"}, "ghe.example.com", "github.com/o/r (from git remote origin)"},
		{[]string{"origin", "/srv/git/r.git"}, "", "<nil>"},
	}
	git, err := proc.NewGit(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		got := "<nil>"
		if r := RemoteRepo(ctx, git, gitWorkDir(t, tc.remotes...), tc.ghHost); r != nil {
			got = r.Repo + " (from " + r.Source + ")"
		}
		if got != tc.want {
			t.Errorf("%v (GH_HOST %q): %s, want %s", tc.remotes, tc.ghHost, got, tc.want)
		}
	}
	wd := gitWorkDir(t, "origin", "https://github.com/o/fork", "upstream", "https://github.com/up/r")
	testenv.Git(t, wd, "config", "remote.origin.gh-resolved", "base")
	if r := RemoteRepo(ctx, git, wd, ""); r == nil || r.Repo != "o/fork" {
		t.Fatalf("gh-resolved: %+v", r)
	}
}
