package github

import (
	"bufio"
	"bytes"
	"context"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/proc"
)

// Repo is the repository every gh call capstan itself makes names with
// --repo (the closure's label and close calls, github_read, an
// externalState completion without a repo option). It is resolved once,
// before the model runs, and journaled with run.start; a resumed run uses
// the journaled one. So a model that rewrites the work dir's git remotes
// cannot make capstan act on another repository.
type Repo struct {
	// Repo is OWNER/NAME, or HOST/OWNER/NAME for a host other than
	// github.com.
	Repo string `json:"repo"`
	// Source says where it came from: "parameter repository", "GH_REPO" or
	// "git remote NAME".
	Source string `json:"source"`
}

// WithRepo appends --repo with the repository to gh arguments.
func (r *Repo) WithRepo(args ...string) []string {
	return append(args, "--repo", r.Repo)
}

// repoName is what a repository must look like before it reaches gh's
// command line (a value such as "--repo=x" must not become a flag).
var repoName = lazyre.New(`^(?:[A-Za-z0-9][A-Za-z0-9.-]*(?::[0-9]+)?/)?[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$`)

// ValidRepo reports whether s names a repository as gh's --repo takes it
// (OWNER/NAME or HOST/OWNER/NAME) and cannot be read as a flag.
func ValidRepo(s string) bool { return repoName().MatchString(s) }

// gitTimeout bounds one git call that reads the work dir's remotes.
const gitTimeout = 30 * time.Second

// RemoteRepo picks the GitHub repository of the work dir's git remotes as
// gh does: the remote `gh repo set-default` marked, else upstream, github,
// origin, then the others by name. Remotes on hosts other than github.com,
// *.ghe.com and $GH_HOST are not GitHub repositories. nil when there is
// none (or dir is not a git work tree).
func RemoteRepo(ctx context.Context, git *proc.Git, dir, ghHost string) *Repo {
	if git == nil {
		return nil
	}
	out, err := gitOutput(ctx, git, dir, "remote", "-v")
	if err != nil {
		return nil
	}
	type remote struct{ name, repo string }
	var remotes []remote
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[2] != "(fetch)" {
			continue
		}
		if repo := RepoOfURL(f[1], ghHost); repo != "" {
			remotes = append(remotes, remote{f[0], repo})
		}
	}
	if len(remotes) == 0 {
		return nil
	}
	// `gh repo set-default` records its choice as remote.NAME.gh-resolved:
	// "base" (that remote's repository) or the repository itself.
	resolved, _ := gitOutput(ctx, git, dir, "config", "--get-regexp", `^remote\..*\.gh-resolved$`)
	sc = bufio.NewScanner(bytes.NewReader(resolved))
	for sc.Scan() {
		key, value, _ := strings.Cut(sc.Text(), " ")
		name := strings.TrimSuffix(strings.TrimPrefix(key, "remote."), ".gh-resolved")
		for _, r := range remotes {
			if r.name != name {
				continue
			}
			if value != "base" && ValidRepo(value) {
				return &Repo{Repo: value, Source: "git remote " + name + " (gh repo set-default)"}
			}
			return &Repo{Repo: r.repo, Source: "git remote " + name + " (gh repo set-default)"}
		}
	}
	score := func(name string) int {
		return map[string]int{"upstream": 3, "github": 2, "origin": 1}[name]
	}
	slices.SortStableFunc(remotes, func(x, y remote) int {
		if d := score(y.name) - score(x.name); d != 0 {
			return d
		}
		return strings.Compare(x.name, y.name)
	})
	return &Repo{Repo: remotes[0].repo, Source: "git remote " + remotes[0].name}
}

// gitOutput runs git in dir, with the configuration the model cannot
// steer (proc.Git), and returns its standard output.
func gitOutput(ctx context.Context, git *proc.Git, dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	return git.Output(ctx, dir, args...)
}

// RepoOfURL returns the repository a git remote URL points to on a
// GitHub host ("OWNER/NAME" on github.com, "HOST/OWNER/NAME" elsewhere or
// when GH_HOST names another host),
// or "" for any other URL. It reads https://, ssh://, git:// URLs and
// scp-like ones (git@github.com:OWNER/NAME.git).
func RepoOfURL(raw, ghHost string) string {
	var host, p string
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Host != "" {
		host, p = u.Hostname(), u.Path
	} else if at, rest, ok := strings.Cut(raw, ":"); ok && !strings.Contains(at, "/") {
		_, host, _ = strings.Cut(at, "@")
		if host == "" {
			host = at
		}
		p = rest
	} else {
		return ""
	}
	host = strings.TrimPrefix(strings.ToLower(host), "www.")
	if host == "ssh.github.com" {
		host = "github.com"
	}
	ghHost = strings.ToLower(strings.TrimSpace(ghHost))
	if host != "github.com" && !strings.HasSuffix(host, ".ghe.com") && (ghHost == "" || host != ghHost) {
		return ""
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if len(parts) != 2 {
		return ""
	}
	repo := parts[0] + "/" + strings.TrimSuffix(parts[1], ".git")
	if host != "github.com" || ghHost != "" && ghHost != "github.com" {
		// gh reads OWNER/NAME as a repository of $GH_HOST when it is set.
		repo = host + "/" + repo
	}
	if !ValidRepo(repo) {
		return ""
	}
	return repo
}
