package scaleout

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/backoff"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/proc"
)

// Activities are a worker's activities. One value serves every run the
// worker takes; it keeps each run's live agent between iterations, so an
// iteration that lands on the worker that ran the previous one continues
// in memory, and one that lands elsewhere rebuilds the agent from the
// journal and the run's branch.
type Activities struct {
	// Queue is this worker's own task queue (what ActivityAcquire returns,
	// and IterationResult.Queue names).
	Queue string
	// Root is where the worker checks out runs' work dirs
	// (<Root>/<run id>).
	Root string
	// Store is the journal store; every worker of a namespace must share
	// it (the same state directory) so a run moved to another worker
	// continues its journal. Zero: the state directory Getenv names
	// (journal.OpenStore), as for a local run.
	Store journal.Store
	// Getenv reads the worker's environment (API keys; nil = os.Getenv).
	Getenv func(string) string
	// TracerProvider, when set, traces the runs (agent.Config.TracerProvider).
	TracerProvider trace.TracerProvider
	// Server is where the worker's runs live (agent.Config.Temporal; the
	// branch is filled in per run).
	Server agent.TemporalRun

	mu   sync.Mutex
	runs map[string]*liveRun
	// repoConfigs are the repository configurations of the checkouts this
	// worker cloned, by checkout dir (see guardRepo), and repoPins their
	// driver pins.
	repoConfigs map[string][]byte
	repoPins    map[string]*proc.RepoPins
	// checkpointed are the runs whose checkpoint this worker pushed.
	checkpointed map[string]bool

	// The worker's git, resolved once (checkoutGit).
	gitOnce             sync.Once
	localGit, remoteGit *proc.Git
	gitErr              error
	// rootPins are the pins of the clones' directory, Root, read once
	// (see checkoutGit).
	rootPins *proc.RepoPins
}

// liveRun is a run's agent kept between iterations on this worker.
type liveRun struct {
	a         *agent.Agent
	iteration int
	commit    string
	dir       string
	// journal is the run's journal as the agent left it.
	journal journalMark
	// cut marks a checkout kept without an agent: an attempt of the
	// iteration after iteration was cut there by a provider outage, and
	// its edits are still in dir (the next attempt continues from them,
	// its agent resumed from the journal at journalPath).
	cut         bool
	journalPath string
	// place is where the agent's iteration under way stands (for its
	// checkpoints).
	place *runPlace
}

// runPlace is the state and checkout of a run's iteration under way: what
// the agent's checkpoints (agent.Config.Checkpoint) record.
type runPlace struct {
	mu  sync.Mutex
	st  RunState
	dir string
}

func (p *runPlace) set(st RunState, dir string) {
	p.mu.Lock()
	p.st, p.dir = st, dir
	p.mu.Unlock()
}

func (p *runPlace) get() (RunState, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st, p.dir
}

// Acquire is ActivityAcquire: it pins the calling run to this worker.
func (w *Activities) Acquire(ctx context.Context) (string, error) {
	return w.Queue, nil
}

// Close abandons the runs this worker holds (their journals stay
// resumable; another worker continues them).
func (w *Activities) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, lr := range w.runs {
		if lr.a != nil {
			lr.a.Abandon()
		}
		delete(w.runs, id)
	}
}

// store is the journal store the worker's runs are journaled in.
func (w *Activities) store() (journal.Store, error) {
	if w.Store.Dir != "" {
		return w.Store, nil
	}
	return journal.OpenStore(w.Getenv)
}

func (w *Activities) take(id string) *liveRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	lr := w.runs[id]
	delete(w.runs, id)
	return lr
}

func (w *Activities) keep(id string, lr *liveRun) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runs == nil {
		w.runs = map[string]*liveRun{}
	}
	w.runs[id] = lr
}

// Iterate is ActivityIterate: it runs the run's next iteration on this
// worker and commits the work dir. It heartbeats while the iteration runs;
// a canceled workflow cancels the iteration, and the run ends as a local
// run interrupted by Ctrl-C does.
//
// Only one attempt at a time works on a run (runLock): an attempt
// Temporal timed out may still be running — on this worker, where the
// retry lands too, or on one cut off from the server — and the retry waits
// until it has stopped. An attempt whose context ends for another reason
// than the workflow's cancellation (Temporal timed it out, the worker is
// shutting down) has lost the run: it leaves the journal as a killed
// process would, commits nothing, and fails.
//
// A short iteration is followed by the next in the same attempt, up to
// in.ChainUntil finished iterations and while the attempt has run less
// than in.ChainFor (each iteration committed and pushed as it ends, as
// alone): a run of short iterations costs the server one activity and one
// workflow task per ChainFor instead of per iteration. An iteration after
// the first that fails leaves the failure to the next activity: this
// attempt returns what the iterations before it committed. A retry of an
// attempt that committed several finds them all on the run's branch
// (committedIteration).
func (w *Activities) Iterate(ctx context.Context, in IterationInput) (*IterationResult, error) {
	began := time.Now()
	res, err := w.iterate(ctx, in)
	var earlier []IterationOutcome
	for err == nil && res.Result == nil && res.Iteration > in.State.Iteration && res.Iteration < in.ChainUntil &&
		ctx.Err() == nil && time.Since(began) < in.ChainFor {
		if res.Outcome != nil {
			earlier = append(earlier, *res.Outcome)
		}
		in.State = RunState{Iteration: res.Iteration, Commit: res.Commit, Step: res.Step, Usage: res.Usage, CostUSD: res.CostUSD,
			Moves: in.State.Moves, Queue: w.Queue, Last: res.Outcome}
		next, nerr := w.iterate(ctx, in)
		if nerr != nil {
			break
		}
		res = next
	}
	if res != nil {
		res.Queue = w.Queue // not in the commit's record: set after it
		res.Earlier = earlier
	}
	var ae *temporal.ApplicationError
	if err != nil && !outage(err) && activity.GetInfo(ctx).Attempt >= iterationAttempts && errors.As(err, &ae) && !ae.NonRetryable() {
		// The retry policy allows outageAttempts for provider outages;
		// other failures get iterationAttempts.
		return nil, temporal.NewNonRetryableApplicationError(ae.Error(), ae.Type(), err)
	}
	return res, err
}

// iterate is Iterate before its bound on the attempts of failures that
// are not provider outages.
func (w *Activities) iterate(ctx context.Context, in IterationInput) (*IterationResult, error) {
	run, st := in.Run, in.State
	if run == nil {
		return nil, temporal.NewNonRetryableApplicationError("iteration without a run", ErrTypeBuild, nil)
	}
	// The heartbeat covers waiting for the run, the checkout, the
	// iteration and its commit.
	stop := heartbeat(ctx, fmt.Sprintf("run %s iteration %d", run.RunID, st.Iteration+1))
	defer stop()
	store, err := w.store()
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBuild, err)
	}
	lock, err := lockRun(ctx, store, w.Queue, run.RunID, lockWait(ctx))
	if err != nil {
		return nil, err
	}
	defer lock.unlock()
	lr := w.take(run.RunID)
	// kept is the checkout where this worker cut an attempt of this very
	// iteration (an outage): its edits are the ones the journal records.
	kept := ""
	if lr != nil && lr.cut {
		if lr.iteration == st.Iteration && lr.commit == st.Commit && run.Repo != "" && lr.journal.unchanged(lr.journalPath) {
			if err := w.guardRepo(lr.dir); err == nil {
				kept = lr.dir
			}
		}
		lr = nil
	}
	if lr != nil && !lr.journal.unchanged(lr.a.JournalPath()) {
		// Another worker wrote the run's journal since this one kept the
		// agent (an iteration the workflow did not count): the agent in
		// memory no longer continues it.
		lr.a.Abandon()
		lr = nil
	}
	var wd checkout
	if lr != nil && lr.iteration == st.Iteration && lr.commit == st.Commit && run.Repo != "" && lr.dir != "" {
		// This worker ran and committed the last iteration, and holds the
		// run's agent: the work dir is where that iteration left it.
		wd = checkout{dir: lr.dir}
	} else if kept != "" {
		wd = checkout{dir: kept}
	} else if wd, err = w.workDir(ctx, run, st); err != nil {
		if lr != nil {
			lr.a.Abandon()
		}
		return nil, err
	}
	if wd.done != nil {
		// The previous attempt finished the iteration and committed it;
		// only its answer was lost.
		if lr != nil {
			lr.a.Abandon()
		}
		if wd.done.Result != nil {
			w.dropCheckpoint(context.WithoutCancel(ctx), run, wd.dir)
		}
		return wd.done, nil
	}
	if lr != nil && (lr.iteration != st.Iteration || lr.commit != st.Commit || wd.reset) {
		lr.a.Abandon()
		lr = nil
	}
	if lr == nil {
		// The agent resumed from the journal finds the work dir as the
		// cut attempt left it only in a checkout this worker kept.
		place := &runPlace{}
		place.set(st, wd.dir)
		a, err := w.build(ctx, store, run, st, wd.dir, kept == "" && !wd.resumed, place)
		if err != nil {
			return nil, err
		}
		lr = &liveRun{a: a, place: place}
	}
	lr.place.set(st, wd.dir)
	res := lr.a.Step(ctx)
	if err := attemptLost(ctx); err != nil {
		lr.a.Abandon()
		return nil, err
	}
	p := lr.a.Progress()
	out := &IterationResult{Iteration: p.Iteration, Step: p.Step, Usage: p.Usage, CostUSD: p.CostUSD}
	if p.Iteration > st.Iteration && p.Summary != nil {
		o := p.Outcome
		out.Outcome = &IterationOutcome{Iteration: p.Iteration, Step: p.Summary.StepID, Complete: o.Complete, Stop: o.Stop,
			Reason: o.Reason, Usage: p.Usage, CostUSD: p.CostUSD}
		for _, t := range p.Summary.ToolsUsed {
			out.Outcome.Tools = append(out.Outcome.Tools, t.Name)
		}
	}
	if res != nil {
		if retry := retryable(res, st.Iteration); retry != nil && retryFits(ctx, lr.a.Deadline(), retry) {
			// The provider is rate limiting, overloaded or unreachable:
			// the iteration did not finish. Temporal retries it, with
			// backoff or after the server's retry-after, on an agent
			// resumed from the journal, which continues the iteration
			// where it failed (the tool-effect ledger). When the next
			// attempt would come after the run's time budget, or after
			// outageAttempts, this attempt ends the run with the error
			// instead, as a local run ends (recoverable).
			path := lr.a.JournalPath()
			lr.a.Abandon()
			if mark, ok := markJournal(path); ok && run.Repo != "" {
				// The next attempt continues in this checkout, with the
				// edits this one made (the journal records them).
				w.keep(run.RunID, &liveRun{iteration: st.Iteration, commit: st.Commit, dir: wd.dir, cut: true, journalPath: path, journal: mark})
			}
			return nil, retry
		}
		out.Result = lr.a.Stop()
	}
	// The commit is where the iteration counts: it must happen even when
	// the workflow was canceled during the iteration.
	cctx := context.WithoutCancel(ctx)
	if out.Commit, err = w.commit(cctx, run, wd.dir, st, out); err != nil {
		if res == nil {
			lr.a.Abandon()
		}
		return nil, err
	}
	if out.Result != nil {
		w.dropCheckpoint(cctx, run, wd.dir)
	}
	if res == nil {
		mark, ok := markJournal(lr.a.JournalPath())
		if !ok {
			lr.a.Abandon()
			return out, nil
		}
		w.keep(run.RunID, &liveRun{a: lr.a, iteration: out.Iteration, commit: out.Commit, dir: wd.dir, journal: mark, place: lr.place})
	}
	return out, nil
}

// attemptLost returns the failure of an attempt whose context ended for
// another reason than the workflow's cancellation — Temporal timed the
// attempt out (the server no longer knows it, or its heartbeats could not
// get through), it ran past its deadline, or the worker is shutting down —
// and nil otherwise. Another attempt redoes the iteration; this one must
// not end the run.
func attemptLost(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	var canceled *temporal.CanceledError
	if errors.As(cause, &canceled) {
		return nil
	}
	return temporal.NewApplicationError("the attempt lost the run ("+cause.Error()+"); another attempt redoes the iteration", ErrTypeWorkDir, cause)
}

// lockWait is how long an attempt waits for an earlier attempt of the
// same iteration to let go of the run: two heartbeat timeouts (the earlier
// attempt learns it was timed out at its next heartbeat, then stops its
// tool call), at least 10 s.
func lockWait(ctx context.Context) time.Duration {
	return max(2*activity.GetInfo(ctx).HeartbeatTimeout, 10*time.Second)
}

// outageAttempts bounds the attempts of an iteration a provider outage
// keeps failing, for a run without a time budget (about 25 minutes of
// retries, at most a minute apart).
const outageAttempts = 30

// outageBackoff is the wait Temporal puts before attempt n+1 of an
// iteration (the activity's retry policy: 1 s, doubled, at most a
// minute), unless the failure names one.
func outageBackoff(n int32) time.Duration {
	return backoff.Exponential{Base: time.Second, Max: time.Minute}.Delay(int(n), 0)
}

// retryFits reports whether the iteration may be retried after the
// outage retry: the next attempt comes before deadline (the run's time
// budget; zero = none, when outageAttempts bounds it).
func retryFits(ctx context.Context, deadline time.Time, retry error) bool {
	n := activity.GetInfo(ctx).Attempt
	if n >= outageAttempts {
		return false
	}
	if deadline.IsZero() {
		return true
	}
	wait := outageBackoff(n)
	var ae *temporal.ApplicationError
	if errors.As(retry, &ae) && ae.NextRetryDelay() > 0 {
		wait = ae.NextRetryDelay()
	}
	return time.Now().Add(wait).Before(deadline)
}

// outage reports an activity failure that retryable made.
func outage(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && (ae.Type() == agenterr.CodeSdkRateLimit || ae.Type() == agenterr.CodeSdkConnection)
}

// retryable maps a run that ended on a recoverable provider failure
// before its iteration finished (rate limit, connection) to a retryable
// activity failure that honours the server's retry-after; nil otherwise.
func retryable(res *event.RunResult, before int) error {
	if res.Success || res.Error == nil || res.Iterations != before || !res.Error.Recoverable {
		return nil
	}
	code := res.Error.Code
	if code != agenterr.CodeSdkRateLimit && code != agenterr.CodeSdkConnection {
		return nil
	}
	var delay time.Duration
	if e := agenterr.From(res.Err()); e != nil {
		delay = e.RetryAfter
	}
	return temporal.NewApplicationErrorWithOptions(res.Error.Message, code, temporal.ApplicationErrorOptions{NextRetryDelay: delay})
}

// heartbeat reports the activity alive, with details, until stop is
// called.
func heartbeat(ctx context.Context, details string) (stop func()) {
	info := activity.GetInfo(ctx)
	every := info.HeartbeatTimeout / 3
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx, details)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// build makes the run's agent on this worker: a new run for the first
// iteration, otherwise the run resumed from its journal, rewound to the
// iterations the workflow counted. restored says that dir is at the run's
// last commit, without the edits of an attempt of this iteration that was
// cut (agent.Config.WorkDirRestored); place is where the run's iteration
// under way stands, for the agent's checkpoints.
func (w *Activities) build(ctx context.Context, store journal.Store, run *RunInput, st RunState, dir string, restored bool, place *runPlace) (*agent.Agent, error) {
	cfg := agent.Config{WorkDir: dir, Store: store, Model: run.Model, BaseURL: run.BaseURL, MaxIterations: run.MaxIterations,
		Timeouts: run.Timeouts, MaxRetryAfter: run.MaxRetryAfter, Params: run.Params, RunID: run.RunID, Started: run.Started,
		Getenv: w.Getenv, TracerProvider: w.TracerProvider, WorkDirRestored: restored && run.Repo != "", NoSandbox: run.NoSandbox}
	server := w.Server
	server.Branch = run.Branch
	cfg.Temporal = &server
	if run.Repo != "" {
		cfg.Checkpoint = func(ctx context.Context) error {
			st, dir := place.get()
			return w.checkpoint(ctx, run, dir, st)
		}
	}
	found, ferr := store.Find("", run.RunID)
	switch {
	case ferr == nil:
		rec, err := agent.LoadRun(found.ID, found.Path)
		if err != nil {
			return nil, temporal.NewApplicationError("read the journal of run "+run.RunID, ErrTypeWorkDir, err)
		}
		if rec.Start == nil {
			// Created, then its worker died before run.start: start afresh.
			if err := os.RemoveAll(filepath.Dir(found.Path)); err != nil {
				return nil, temporal.NewApplicationError("remove an empty journal", ErrTypeWorkDir, err)
			}
			break
		}
		if n := rec.FinishedIterations(); n < st.Iteration {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"the journal of run %s in %s has %d finished iterations, the workflow %d: the workers do not share their state directory (set %s to the same directory on every worker)",
				run.RunID, found.Path, n, st.Iteration, journal.EnvStateDir), ErrTypeConflict, nil)
		} else if n > st.Iteration {
			rec.Rewind(st.Iteration)
		}
		cfg.Resume, cfg.Params = rec, nil
		if len(run.Definition) == 0 {
			// Later iterations read the definition the run pinned with
			// its journal.
			snap, err := agentdir.OpenSnapshot(filepath.Dir(found.Path), rec.Definition(), run.AgentDir)
			if err != nil {
				return nil, buildError(err)
			}
			if snap.Digest() != run.DefinitionDigest {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("run %s: its journal pinned definition %s, the workflow %s", run.RunID, snap.Digest(), run.DefinitionDigest), ErrTypeConflict, nil)
			}
			if cfg.Agent, err = configFromSnapshot(snap, run.AgentDir, cfg); err != nil {
				return nil, buildError(err)
			}
		}
	case st.Iteration > 0:
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"run %s is at iteration %d but its journal is not in the state directory %s: the workers do not share their state directory (set %s to the same directory on every worker)",
			run.RunID, st.Iteration, store.Dir, journal.EnvStateDir), ErrTypeConflict, ferr)
	}
	if cfg.Agent == nil {
		snap, err := unpackDefinition(run)
		if err != nil {
			return nil, buildError(err)
		}
		if cfg.Agent, err = configFromSnapshot(snap, run.AgentDir, cfg); err != nil {
			return nil, buildError(err)
		}
	}
	a, err := agent.New(ctx, cfg)
	if err != nil {
		return nil, buildError(err)
	}
	if err := a.Start(ctx); err != nil {
		a.Abandon()
		return nil, buildError(err)
	}
	return a, nil
}

// unpackDefinition reads the definition the run carries (gzip of
// agentdir.Snapshot.Tar).
func unpackDefinition(run *RunInput) (*agentdir.Snapshot, error) {
	if len(run.Definition) == 0 {
		e := agenterr.New(agenterr.CodeDefinitionMissing, agenterr.LayerConfiguration, false, "run %s: the agent definition was not sent and no journal of the run pinned it", run.RunID)
		e.Hint = "start the run again"
		return nil, e
	}
	zr, err := gzip.NewReader(bytes.NewReader(run.Definition))
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeDefinitionMismatch, agenterr.LayerConfiguration, false, "run %s: read the agent definition", run.RunID)
	}
	data, err := io.ReadAll(io.LimitReader(zr, agentdir.MaxTotalBytes+1<<20))
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeDefinitionMismatch, agenterr.LayerConfiguration, false, "run %s: read the agent definition", run.RunID)
	}
	return agentdir.SnapshotFromTar(data, run.DefinitionDigest, run.AgentDir)
}

// packDefinition compresses a definition tar for RunInput.Definition.
func packDefinition(tarball []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(tarball); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// buildError classifies an error building the agent: capstan's
// recoverable errors are retried, the others (configuration) are not.
func buildError(err error) error {
	code := agenterr.CodeOf(err)
	if code == "" {
		code = ErrTypeBuild
	}
	if agenterr.IsRecoverable(err) {
		return temporal.NewApplicationError(err.Error(), code, err)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), code, err)
}
