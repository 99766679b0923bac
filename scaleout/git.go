package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/definition"
)

// Commit message trailers that make a commit an iteration's record.
const (
	trailerRun       = "Capstan-Run: "
	trailerIteration = "Capstan-Iteration: "
	trailerResult    = "Capstan-Result: "
)

// localBranch is the branch a worker's checkout of a run works on.
const localBranch = "capstan-run"

// checkout is a run's work dir on this worker, ready for an iteration.
type checkout struct {
	dir string
	// reset is true when the work dir was (re)set to the run's commit:
	// an agent kept in memory no longer matches it.
	reset bool
	// done is the result of the iteration when a previous attempt already
	// committed it.
	done *IterationResult
}

// workDir prepares the run's work dir for the iteration after st: a
// checkout of the run's branch at st.Commit under Root, or, for a run
// without a repository, the run's WorkDir as it is.
func (w *Activities) workDir(ctx context.Context, run *RunInput, st RunState) (checkout, error) {
	if run.Repo == "" {
		if fi, err := os.Stat(run.WorkDir); err != nil || !fi.IsDir() {
			return checkout{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("work dir %s does not exist on this worker (a run without a git repository uses the same path on every worker)", run.WorkDir), ErrTypeConflict, err)
		}
		return checkout{dir: run.WorkDir}, nil
	}
	dir := filepath.Join(w.Root, run.RunID)
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		if err := os.RemoveAll(dir); err != nil {
			return checkout{}, workDirError("clear "+dir, err)
		}
		if err := os.MkdirAll(w.Root, 0o700); err != nil {
			return checkout{}, workDirError("create "+w.Root, err)
		}
		if _, err := git(ctx, w.Root, "clone", "-q", "--no-checkout", run.Repo, dir); err != nil {
			return checkout{}, workDirError("clone "+run.Repo, err)
		}
	}
	ref := "refs/remotes/origin/" + run.Branch
	if _, err := git(ctx, dir, "fetch", "-q", "origin", "+refs/heads/"+run.Branch+":"+ref); err != nil {
		return checkout{}, workDirError("fetch branch "+run.Branch+" of "+run.Repo, err)
	}
	tip, err := git(ctx, dir, "rev-parse", ref)
	if err != nil {
		return checkout{}, workDirError("read branch "+run.Branch, err)
	}
	if tip != st.Commit {
		done, err := committedIteration(ctx, dir, tip, run, st)
		if err != nil {
			return checkout{}, err
		}
		return checkout{dir: dir, done: done}, nil
	}
	head, _ := git(ctx, dir, "rev-parse", "-q", "--verify", "HEAD")
	if head == st.Commit {
		if status, err := git(ctx, dir, "status", "--porcelain"); err == nil && status == "" {
			return checkout{dir: dir}, nil
		}
	}
	// Another worker ran the last iteration, or this one was cut: start
	// from the last committed state. Edits after it are lost by design;
	// the iteration that made them runs again.
	if _, err := git(ctx, dir, "checkout", "-q", "-f", "-B", localBranch, st.Commit); err != nil {
		return checkout{}, workDirError("check out "+st.Commit, err)
	}
	if _, err := git(ctx, dir, "clean", "-q", "-f", "-d"); err != nil {
		return checkout{}, workDirError("clean "+dir, err)
	}
	return checkout{dir: dir, reset: true}, nil
}

// committedIteration reads the iteration a previous attempt committed on
// top of st.Commit: the branch's tip must be its only child and record the
// next iteration of this run.
func committedIteration(ctx context.Context, dir, tip string, run *RunInput, st RunState) (*IterationResult, error) {
	parent, _ := git(ctx, dir, "rev-parse", "-q", "--verify", tip+"^")
	msg, err := git(ctx, dir, "log", "-1", "--format=%B", tip)
	if err != nil {
		return nil, workDirError("read commit "+tip, err)
	}
	var res *IterationResult
	if parent == st.Commit && trailer(msg, trailerRun) == run.RunID && trailer(msg, trailerIteration) == strconv.Itoa(st.Iteration+1) {
		res = &IterationResult{}
		if err := json.Unmarshal([]byte(trailer(msg, trailerResult)), res); err != nil {
			res = nil
		}
	}
	if res == nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"branch %s of %s is at %s, not at the run's last iteration %s nor one iteration after it: something else pushed to the run's branch",
			run.Branch, run.Repo, short(tip), short(st.Commit)), ErrTypeConflict, nil)
	}
	res.Commit = tip
	return res, nil
}

// commit records the iteration: the work dir's changes and the result, on
// the run's branch. A run without a repository has nothing to commit.
func (w *Activities) commit(ctx context.Context, run *RunInput, dir string, st RunState, res *IterationResult) (string, error) {
	if run.Repo == "" {
		return "", nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("capstan: run %s iteration %d\n\n%s%s\n%s%d\n%s%s\n", run.RunID, res.Iteration,
		trailerRun, run.RunID, trailerIteration, st.Iteration+1, trailerResult, b)
	if _, err := git(ctx, dir, "add", "-A"); err != nil {
		return "", workDirError("stage the work dir", err)
	}
	if _, err := git(ctx, dir, "-c", "user.name=capstan", "-c", "user.email=capstan@localhost", "-c", "commit.gpgsign=false",
		"commit", "-q", "--no-verify", "--allow-empty", "-m", msg); err != nil {
		return "", workDirError("commit the work dir", err)
	}
	sha, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", workDirError("read the commit", err)
	}
	if _, err := git(ctx, dir, "push", "-q", "origin", "HEAD:refs/heads/"+run.Branch); err != nil {
		// Retried: the next attempt finds the branch where this push left it.
		return "", workDirError("push the run's branch "+run.Branch, err)
	}
	return sha, nil
}

func trailer(msg, key string) string {
	for _, line := range strings.Split(msg, "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// git runs git in dir and returns its trimmed output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

func workDirError(what string, err error) error {
	return temporal.NewApplicationError(what+": "+err.Error(), ErrTypeWorkDir, err)
}

// configFromSnapshot loads and validates the agent from its pinned
// definition, with the Go validators and handlers cfg knows.
func configFromSnapshot(snap *definition.Snapshot, dir string, cfg agent.Config) (*config.Agent, error) {
	return config.LoadAndValidateFS(snap, dir, agent.ValidateOptionsFor(cfg))
}
