package agent

import (
	"bufio"
	"bytes"
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/hostcmd"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/verdict"
)

// GitHubRepo is the repository every gh call capstan itself makes names
// with --repo (the closure's label and close calls, github_read, an
// externalState completion without a repo option). It is resolved once,
// before the model runs, and journaled with run.start; a resumed run uses
// the journaled one. So a model that rewrites the work dir's git remotes
// cannot make capstan act on another repository.
type GitHubRepo struct {
	// Repo is OWNER/NAME, or HOST/OWNER/NAME for a host other than
	// github.com.
	Repo string `json:"repo"`
	// Source says where it came from: "parameter repository", "GH_REPO" or
	// "git remote NAME".
	Source string `json:"source"`
}

// repoName is what a repository must look like before it reaches gh's
// command line (a value such as "--repo=x" must not become a flag).
var repoName = lazyre.New(`^(?:[A-Za-z0-9][A-Za-z0-9.-]*(?::[0-9]+)?/)?[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$`)

// pinGitHubRepo fixes, before the model runs, the gh capstan runs (when
// the integration or an externalState completion calls it) and the
// repository those calls name (when the integration is on or an
// externalState completion has no repo option of its own, which then gets
// it). A resumed run keeps the journaled repository. It fails when gh or
// a needed repository cannot be determined.
func (a *Agent) pinGitHubRepo(ctx context.Context) error {
	states := externalStates(a.rt.completion)
	needsRepo := a.spec.Runner.Integrations.GitHub.On()
	for _, h := range states {
		needsRepo = needsRepo || h.Repo == ""
	}
	if !needsRepo && len(states) == 0 {
		return nil
	}
	if err := a.findGH(); err != nil {
		return err
	}
	if needsRepo {
		var err error
		if r := a.opts.Resume; r != nil && r.GitHubRepo != nil {
			a.ghRepo = r.GitHubRepo
		} else if a.ghRepo, err = a.resolveGitHubRepo(ctx, a.opts.Resume == nil); err != nil {
			return err
		}
	}
	for _, h := range states {
		if h.Repo == "" {
			h.Repo = a.ghRepo.Repo
		}
		h.GH = a.ghPath
	}
	return nil
}

// findGH looks gh up on PATH before the model runs. capstan runs it
// outside the sandbox, with its credentials and network, so a gh the model
// could have written — inside the work dir, where a PATH entry may point —
// is refused.
func (a *Agent) findGH() error {
	p, err := hostcmd.LookPath("gh", a.opts.Getenv("PATH"), a.workDir)
	if hostcmd.IsNotFound(err) {
		e := agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false,
			"capstan calls gh for this agent (runner.integrations.github or an externalState completion), but gh is not on PATH")
		e.Hint = "install the GitHub CLI (https://cli.github.com) and run `gh auth login`"
		return e
	}
	if err != nil {
		return err
	}
	a.ghPath = p
	return nil
}

// resolveGitHubRepo determines the repository: the repository parameter,
// else GH_REPO in capstan's environment, else (when remotes is set) the
// work dir's git remotes as gh would choose among them.
func (a *Agent) resolveGitHubRepo(ctx context.Context, remotes bool) (*GitHubRepo, error) {
	bad := func(value, source string) error {
		e := agenterr.New(agenterr.CodeParamInvalid, agenterr.LayerLifecycle, false,
			"%s %q is not a GitHub repository (OWNER/NAME or HOST/OWNER/NAME)", source, value)
		e.Hint = "give the repository as OWNER/NAME, for example octo-org/octo-repo"
		return e
	}
	if v := strings.TrimSpace(a.vars[agentdir.RepositoryParam]); v != "" {
		if !repoName().MatchString(v) {
			return nil, bad(v, "parameter "+agentdir.RepositoryParam)
		}
		return &GitHubRepo{Repo: v, Source: "parameter " + agentdir.RepositoryParam}, nil
	}
	if v := strings.TrimSpace(a.opts.Getenv("GH_REPO")); v != "" {
		if !repoName().MatchString(v) {
			return nil, bad(v, "GH_REPO")
		}
		return &GitHubRepo{Repo: v, Source: "GH_REPO"}, nil
	}
	if remotes {
		if r := remoteRepo(ctx, a.git, a.workDir, a.opts.Getenv("GH_HOST")); r != nil {
			return r, nil
		}
		e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false,
			"capstan calls gh for this agent (runner.integrations.github or an externalState completion), but the work dir %s has no GitHub remote to name the repository", a.workDir)
		e.Hint = a.repositoryHint() + ", set GH_REPO to OWNER/NAME in capstan's environment, or add the GitHub remote to the work dir (git remote add origin https://github.com/OWNER/NAME)"
		return nil, e
	}
	e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false,
		"the journal of run %s names no GitHub repository, and the work dir's remotes may have been changed by the model since it started", a.runID)
	e.Hint = "set GH_REPO to the repository (OWNER/NAME) in the environment of this resume"
	return nil, e
}

// repositoryHint says how to give a run its repository by parameter:
// the flag of the agent's repository parameter, or how to declare one.
func (a *Agent) repositoryHint() string {
	if p, ok := a.spec.Parameters[agentdir.RepositoryParam]; ok {
		return "pass " + p.Flag(agentdir.RepositoryParam) + " OWNER/NAME"
	}
	return `declare a "` + agentdir.RepositoryParam + `" parameter (type string) in agent.json and pass --` + agentdir.RepositoryParam + " OWNER/NAME"
}

// remoteRepo picks the GitHub repository of the work dir's git remotes as
// gh does: the remote `gh repo set-default` marked, else upstream, github,
// origin, then the others by name. Remotes on hosts other than github.com,
// *.ghe.com and $GH_HOST are not GitHub repositories. nil when there is
// none (or dir is not a git work tree).
func remoteRepo(ctx context.Context, git *hostcmd.Git, dir, ghHost string) *GitHubRepo {
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
		if repo := githubRepoOfURL(f[1], ghHost); repo != "" {
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
			if value != "base" && repoName().MatchString(value) {
				return &GitHubRepo{Repo: value, Source: "git remote " + name + " (gh repo set-default)"}
			}
			return &GitHubRepo{Repo: r.repo, Source: "git remote " + name + " (gh repo set-default)"}
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
	return &GitHubRepo{Repo: remotes[0].repo, Source: "git remote " + remotes[0].name}
}

// gitOutput runs git in dir, with the configuration the model cannot
// steer (hostcmd.Git), and returns its standard output.
func gitOutput(ctx context.Context, git *hostcmd.Git, dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ghTimeout)
	defer cancel()
	return git.Output(ctx, dir, args...)
}

// githubRepoOfURL returns the repository a git remote URL points to on a
// GitHub host ("OWNER/NAME" on github.com, "HOST/OWNER/NAME" elsewhere or
// when GH_HOST names another host),
// or "" for any other URL. It reads https://, ssh://, git:// URLs and
// scp-like ones (git@github.com:OWNER/NAME.git).
func githubRepoOfURL(raw, ghHost string) string {
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
	if !repoName().MatchString(repo) {
		return ""
	}
	return repo
}

// externalStates returns the externalState handlers of a completion tree.
func externalStates(h verdict.CompletionHandler) []*verdict.ExternalState {
	switch h := h.(type) {
	case *verdict.ExternalState:
		return []*verdict.ExternalState{h}
	case *verdict.Composite:
		var out []*verdict.ExternalState
		for _, c := range h.Conditions {
			out = append(out, externalStates(c.Handler)...)
		}
		return out
	}
	return nil
}

// withRepo appends --repo with the run's repository to gh arguments.
func (r *GitHubRepo) withRepo(args ...string) []string {
	return append(args, "--repo", r.Repo)
}
