package scaleout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/verify"
)

// Dial connects to the Temporal frontend at hostPort (HOST:PORT) in
// namespace ("" = default). Diagnostics of the SDK go to logw (nil =
// discarded).
func Dial(ctx context.Context, hostPort, namespace string, logw io.Writer) (client.Client, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if logw == nil {
		logw = io.Discard
	}
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.DialContext(ctx, client.Options{HostPort: hostPort, Namespace: namespace, Logger: logger})
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeSdkConnection, agenterr.LayerLifecycle, true, "connect to Temporal at %s (namespace %s)", hostPort, namespace)
		e.Hint = "start a server (temporal server start-dev) or pass the frontend's HOST:PORT with --temporal"
		return nil, e
	}
	return c, nil
}

// WorkerConfig configures a worker.
type WorkerConfig struct {
	// TaskQueue is the shared task queue runs are submitted to ("" =
	// DefaultTaskQueue).
	TaskQueue string
	// Root is where the worker checks out runs' work dirs.
	Root string
	// Store is the journal store (shared by every worker of the task queue).
	Store journal.Store
	// Getenv reads the worker's environment (nil = os.Getenv).
	Getenv func(string) string
	// TracerProvider, when set, traces every iteration the worker runs
	// (agent.Config.TracerProvider).
	TracerProvider trace.TracerProvider
	// MaxConcurrentRuns bounds the iterations — one per run — the worker
	// runs at once (0 = DefaultMaxConcurrentRuns).
	MaxConcurrentRuns int
	// Ready, when set, is called once the worker polls its queues, with
	// its own task queue.
	Ready func(queue string)
	// Issues opens the issue stores of issue workflows (capstan workflow
	// run --temporal); nil: the worker fails their issue activities.
	Issues OpenIssues
	// Address and Namespace are the server the worker is connected to,
	// recorded in its runs' journals (run.start temporal) so that a local
	// resume can name the command that continues a run there.
	Address, Namespace string
}

// RunWorker runs a worker until ctx ends: it executes capstan.Run
// workflows from the shared task queue, pins runs to itself, and runs
// their iterations.
func RunWorker(ctx context.Context, c client.Client, cfg WorkerConfig) error {
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = DefaultTaskQueue
	}
	if cfg.MaxConcurrentRuns <= 0 {
		cfg.MaxConcurrentRuns = DefaultMaxConcurrentRuns()
	}
	host, _ := os.Hostname()
	own := fmt.Sprintf("%s@%s-%d-%s", cfg.TaskQueue, host, os.Getpid(), randomHex(4))
	acts := &Activities{Queue: own, Root: cfg.Root, Store: cfg.Store, Getenv: cfg.Getenv, TracerProvider: cfg.TracerProvider,
		Server: agent.TemporalRun{Address: cfg.Address, Namespace: cfg.Namespace, TaskQueue: cfg.TaskQueue}}
	defer acts.Close()
	// The iterations of runs this worker holds come on its own queue, the
	// first iteration of a run (and of one that moved) on the shared one:
	// both draw from one budget of MaxConcurrentRuns activity slots, so a
	// worker takes a new run only when it has room for it.
	slots, err := worker.NewFixedSizeSlotSupplier(cfg.MaxConcurrentRuns)
	if err != nil {
		return err
	}
	sharedTuner, err := runSlotsTuner(slots)
	if err != nil {
		return err
	}
	pinnedTuner, err := runSlotsTuner(slots)
	if err != nil {
		return err
	}
	shared := worker.New(c, cfg.TaskQueue, worker.Options{DisableRegistrationAliasing: true, Tuner: sharedTuner})
	shared.RegisterWorkflowWithOptions(Run, workflow.RegisterOptions{Name: WorkflowName})
	shared.RegisterActivityWithOptions(acts.Acquire, activity.RegisterOptions{Name: ActivityAcquire})
	shared.RegisterActivityWithOptions(acts.Iterate, activity.RegisterOptions{Name: ActivityIterate})
	ia := &IssueActivities{Open: cfg.Issues}
	shared.RegisterWorkflowWithOptions(IssueWorkflow, workflow.RegisterOptions{Name: IssueWorkflowName})
	shared.RegisterActivityWithOptions(ia.Read, activity.RegisterOptions{Name: ActivityIssueRead})
	shared.RegisterActivityWithOptions(ia.Change, activity.RegisterOptions{Name: ActivityIssueChange})
	shared.RegisterActivityWithOptions(ia.BranchTip, activity.RegisterOptions{Name: ActivityBranchTip})
	pinned := worker.New(c, own, worker.Options{DisableRegistrationAliasing: true, Tuner: pinnedTuner})
	pinned.RegisterActivityWithOptions(acts.Iterate, activity.RegisterOptions{Name: ActivityIterate})
	if err := pinned.Start(); err != nil {
		return fmt.Errorf("start the worker of queue %s: %w", own, err)
	}
	defer pinned.Stop()
	if err := shared.Start(); err != nil {
		return fmt.Errorf("start the worker of queue %s: %w", cfg.TaskQueue, err)
	}
	defer shared.Stop()
	if cfg.Ready != nil {
		cfg.Ready(own)
	}
	<-ctx.Done()
	return nil
}

// runSlotsTuner is the slot tuner of one of a worker's two Temporal
// workers: activities take their slots from runs, shared by both; the
// other kinds of task have the SDK's default fixed sizes of their own.
func runSlotsTuner(runs worker.SlotSupplier) (worker.WorkerTuner, error) {
	sizes := make([]worker.SlotSupplier, 4)
	for i, n := range []int{defaultWorkflowSlots, defaultLocalActivitySlots, defaultWorkflowSlots, runs.MaxSlots()} {
		s, err := worker.NewFixedSizeSlotSupplier(n)
		if err != nil {
			return nil, err
		}
		sizes[i] = s
	}
	return worker.NewCompositeTuner(worker.CompositeTunerOptions{WorkflowSlotSupplier: sizes[0], LocalActivitySlotSupplier: sizes[1],
		NexusSlotSupplier: sizes[2], SessionActivitySlotSupplier: sizes[3], ActivitySlotSupplier: runs})
}

// The SDK's default slot counts of the tasks that are not activities
// (worker.Options MaxConcurrentWorkflowTaskExecutionSize and
// MaxConcurrentLocalActivityExecutionSize).
const (
	defaultWorkflowSlots      = 1000
	defaultLocalActivitySlots = 1000
)

// DefaultMaxConcurrentRuns is how many runs a worker runs at once unless
// told otherwise: four per core of the machine, since an iteration mostly
// waits for the model's answers.
func DefaultMaxConcurrentRuns() int {
	return 4 * runtime.NumCPU()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewRunID returns a run ID for a run submitted now: capstan's run ID
// format, with a random suffix so that runs submitted at once differ.
func NewRunID(now time.Time) string {
	return journal.NewRunID(now) + "-" + randomHex(3)
}

// Submission is what PrepareRun needs to make a RunInput.
type Submission struct {
	// Agent is the pinned agent definition (agent.LoadPinned).
	Agent *agentdir.Agent
	// WorkDir is the run's work dir on the submitting machine.
	WorkDir string
	// Repo is the git repository every worker reaches ("" = WorkDir's own
	// repository, when WorkDir is in one).
	Repo string
	// RunID names the run ("" = NewRunID).
	RunID string
	// Model, BaseURL, Params, MaxIterations and the rest are the run's
	// options as `capstan run` takes them.
	Model         string
	BaseURL       string
	Params        map[string]string
	MaxIterations int
	Timeouts      llm.Timeouts
	MaxRetryAfter time.Duration
	// NoSandbox runs the agent's commands unsandboxed (--no-sandbox).
	NoSandbox bool
	Options   WorkflowOptions
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// PrepareRun makes the workflow input of a run: the pinned definition,
// the run's options and its branch. When the work dir is a git
// repository, the run's branch capstan/<run id> is created in Repo at the
// work dir's HEAD (uncommitted changes are not part of the run).
func PrepareRun(ctx context.Context, s Submission) (*RunInput, error) {
	ins, err := PrepareRuns(ctx, s, []map[string]string{s.Params})
	if err != nil {
		return nil, err
	}
	return ins[0], nil
}

// PrepareRuns makes the workflow inputs of len(params) runs of one
// submission, one per parameter set (s.Params is not used): the
// definition is packed, the work dir checked and its HEAD read once, and
// every run's branch is created with a single push. Each run gets its
// own run ID; s.RunID names a single run only.
func PrepareRuns(ctx context.Context, s Submission, params []map[string]string) ([]*RunInput, error) {
	if len(params) == 0 {
		return nil, errors.New("scaleout: no runs to prepare")
	}
	if s.RunID != "" && len(params) > 1 {
		return nil, errors.New("scaleout: a run ID names one run; leave it empty for a batch")
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	snap, tarball, err := packAgent(s.Agent)
	if err != nil {
		return nil, err
	}
	if err := noCredentialIn("--repo", s.Repo); err != nil {
		return nil, err
	}
	// The base URL goes into workflow input as it is, and runner.baseUrl
	// with the definition: neither may carry a key. (The workers' own
	// environment is checked by each worker.)
	if err := agent.CheckBaseURLs(s.Model, s.BaseURL, s.Agent.Definition().Runner.BaseURL, s.Agent.Dir(), nil); err != nil {
		return nil, err
	}
	wd, err := filepath.Abs(s.WorkDir)
	if err != nil {
		return nil, err
	}
	ins := make([]*RunInput, len(params))
	started := now().UTC()
	for i, p := range params {
		ins[i] = &RunInput{RunID: s.RunID, Agent: s.Agent.Definition().Name, AgentDir: s.Agent.Dir(), Definition: tarball,
			DefinitionDigest: snap.Digest(), Model: s.Model, BaseURL: s.BaseURL, Params: p, MaxIterations: s.MaxIterations,
			Timeouts: s.Timeouts, MaxRetryAfter: s.MaxRetryAfter, NoSandbox: s.NoSandbox, WorkDir: wd, Started: started, Options: s.Options}
		if ins[i].RunID == "" {
			ins[i].RunID = NewRunID(started)
		}
	}
	head, err := workDirHead(ctx, wd, s.Repo)
	if err != nil || head == "" {
		return ins, err // not a repository: the work dir is used as it is
	}
	repo := s.Repo
	if repo == "" {
		repo = wd
	}
	branches := make([]string, len(ins))
	for i, in := range ins {
		in.Repo, in.Branch, in.BaseCommit, in.WorkDir = repo, "capstan/"+in.RunID, head, ""
		branches[i] = in.Branch
	}
	if err := pushBranch(ctx, wd, repo, head, branches...); err != nil {
		return nil, err
	}
	return ins, nil
}

// pushBranch creates the branches at commit head in repo, from the work
// dir wd, with one git push (per pushChunk branches, which keeps the
// command line short).
func pushBranch(ctx context.Context, wd, repo, head string, branches ...string) error {
	for chunk := range slices.Chunk(branches, pushChunk) {
		args := []string{"push", "-q", repo}
		for _, b := range chunk {
			args = append(args, head+":refs/heads/"+b)
		}
		if _, err := git(ctx, wd, args...); err != nil {
			what := "the run's branch " + branches[0]
			if len(branches) > 1 {
				what = fmt.Sprintf("the branches of %d runs", len(branches))
			}
			return fmt.Errorf("scaleout: create %s in %s: %w", what, repo, err)
		}
	}
	return nil
}

// pushChunk is how many run branches one git push creates.
const pushChunk = 500

// workDirHead is the HEAD commit of the git repository whose top level is
// the work dir wd, or "" when wd is not in a repository (then repo, the
// --repo of the run, must be ""). A work dir inside a repository, or a
// repository without a commit, is refused.
func workDirHead(ctx context.Context, wd, repo string) (string, error) {
	// One git for both in the usual case; a second one tells a work dir
	// outside any repository from a repository without a commit.
	top, err := git(ctx, wd, "rev-parse", "--show-toplevel", "HEAD")
	head := ""
	if err == nil {
		top, head, _ = strings.Cut(top, "\n")
	} else if top, err = git(ctx, wd, "rev-parse", "--show-toplevel"); err != nil {
		if repo != "" {
			return "", fmt.Errorf("scaleout: --repo %s needs the work dir %s to be a git repository: %w", repo, wd, err)
		}
		return "", nil
	}
	real := wd
	if r, err := filepath.EvalSymlinks(wd); err == nil {
		real = r
	}
	if filepath.Clean(top) != real {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerLifecycle, false,
			"the work dir %s is inside the git repository %s; a run on Temporal checks out whole repositories", wd, top)
		e.Hint = "pass --workdir " + verify.ShellQuote(top)
		return "", e
	}
	if head == "" {
		_, err := git(ctx, wd, "rev-parse", "HEAD")
		e := agenterr.Wrap(err, agenterr.CodeConfigurationValidation, agenterr.LayerLifecycle, false, "the work dir's repository %s has no commit", wd)
		q := verify.ShellQuote(wd)
		e.Hint = "commit the work dir's files first: git -C " + q + " add -A && git -C " + q + " commit --allow-empty -m start"
		return "", e
	}
	return head, nil
}

// packAgent is the pinned agent's definition as a run's workflow input
// carries it (gzipped tar), refused when it is too large.
func packAgent(a *agentdir.Agent) (*agentdir.Snapshot, []byte, error) {
	snap, ok := a.FS().(*agentdir.Snapshot)
	if !ok {
		return nil, nil, errors.New("scaleout: the agent must be loaded pinned (agent.LoadPinned)")
	}
	tarball, err := snap.Tar()
	if err == nil {
		tarball, err = packDefinition(tarball)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(tarball) > maxDefinitionBytes {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"the agent definition is %d bytes compressed; a run on Temporal carries it in its workflow input, limited to %d bytes", len(tarball), maxDefinitionBytes)
		e.File = a.Dir()
		e.Hint = "move large files (data, binaries) out of the agent folder into the work dir"
		return nil, nil, e
	}
	return snap, tarball, nil
}

// maxDefinitionBytes bounds the agent definition a workflow input carries
// (Temporal warns at 256 KiB per payload).
const maxDefinitionBytes = 192 << 10

// Start starts the run's workflow on the shared task queue. A run already
// started under the same ID is attached to, not started twice.
func Start(ctx context.Context, c client.Client, taskQueue string, in *RunInput) (client.WorkflowRun, error) {
	if taskQueue == "" {
		taskQueue = DefaultTaskQueue
	}
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: in.RunID, TaskQueue: taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "capstan " + in.Agent,
		StaticDetails:            fmt.Sprintf("agent `%s` · model `%s` · branch `%s`", in.Agent, in.Model, in.Branch),
	}, WorkflowName, *in)
}

// StartRuns starts the workflows of runs on the shared task queue, at
// most parallel at once (<= 0: 16), and returns each run's error (nil
// when it started), in the order of runs.
func StartRuns(ctx context.Context, c client.Client, taskQueue string, runs []*RunInput, parallel int) []error {
	if parallel <= 0 {
		parallel = 16
	}
	errs := make([]error, len(runs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, in := range runs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, errs[i] = Start(ctx, c, taskQueue, in)
		}()
	}
	wg.Wait()
	return errs
}

// Follow reports the run's progress to onProgress whenever it changes,
// polling every interval, until the run ends, and returns its Result. A
// run whose workflow failed (not a run that did not complete: a workflow
// that could not run) is an error.
func Follow(ctx context.Context, c client.Client, runID string, interval time.Duration, onProgress func(Progress)) (*event.RunResult, error) {
	wr := c.GetWorkflow(ctx, runID, "")
	done := make(chan error, 1)
	var res *event.RunResult
	go func() { done <- wr.Get(ctx, &res) }()
	t := time.NewTicker(interval)
	defer t.Stop()
	last := -1
	poll := func() {
		if onProgress == nil {
			return
		}
		v, err := c.QueryWorkflow(ctx, runID, "", QueryProgress)
		if err != nil {
			return // between runs of a continued workflow, or not started yet
		}
		var p Progress
		if v.Get(&p) == nil && p.State.Iteration != last {
			last = p.State.Iteration
			onProgress(p)
		}
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, runFailed(runID, err)
			}
			poll() // the iterations since the last poll
			return res, nil
		case <-t.C:
			poll()
		}
	}
}

// runFailed is the error of a run whose workflow failed: the worker's own
// error as a capstan error, without Temporal's chain of wrappers around
// it. A work dir or an agent the worker does not have is CONFIG_INVALID; a
// worker's capstan error keeps its code; a work dir or journal that
// changed under the run is EXTERNAL_STATE. Any other failure (a canceled
// or timed-out workflow) is returned as it is.
func runFailed(runID string, err error) error {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		return fmt.Errorf("run %s: %w", runID, err)
	}
	code, msg, hint := ae.Type(), ae.Message(), ""
	switch code {
	case ErrTypeNoWorkDir:
		code = agenterr.CodeConfigurationValidation
		hint = "pass --workdir a directory that exists on every worker, or a clone of a git repository the workers can fetch (or --repo URL): each worker then checks out the run's branch"
	case ErrTypeBuild:
		code = agenterr.CodeConfigurationValidation
	case ErrTypeConflict, ErrTypeWorkDir:
		code = agenterr.CodeExternalState
	default:
		// The worker's capstan error, whose message starts with its code.
		msg = strings.TrimPrefix(msg, code+": ")
	}
	e := agenterr.New(code, agenterr.LayerLifecycle, false, "run %s failed on its worker: %s", runID, msg)
	e.Hint = hint
	return e
}

// ErrNoRun is Cancel's error for a run ID the server does not know.
var ErrNoRun = errors.New("no such run on Temporal")

// ErrRunEnded is Cancel's error for a run whose workflow has already
// closed: there is nothing left to cancel.
var ErrRunEnded = errors.New("run already ended")

// Cancel asks the run's workflow to cancel: the iteration under way is
// interrupted and the run ends with completionReason canceled. A run that
// has already ended is ErrRunEnded, naming Temporal's status of it, since
// the server accepts a cancel request for a closed workflow and ignores it.
func Cancel(ctx context.Context, c client.Client, runID string) error {
	var nf *serviceerror.NotFound
	desc, err := c.DescribeWorkflowExecution(ctx, runID, "")
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s", ErrNoRun, runID)
	}
	if err != nil {
		return fmt.Errorf("cancel run %s: %w", runID, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("%w: %s is %s on Temporal, nothing to cancel", ErrRunEnded, runID, strings.ToLower(statusName(st)))
	}
	if err := c.CancelWorkflow(ctx, runID, ""); err != nil {
		if errors.As(err, &nf) {
			return fmt.Errorf("%w: %s", ErrNoRun, runID)
		}
		return fmt.Errorf("cancel run %s: %w", runID, err)
	}
	return nil
}

// statusName is a workflow status without its enum prefix: "RUNNING",
// "COMPLETED", "CANCELED"….
func statusName(st enumspb.WorkflowExecutionStatus) string {
	return strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_")
}

// RunSummary is one run as Temporal lists it.
type RunSummary struct {
	RunID  string    `json:"runId"`
	Status string    `json:"status"`
	Start  time.Time `json:"start"`
	Close  time.Time `json:"close,omitzero"`
	// Failure is why a failed run's workflow failed (Status FAILED), as
	// capstan reports it when following the run.
	Failure string `json:"failure,omitempty"`
}

// List returns the capstan runs Temporal knows in the client's namespace,
// newest first (at most limit).
func List(ctx context.Context, c client.Client, limit int) ([]RunSummary, error) {
	var out []RunSummary
	var token []byte
	seen := map[string]bool{}
	for len(out) < limit {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: "WorkflowType = '" + WorkflowName + "'", NextPageToken: token, PageSize: int32(limit)})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		for _, e := range resp.Executions {
			if seen[e.GetExecution().GetWorkflowId()] {
				continue // an earlier part of a run that continued as new
			}
			seen[e.GetExecution().GetWorkflowId()] = true
			s := RunSummary{RunID: e.GetExecution().GetWorkflowId(), Status: statusName(e.GetStatus())}
			if t := e.GetStartTime(); t != nil {
				s.Start = t.AsTime()
			}
			if t := e.GetCloseTime(); t != nil {
				s.Close = t.AsTime()
			}
			if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
				// A closed workflow's Get returns its failure at once.
				if err := c.GetWorkflow(ctx, s.RunID, e.GetExecution().GetRunId()).Get(ctx, nil); err != nil {
					s.Failure = runFailed(s.RunID, err).Error()
				}
			}
			out = append(out, s)
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	return out, nil
}

// noCredentialIn rejects a git URL that carries a password (https://user:token@host):
// workflow input is stored in Temporal's history and shown by its UI, and
// secrets stay in the workers' own environment and git credential helpers.
func noCredentialIn(flag, value string) error {
	u, err := url.Parse(value)
	if err != nil || u.User == nil {
		return nil
	}
	if _, hasPassword := u.User.Password(); !hasPassword {
		return nil
	}
	e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
		"%s carries a password or token in its URL; a run on Temporal records it in workflow history", flag)
	e.Hint = "drop the user:password@ part and give the workers the credential (git credential helper, API key in their environment)"
	return e
}

// Continue prepares the continuation of run runID, whose workflow ended
// without completing on a recoverable error (a provider outage that
// outlasted its time budget, say): the run's input as its last workflow
// execution got it, with the state the run ended in — its finished
// iterations, step, usage, and its branch's tip as the commit to continue
// from — and a time budget counted from now, as a local resume has. Start
// it with Start under the same id: the worker continues the run's journal
// and its branch.
func Continue(ctx context.Context, c client.Client, runID string) (*RunInput, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, fmt.Errorf("run %s is still running on Temporal: there is nothing to resume", runID)
	}
	var res *event.RunResult
	if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &res); err != nil {
		return nil, fmt.Errorf("run %s: its workflow failed (%w); reset it instead: temporal workflow reset --workflow-id %s --type LastWorkflowTask", runID, runFailed(runID, err), runID)
	}
	switch {
	case res == nil:
		return nil, fmt.Errorf("run %s: its workflow has no result", runID)
	case res.Success:
		return nil, fmt.Errorf("run %s already completed: there is nothing to resume", runID)
	case res.Error == nil || !res.Error.Recoverable:
		return nil, fmt.Errorf("run %s ended %s, which resuming cannot change: continue the work with a new run on its branch", runID, res.CompletionReason)
	}
	it := c.GetWorkflowHistory(ctx, runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return nil, fmt.Errorf("run %s: its workflow history is empty", runID)
	}
	first, err := it.Next()
	if err != nil {
		return nil, fmt.Errorf("run %s: read its workflow history: %w", runID, err)
	}
	attrs := first.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return nil, fmt.Errorf("run %s: its workflow history does not start with its input", runID)
	}
	var in RunInput
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in); err != nil {
		return nil, fmt.Errorf("run %s: read its input: %w", runID, err)
	}
	st := RunState{Iteration: res.Iterations, Commit: in.BaseCommit, Step: res.StepID, Usage: res.Usage, CostUSD: res.CostUSD}
	if in.State != nil {
		st.Commit, st.Moves = in.State.Commit, in.State.Moves
	}
	if in.Repo != "" {
		out, err := git(ctx, os.TempDir(), append(slices.Clone(checkoutHardening), "ls-remote", in.Repo, "refs/heads/"+in.Branch)...)
		tip, _, _ := strings.Cut(out, "\t")
		if err != nil || tip == "" {
			return nil, fmt.Errorf("run %s: read its branch %s in %s: %v", runID, in.Branch, in.Repo, err)
		}
		st.Commit = tip
	}
	in.State, in.Started = &st, time.Now()
	return &in, nil
}
