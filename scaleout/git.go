package scaleout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/proc"
)

// Commit message trailers that make a commit an iteration's record.
const (
	trailerRun       = "Capstan-Run: "
	trailerIteration = "Capstan-Iteration: "
	trailerResult    = "Capstan-Result: "
)

// localBranch is the branch a worker's checkout of a run works on once
// it was reset to a commit (a fresh clone works on the run's branch).
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
	// resumed says that the work dir holds the checkpoint of an earlier
	// attempt of the iteration (its edits up to its last journaled tool
	// call); otherwise a resumed agent finds it at the run's last commit.
	resumed bool
}

// Checkpoints of an iteration in progress: after each tool call that is
// not idempotent, the worker pushes the work dir as a commit whose parent
// is the run's last commit to wipRef(run), with trailerWip. An attempt on
// another worker continues from it, so the effects of every tool call the
// journal answers are in its work dir.
const trailerWip = "Capstan-Checkpoint: "

// wipRef is the ref of run's checkpoint.
func wipRef(runID string) string { return "refs/capstan/wip/" + runID }

// checkpoint pushes the work dir dir of the iteration after st as the
// run's checkpoint.
func (w *Activities) checkpoint(ctx context.Context, run *RunInput, dir string, st RunState) error {
	if run.Repo == "" {
		return nil
	}
	if err := w.guardRepo(dir); err != nil {
		return workDirError("restore the repository of "+dir, err)
	}
	if _, err := w.checkoutGit(ctx, dir, "add", "-A"); err != nil {
		return workDirError("stage the work dir", err)
	}
	tree, err := w.checkoutGit(ctx, dir, "write-tree")
	if err != nil {
		return workDirError("record the work dir", err)
	}
	msg := fmt.Sprintf("capstan: run %s iteration %d in progress\n\n%s%s\n%s%d\n%strue\n", run.RunID, st.Iteration+1,
		trailerRun, run.RunID, trailerIteration, st.Iteration+1, trailerWip)
	sha, err := w.checkoutGit(ctx, dir, "-c", "user.name=capstan", "-c", "user.email=capstan@localhost", "commit-tree", tree, "-p", st.Commit, "-m", msg)
	if err != nil {
		return workDirError("record the work dir", err)
	}
	w.setCheckpointed(run.RunID, true)
	if _, err := w.checkoutGit(ctx, dir, "push", "-q", "-f", "origin", sha+":"+wipRef(run.RunID)); err != nil {
		return workDirError("push the checkpoint of run "+run.RunID, err)
	}
	return nil
}

// setCheckpointed records whether the run's repository may hold a
// checkpoint of the run (this worker pushed one, or fetched one).
func (w *Activities) setCheckpointed(runID string, yes bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checkpointed == nil {
		w.checkpointed = map[string]bool{}
	}
	if yes {
		w.checkpointed[runID] = true
	} else {
		delete(w.checkpointed, runID)
	}
}

// dropCheckpoint removes the run's checkpoint ref from its repository
// once the run has ended (its last iteration's commit is on the branch):
// an ended run leaves its branch and nothing else. It is a best effort —
// a checkpoint left behind is never used again, since it names an
// iteration the run did not reach.
func (w *Activities) dropCheckpoint(ctx context.Context, run *RunInput, dir string) {
	if run.Repo == "" {
		return
	}
	w.mu.Lock()
	pushed := w.checkpointed[run.RunID]
	w.mu.Unlock()
	if !pushed {
		if _, found, err := w.readRef(ctx, dir, wipFetched); err != nil || !found {
			return // neither pushed nor fetched here: there is none
		}
	}
	if w.guardRepo(dir) != nil {
		return
	}
	if _, err := w.checkoutGit(ctx, dir, "push", "-q", "origin", "--delete", wipRef(run.RunID)); err == nil {
		w.setCheckpointed(run.RunID, false)
	}
}

// wipFetched is where a checkout keeps the run's checkpoint it fetched.
const wipFetched = "refs/remotes/origin/capstan-wip"

// resumeCheckpoint puts the checkpoint of the iteration after st, when an
// earlier attempt pushed one and workDir fetched it, into the checkout dir
// (HEAD stays at st.Commit); it reports whether there was one.
func (w *Activities) resumeCheckpoint(ctx context.Context, dir string, run *RunInput, st RunState) bool {
	wip, found, err := w.readRef(ctx, dir, wipFetched)
	if err != nil || !found {
		return false
	}
	parent, _ := w.checkoutGit(ctx, dir, "rev-parse", "-q", "--verify", wip+"^")
	msg, err := w.checkoutGit(ctx, dir, "log", "-1", "--format=%B", wip)
	if err != nil || parent != st.Commit || trailer(msg, trailerRun) != run.RunID ||
		trailer(msg, trailerIteration) != strconv.Itoa(st.Iteration+1) || trailer(msg, trailerWip) != "true" {
		return false
	}
	if _, err := w.checkoutGit(ctx, dir, "checkout", "-q", "-f", "-B", localBranch, wip); err != nil {
		return false
	}
	if _, err := w.checkoutGit(ctx, dir, "reset", "-q", "--soft", st.Commit); err != nil {
		return false
	}
	_, _ = w.checkoutGit(ctx, dir, "clean", "-q", "-f", "-d")
	return true
}

// workDir prepares the run's work dir for the iteration after st: a
// checkout of the run's branch at st.Commit under Root, or, for a run
// without a repository, the run's WorkDir as it is.
func (w *Activities) workDir(ctx context.Context, run *RunInput, st RunState) (checkout, error) {
	if run.Repo == "" {
		if fi, err := os.Stat(run.WorkDir); err != nil || !fi.IsDir() {
			return checkout{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("work dir %s is not a directory on the worker (a run without a git repository uses the same path on every worker)", run.WorkDir), ErrTypeNoWorkDir, err)
		}
		return checkout{dir: run.WorkDir}, nil
	}
	dir := filepath.Join(w.Root, run.RunID)
	// A checkpoint of the iteration can only be there when the run's
	// journal is: a checkpoint follows a journaled tool call.
	mayResume := false
	if store, err := w.store(); err == nil {
		_, ferr := store.Find("", run.RunID)
		mayResume = ferr == nil
	}
	ref := "refs/remotes/origin/" + run.Branch
	fetch := []string{"+refs/heads/" + run.Branch + ":" + ref}
	fresh := false
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		if err := os.RemoveAll(dir); err != nil {
			return checkout{}, workDirError("clear "+dir, err)
		}
		if err := os.MkdirAll(w.Root, 0o700); err != nil {
			return checkout{}, workDirError("create "+w.Root, err)
		}
		// Only the run's branch: a repository that holds the branches of
		// many runs is not fetched whole for each of them. The clone has
		// the branch's tip, checked out (with the same pins as every
		// command in the checkout: no driver of the configuration runs):
		// no fetch or checkout of it follows unless the tip is not the
		// run's last commit.
		if _, err := w.checkoutGit(ctx, w.Root, "clone", "-q", "--template=", "--single-branch", "--no-tags", "--branch", run.Branch, run.Repo, dir); err != nil {
			return checkout{}, workDirError("clone "+run.Repo, err)
		}
		if err := w.trustRepo(ctx, dir); err != nil {
			return checkout{}, workDirError("read the configuration of "+dir, err)
		}
		fetch, fresh = nil, true
	} else if err := w.guardRepo(dir); err != nil {
		// A checkout this worker did not clone (it restarted) or whose
		// repository it cannot restore: start from a fresh clone.
		if err := os.RemoveAll(dir); err != nil {
			return checkout{}, workDirError("clear "+dir, err)
		}
		return w.workDir(ctx, run, st)
	}
	if mayResume {
		// The checkpoint, when there is one, in the same fetch (a pattern
		// that matches no ref is not an error).
		fetch = append(fetch, "+"+wipRef(run.RunID)+"*:"+wipFetched+"*")
		if !fresh {
			_, _ = w.checkoutGit(ctx, dir, "update-ref", "-d", wipFetched)
		}
	}
	if len(fetch) > 0 {
		if _, err := w.checkoutGit(ctx, dir, append([]string{"fetch", "-q", "--no-tags", "origin"}, fetch...)...); err != nil {
			return checkout{}, workDirError("fetch branch "+run.Branch+" of "+run.Repo, err)
		}
	}
	tip, found, err := w.readRef(ctx, dir, ref)
	if err == nil && !found {
		err = fmt.Errorf("%s is not in the clone", ref)
	}
	if err != nil {
		return checkout{}, workDirError("read branch "+run.Branch, err)
	}
	if tip != st.Commit {
		done, err := w.committedIteration(ctx, dir, tip, run, st)
		if err != nil {
			return checkout{}, err
		}
		return checkout{dir: dir, done: done}, nil
	}
	if mayResume && w.resumeCheckpoint(ctx, dir, run, st) {
		return checkout{dir: dir, reset: true, resumed: true}, nil
	}
	if fresh {
		// The clone checked out the tip, the run's last commit.
		return checkout{dir: dir, reset: true}, nil
	}
	if head, _, _ := w.readRef(ctx, dir, "HEAD"); head == st.Commit {
		if status, err := w.checkoutGit(ctx, dir, "status", "--porcelain"); err == nil && status == "" {
			return checkout{dir: dir}, nil
		}
	}
	// Another worker ran the last iteration, or this one was cut: start
	// from the last committed state. Edits after it are lost by design;
	// the iteration that made them runs again.
	if _, err := w.checkoutGit(ctx, dir, "checkout", "-q", "-f", "-B", localBranch, st.Commit); err != nil {
		return checkout{}, workDirError("check out "+st.Commit, err)
	}
	if _, err := w.checkoutGit(ctx, dir, "clean", "-q", "-f", "-d"); err != nil {
		return checkout{}, workDirError("clean "+dir, err)
	}
	return checkout{dir: dir, reset: true}, nil
}

// committedIteration reads the iterations a previous attempt committed on
// top of st.Commit (one, or several in a row: Iterate): the branch's tip
// must record an iteration n of this run after st, and each commit
// between it and st.Commit, first parent after first parent, the
// iteration before. It returns the tip's record.
func (w *Activities) committedIteration(ctx context.Context, dir, tip string, run *RunInput, st RunState) (*IterationResult, error) {
	var res *IterationResult
	want := 0 // the iteration the commit c must record (0: any after st)
	for c := tip; ; {
		parent, _ := w.checkoutGit(ctx, dir, "rev-parse", "-q", "--verify", c+"^")
		msg, err := w.checkoutGit(ctx, dir, "log", "-1", "--format=%B", c)
		if err != nil {
			return nil, workDirError("read commit "+c, err)
		}
		n, err := strconv.Atoi(trailer(msg, trailerIteration))
		if err != nil || trailer(msg, trailerRun) != run.RunID || n <= st.Iteration || (want != 0 && n != want) {
			res = nil
			break
		}
		if res == nil {
			res = &IterationResult{}
			if err := json.Unmarshal([]byte(trailer(msg, trailerResult)), res); err != nil {
				res = nil
				break
			}
		}
		if n == st.Iteration+1 {
			if parent != st.Commit {
				res = nil
			}
			break
		}
		c, want = parent, n-1
	}
	if res == nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"branch %s of %s is at %s, not at the run's last iteration %s nor at iterations of this run after it: something else pushed to the run's branch",
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
	if err := w.guardRepo(dir); err != nil {
		// Retried: the next attempt clones afresh and redoes the iteration.
		return "", workDirError("restore the repository of "+dir, err)
	}
	if _, err := w.checkoutGit(ctx, dir, "add", "-A"); err != nil {
		return "", workDirError("stage the work dir", err)
	}
	if _, err := w.checkoutGit(ctx, dir, "-c", "user.name=capstan", "-c", "user.email=capstan@localhost", "-c", "commit.gpgsign=false",
		"commit", "-q", "--no-verify", "--allow-empty", "-m", msg); err != nil {
		return "", workDirError("commit the work dir", err)
	}
	sha, found, err := w.readRef(ctx, dir, "HEAD")
	if err == nil && !found {
		err = errors.New("HEAD names no commit")
	}
	if err != nil {
		return "", workDirError("read the commit", err)
	}
	if _, err := w.checkoutGit(ctx, dir, "push", "-q", "origin", "HEAD:refs/heads/"+run.Branch); err != nil {
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

// checkoutHardening are the settings every git command in a run's
// checkout runs with. The checkout is the model's work dir, .git included:
// its tools can write hooks and repository configuration there, and the
// worker's git runs with the worker's rights and environment (its API
// keys). No hook runs, whatever the configuration says, and no file system
// monitor; guardRepo puts back the configuration the worker cloned with
// (filter drivers, receive-pack and upload-pack commands, credential
// helpers, includes), so nothing the model wrote there runs either.
//
// Nor does a checkout get automatic maintenance (commit and fetch start
// `git maintenance run --auto`, which may start `git gc`): a checkout
// lives for one run and is cloned afresh when another worker takes the
// run, so it has nothing to gain from it, and each of those is a process
// per iteration. The run's repository, where the pushes go, keeps its own
// settings (a push does not pass these on to receive-pack). Nor does a
// checkout keep reflogs (the worker never reads them, and every ref
// update appended to one or two of them), and it is cloned without the
// template directory (sample hooks, which never run here, and the
// description: a dozen files written for nothing on every clone).
var checkoutHardening = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "maintenance.auto=false", "-c", "gc.auto=0",
	"-c", "core.logAllRefUpdates=false"}

// checkoutGit runs git in dir — a run's checkout, or Root for a clone —
// hardened (checkoutHardening), and returns its trimmed output. The
// worker resolves git once; a command that reaches a remote gets the
// user's credential helpers (read once), and a checkout's driver pins are
// read once, when it is cloned (guardRepo keeps its configuration as
// cloned). Call guardRepo before a sequence of them.
func (w *Activities) checkoutGit(ctx context.Context, dir string, args ...string) (string, error) {
	g, remote, err := w.gits(ctx)
	if err != nil {
		return "", err
	}
	if proc.GitReachesRemote(args) {
		g = remote
	}
	w.mu.Lock()
	pins := w.repoPins[dir]
	w.mu.Unlock()
	if pins == nil && dir == w.Root && outsideRepositories(dir) {
		// Clones run in Root, which is in no repository: its pins (the
		// user's global configuration's drivers) were read once.
		pins = w.rootPins
	}
	if pins != nil {
		g = g.WithRepoPins(pins)
	}
	out, err := g.Output(ctx, dir, append(slices.Clip(checkoutHardening), args...)...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// gits returns the worker's git for commands in its checkouts and the one
// for commands that reach a remote, resolved once.
func (w *Activities) gits(ctx context.Context) (local, remote *proc.Git, err error) {
	w.gitOnce.Do(func() {
		w.localGit, w.gitErr = proc.NewGit(os.Environ(), w.Root)
		if w.gitErr == nil {
			w.remoteGit = w.localGit.WithUserCredentials(context.WithoutCancel(ctx), os.Environ())
			if outsideRepositories(w.Root) {
				w.rootPins = w.remoteGit.ReadRepoPins(context.WithoutCancel(ctx), w.Root)
			}
		}
	})
	return w.localGit, w.remoteGit, w.gitErr
}

// outsideRepositories reports that dir is in no git repository: neither
// it nor a directory above it holds a .git or is a repository itself (a
// HEAD file next to an objects directory, as in a bare one). It is
// checked before each use of pins read once for dir, so a repository made
// there since (by a run's tool with no sandbox) is read again.
func outsideRepositories(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
		if _, err := os.Lstat(filepath.Join(d, "HEAD")); !errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Lstat(filepath.Join(d, "objects")); !errors.Is(err, fs.ErrNotExist) {
				return false
			}
		}
		if filepath.Dir(d) == d {
			return true
		}
	}
}

// trustRepo records the repository configuration of a checkout this
// worker just cloned, the one guardRepo restores, and its driver pins.
func (w *Activities) trustRepo(ctx context.Context, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if err != nil {
		return err
	}
	g, _, err := w.gits(ctx)
	if err != nil {
		return err
	}
	pins := g.ReadRepoPins(ctx, dir)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.repoConfigs == nil {
		w.repoConfigs, w.repoPins = map[string][]byte{}, map[string]*proc.RepoPins{}
	}
	w.repoConfigs[dir], w.repoPins[dir] = b, pins
	return nil
}

// guardRepo makes a checkout's repository the one the worker cloned
// before the worker runs git there: .git a directory of its own (not a
// link, not a file pointing elsewhere) with no link in it, no configuration read from
// elsewhere (commondir, config.worktree), and .git/config as cloned —
// rewritten when the model changed it. It fails when the worker has no
// record of the checkout (the caller clones afresh).
func (w *Activities) guardRepo(dir string) error {
	w.mu.Lock()
	want, ok := w.repoConfigs[dir]
	w.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s was not cloned by this worker", dir)
	}
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not the repository the worker cloned", gitDir)
	}
	// Git writes some of its files (the index, packed-refs) through a
	// link: a link the model put in .git would have the worker's git
	// write where the model points it. Git makes none in a clone.
	err := filepath.WalkDir(gitDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		return os.Remove(path)
	})
	if err != nil {
		return err
	}
	for _, name := range []string{"commondir", "config.worktree"} {
		if err := os.RemoveAll(filepath.Join(gitDir, name)); err != nil {
			return err
		}
	}
	config := filepath.Join(gitDir, "config")
	if fi, err := os.Lstat(config); err == nil && fi.Mode().IsRegular() {
		if got, err := os.ReadFile(config); err == nil && bytes.Equal(got, want) {
			return nil
		}
	}
	if err := os.RemoveAll(config); err != nil {
		return err
	}
	return os.WriteFile(config, want, 0o644)
}

// git runs git in dir as capstan's own git (proc.Git: resolved
// outside dir, a minimal environment without the worker's keys, nothing
// the repository's configuration names run) and returns its trimmed
// output. A command that reaches a remote (clone, fetch, push) also gets
// the user's credential helpers and ssh agent.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	g, err := proc.NewGit(os.Environ(), dir)
	if err != nil {
		return "", err
	}
	if proc.GitReachesRemote(args) {
		g = g.WithUserCredentials(ctx, os.Environ())
	}
	out, err := g.Output(ctx, dir, args...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func workDirError(what string, err error) error {
	return temporal.NewApplicationError(what+": "+err.Error(), ErrTypeWorkDir, err)
}

// configFromSnapshot loads and validates the agent from its pinned
// definition, with the Go validators and handlers cfg knows.
func configFromSnapshot(snap *agentdir.Snapshot, dir string, cfg agent.Config) (*agentdir.Agent, error) {
	return agentdir.LoadAndValidateFS(snap, dir, agent.ValidateOptionsFor(cfg))
}
