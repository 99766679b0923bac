package agent

import (
	"context"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/github"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/verdict"
)

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
	p, err := proc.LookPath("gh", a.opts.Getenv("PATH"), a.workDir)
	if proc.IsProgramNotFound(err) {
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
func (a *Agent) resolveGitHubRepo(ctx context.Context, remotes bool) (*github.Repo, error) {
	bad := func(value, source string) error {
		e := agenterr.New(agenterr.CodeParamInvalid, agenterr.LayerLifecycle, false,
			"%s %q is not a GitHub repository (OWNER/NAME or HOST/OWNER/NAME)", source, value)
		e.Hint = "give the repository as OWNER/NAME, for example octo-org/octo-repo"
		return e
	}
	if v := strings.TrimSpace(a.vars[agentdir.RepositoryParam]); v != "" {
		if !github.ValidRepo(v) {
			return nil, bad(v, "parameter "+agentdir.RepositoryParam)
		}
		return &github.Repo{Repo: v, Source: "parameter " + agentdir.RepositoryParam}, nil
	}
	if v := strings.TrimSpace(a.opts.Getenv("GH_REPO")); v != "" {
		if !github.ValidRepo(v) {
			return nil, bad(v, "GH_REPO")
		}
		return &github.Repo{Repo: v, Source: "GH_REPO"}, nil
	}
	if remotes {
		if r := github.RemoteRepo(ctx, a.git, a.workDir, a.opts.Getenv("GH_HOST")); r != nil {
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
