package scaleout

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// Error types of the iteration activity's failures (temporal
// ApplicationError types). Retryable ones are retried by the activity's
// retry policy; the others end the run.
const (
	// ErrTypeWorkDir: the work dir could not be checked out or committed
	// (retryable: the repository may be briefly unreachable).
	ErrTypeWorkDir = "WORKDIR"
	// ErrTypeConflict: the run's branch moved in a way no worker of this
	// run can explain (not retryable).
	ErrTypeConflict = "WORKDIR_CONFLICT"
	// ErrTypeBuild: the agent could not be built on the worker (not
	// retryable: a configuration problem).
	ErrTypeBuild = "BUILD"
	// ErrTypeNoWorkDir: the work dir of a run without a git repository is
	// not a directory on the worker (not retryable: the submitter named a
	// path the workers do not have).
	ErrTypeNoWorkDir = "WORKDIR_MISSING"
)

// nonRetryable are the failure types the iteration's retry policy never
// retries: capstan's own classification of errors that another attempt
// cannot fix (bad credentials, a request the provider rejects, a broken
// configuration).
var nonRetryable = []string{ErrTypeConflict, ErrTypeBuild, ErrTypeNoWorkDir, agenterr.CodeSdkAuth, agenterr.CodeSdkRequest,
	agenterr.CodeConfigurationValidation, agenterr.CodeUnknownProvider, agenterr.CodeDefinitionMismatch}

// Run is the workflow of one capstan run (registered as WorkflowName). It
// pins the run to a worker, runs iterations there until the run ends, and
// moves the run to another worker when its worker is lost. It returns the
// run's Result; a canceled workflow returns the Result of the canceled
// run (completionReason canceled).
func Run(ctx workflow.Context, in RunInput) (*event.RunResult, error) {
	opts := in.Options.withDefaults()
	st := RunState{Commit: in.BaseCommit}
	if in.State != nil {
		st = *in.State
	}
	var final *event.RunResult
	var recent []IterationOutcome
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) {
		return Progress{RunID: in.RunID, Agent: in.Agent, State: st, Result: final, Recent: recent}, nil
	}); err != nil {
		return nil, err
	}
	began := st.Iteration
	// A run no worker holds yet gives its next iteration to any worker
	// of the shared task queue with a free slot, which then holds it (the
	// result names its queue); runs recorded before asked a worker to pin
	// them first (acquire), an activity more per run.
	unpinned := workflow.GetVersion(ctx, versionUnpinnedIteration, workflow.DefaultVersion, 1) == 1
	for {
		if st.Queue == "" && !unpinned {
			q, err := acquire(ctx)
			if err != nil {
				return canceledOr(ctx, &in, st, err)
			}
			st.Queue = q
		}
		res, err := iterate(ctx, st.Queue, opts, &in, st, began+opts.ContinueEvery)
		if err != nil {
			var te *temporal.TimeoutError
			if errors.As(err, &te) && ctx.Err() == nil {
				// The worker the run is pinned to went silent or is gone:
				// another one checks out the last commit and redoes the
				// iteration.
				st.Moves++
				if st.Moves > opts.MaxMoves {
					return nil, fmt.Errorf("run %s: moved to another worker %d times; giving up: %w", in.RunID, st.Moves-1, err)
				}
				workflow.GetLogger(ctx).Warn("worker lost; moving the run", "run", in.RunID, "queue", st.Queue, "error", err)
				st.Queue = ""
				continue
			}
			return canceledOr(ctx, &in, st, err)
		}
		st.Iteration, st.Commit, st.Step, st.Usage, st.CostUSD = res.Iteration, res.Commit, res.Step, res.Usage, res.CostUSD
		if unpinned && res.Queue != "" {
			st.Queue = res.Queue
		}
		recent = append(recent, res.Earlier...)
		if res.Outcome != nil {
			st.Last = res.Outcome
			recent = append(recent, *res.Outcome)
		}
		if len(recent) > recentOutcomes {
			recent = recent[len(recent)-recentOutcomes:]
		}
		if res.Result != nil {
			final = res.Result
			return final, nil
		}
		if st.Iteration-began >= opts.ContinueEvery {
			next := in
			next.State, next.Definition = &st, nil // the journal keeps the definition
			return nil, workflow.NewContinueAsNewError(ctx, WorkflowName, next)
		}
	}
}

// iterationAttempts is how many times an iteration is attempted on its
// worker before its failure reaches the workflow (a provider outage gets
// up to outageAttempts, within the run's time budget).
const iterationAttempts = 5

// recentOutcomes is how many iteration outcomes the progress query keeps.
const recentOutcomes = 64

// acquire asks any worker of the shared task queue for a task queue of
// its own, to which the run's iterations then go.
func acquire(ctx workflow.Context) (string, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second},
		Summary:             "pin the run to a worker",
	})
	var q string
	err := workflow.ExecuteActivity(actx, ActivityAcquire).Get(ctx, &q)
	return q, err
}

// versionUnpinnedIteration marks histories whose runs are pinned by their
// first iteration's worker (workflow.GetVersion).
const versionUnpinnedIteration = "unpinned-iteration"

// iterate runs one iteration on the run's worker, or, with queue "", on
// any worker of the workflow's task queue (waiting for one as long as it
// takes), whose queue the result names; short iterations after it run in
// the same activity until chainUntil iterations have finished (Iterate).
func iterate(ctx workflow.Context, queue string, opts WorkflowOptions, in *RunInput, st RunState, chainUntil int) (*IterationResult, error) {
	scheduleToStart := opts.ScheduleToStart
	if queue == "" {
		scheduleToStart = 0
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: scheduleToStart,
		StartToCloseTimeout:    opts.IterationTimeout,
		HeartbeatTimeout:       opts.Heartbeat,
		WaitForCancellation:    true,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: outageAttempts, NonRetryableErrorTypes: nonRetryable},
		Summary: fmt.Sprintf("iteration %d", st.Iteration+1),
	})
	if opts.ChainFor <= 0 {
		chainUntil = 0
	}
	run := *in
	if st.Iteration > 0 {
		// The first iteration pinned the definition with the run's journal;
		// the history need not carry it again.
		run.Definition = nil
	}
	run.State = nil
	var res IterationResult
	err := workflow.ExecuteActivity(actx, ActivityIterate, IterationInput{Run: &run, State: st, ChainUntil: chainUntil, ChainFor: opts.ChainFor}).Get(ctx, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// canceledOr turns a failure of a canceled workflow into the canceled
// run's Result (its worker journaled run.end when it could; a run canceled
// while waiting for a worker has none); other failures fail the workflow.
func canceledOr(ctx workflow.Context, in *RunInput, st RunState, err error) (*event.RunResult, error) {
	if ctx.Err() == nil {
		return nil, err
	}
	var res *event.RunResult
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.HasDetails() && ae.Details(&res) == nil && res != nil {
		return res, nil
	}
	cerr := agenterr.New(agenterr.CodeCanceled, agenterr.LayerLoop, true, "run canceled")
	return &event.RunResult{CompletionReason: agent.ReasonCanceled, Reason: "canceled", RunID: in.RunID, Agent: in.Agent,
		Model: in.Model, Iterations: st.Iteration, StepID: st.Step, Usage: st.Usage, CostUSD: st.CostUSD,
		Error: event.NewResultError(cerr)}, nil
}
