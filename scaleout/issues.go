package scaleout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	issueflow "github.com/capstan-dev/capstan/workflow"
)

// Names of the issue workflow and its activities (capstan workflow run
// --temporal), as Temporal's UI shows them. Like WorkflowName they are
// recorded in histories.
const (
	IssueWorkflowName   = "capstan.Issue"
	ActivityIssueRead   = "capstan.IssueRead"
	ActivityIssueChange = "capstan.IssueChange"
	ActivityBranchTip   = "capstan.BranchTip"
	// MemoPhase is the memo field that holds the issue's current phase,
	// MemoStatus its status once it ended.
	MemoPhase  = "phase"
	MemoStatus = "status"
)

// IssueStore names where an issue workflow's issues are; each worker
// opens it with its own means (WorkerConfig.Issues).
type IssueStore struct {
	// Local is a directory in climpt's subject-store layout (the same
	// path on every worker).
	Local string `json:"local,omitempty"`
	// Repo is a GitHub repository OWNER/NAME, reached with the workers'
	// gh.
	Repo string `json:"repo,omitempty"`
}

// String names the store for workflow IDs and messages.
func (s IssueStore) String() string {
	if s.Local != "" {
		return "local:" + s.Local
	}
	return "github:" + s.Repo
}

// OpenIssues opens an issue store on a worker.
type OpenIssues func(IssueStore) (issueflow.Issues, error)

// DispatchAgent is an agent an issue workflow may dispatch, pinned by the
// submitter: each dispatch is a capstan.Run child workflow of it.
type DispatchAgent struct {
	// Name and Dir are the agent's name and folder (for display and the
	// journal).
	Name string `json:"name"`
	Dir  string `json:"dir"`
	// Definition is the gzipped definition tar, Digest its digest.
	Definition []byte `json:"definition"`
	Digest     string `json:"digest"`
	// Params are the parameters the agent declares: the orchestrator's
	// values it receives.
	Params []string `json:"params,omitempty"`
}

// IssueInput is an issue workflow's input.
type IssueInput struct {
	// RunID is the capstan workflow run the issue belongs to; it is part
	// of every idempotency key.
	RunID string `json:"runId"`
	Issue int    `json:"issue"`
	// WorkflowFile and Workflow are the workflow file's name and bytes,
	// parsed again (deterministically) by the workflow.
	WorkflowFile string     `json:"workflowFile"`
	Workflow     []byte     `json:"workflow"`
	Store        IssueStore `json:"store"`
	// Agents are the agents the phases dispatch, by workflow agent id.
	Agents map[string]DispatchAgent `json:"agents,omitempty"`
	// Stub, when set, gives agents fixed outcomes instead of runs
	// (--stub-dispatch).
	Stub map[string]string `json:"stub,omitempty"`
	// Model and BaseURL are every dispatched run's (as capstan run
	// takes them; "" = the agent's own).
	Model   string `json:"model,omitempty"`
	BaseURL string `json:"baseUrl,omitempty"`
	// Repo and Branch: the git repository every worker reaches and the
	// issue's branch in it, on which each dispatched run continues from
	// the previous one's last commit. Empty Repo: WorkDir is used as it
	// is on the workers.
	Repo    string `json:"repo,omitempty"`
	Branch  string `json:"branch,omitempty"`
	WorkDir string `json:"workDir,omitempty"`
	// TaskQueue is the shared task queue of the child runs.
	TaskQueue string `json:"taskQueue,omitempty"`
	// Options tune the child runs' workflows and the issue activities.
	Options WorkflowOptions `json:"options,omitzero"`
}

// IssueEvent is one event of the issue's account, for the workflow run's
// journal.
type IssueEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// IssueOutput is what an issue workflow returns.
type IssueOutput struct {
	Result event.WorkflowIssueResult `json:"result"`
	// Events are the issue's journal events in order (workflow.phase,
	// workflow.dispatch, …), written to the workflow run's journal by
	// the submitter.
	Events []IssueEvent `json:"events"`
}

// IssueWorkflowID is the workflow ID of an issue's workflow: one per
// issue, store and workflow, so a second workflow run of the same issue
// cannot start while one runs.
func IssueWorkflowID(store IssueStore, workflowID string, issue int) string {
	return fmt.Sprintf("capstan-issue/%s/%s/%d", store, workflowID, issue)
}

// IssueWorkflow is the workflow of one issue (registered as
// IssueWorkflowName): the same Runner as capstan workflow run, with the
// issue's reads and writes as activities on the workers (each write
// applied once under its step's idempotency key), each dispatched agent a
// capstan.Run child workflow, and rules.cycleDelayMs a durable timer. The
// current phase is the workflow's details and memo.
func IssueWorkflow(ctx workflow.Context, in IssueInput) (*IssueOutput, error) {
	wf, res := issueflow.Parse(in.WorkflowFile, in.Workflow)
	if !res.Valid() {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("workflow file %s is invalid", in.WorkflowFile), ErrTypeBuild, nil)
	}
	opts := in.Options.withDefaults()
	events := &issueEvents{ctx: ctx}
	r := &issueflow.Runner{
		Workflow: wf,
		Issues:   &workflowIssues{ctx: ctx, in: &in, opts: opts},
		Dispatch: &childDispatcher{ctx: ctx, in: &in, opts: opts},
		Events:   events,
		// rules.cycleDelayMs is a durable timer.
		Sleep: func(_ context.Context, d time.Duration) error { return workflow.Sleep(ctx, d) },
		Now:   func() time.Time { return workflow.Now(ctx) },
	}
	// The Runner's calls carry the step of a move in their context; the
	// workflow's own context is what the activities run under.
	ir := r.RunIssue(context.Background(), in.Issue)
	return &IssueOutput{Result: ir, Events: events.list}, nil
}

// issueEvents collects the issue's journal events and shows its phase.
type issueEvents struct {
	ctx  workflow.Context
	list []IssueEvent
}

// Emit implements event.Emitter.
func (e *issueEvents) Emit(p event.Payload) {
	k := p.EventKind()
	t := string(k)
	b, err := json.Marshal(p)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	e.list = append(e.list, IssueEvent{Type: t, Data: b})
	var d struct {
		Issue  int    `json:"issue"`
		Phase  string `json:"phase"`
		Agent  string `json:"agent"`
		Status string `json:"status"`
		Final  string `json:"finalPhase"`
	}
	_ = json.Unmarshal(b, &d)
	switch k {
	case event.KindWorkflowPhase:
		workflow.SetCurrentDetails(e.ctx, fmt.Sprintf("issue #%d: phase **%s**", d.Issue, d.Phase))
		_ = workflow.UpsertMemo(e.ctx, map[string]any{MemoPhase: d.Phase})
	case event.KindWorkflowDispatch:
		workflow.SetCurrentDetails(e.ctx, fmt.Sprintf("issue #%d: phase **%s**, agent `%s` running", d.Issue, d.Phase, d.Agent))
	case event.KindWorkflowIssueEnd:
		workflow.SetCurrentDetails(e.ctx, fmt.Sprintf("issue #%d: %s at phase **%s**", d.Issue, d.Status, d.Final))
		_ = workflow.UpsertMemo(e.ctx, map[string]any{MemoPhase: d.Final, MemoStatus: d.Status})
	}
}

// errNotInIssueWorkflow is the error of the Issues operations a batch
// needs (listing, label sync): the submitter does them, not the issue
// workflow.
var errNotInIssueWorkflow = errors.New("not available in an issue workflow: the submitter lists issues and syncs labels")

// workflowIssues is Issues for the Runner inside an issue workflow: reads
// and writes are activities, each write under its step's idempotency key.
type workflowIssues struct {
	ctx  workflow.Context
	in   *IssueInput
	opts WorkflowOptions
}

// IssueReadInput asks a worker for an issue's labels or latest comments.
type IssueReadInput struct {
	Store IssueStore `json:"store"`
	Issue int        `json:"issue"`
	// Comments, when positive, asks for that many latest comments instead
	// of the labels.
	Comments int `json:"comments,omitempty"`
}

// IssueReadResult is what IssueRead returns.
type IssueReadResult struct {
	Labels   []string `json:"labels,omitempty"`
	Comments []string `json:"comments,omitempty"`
}

// IssueChangeInput is one write to an issue under an idempotency key.
type IssueChangeInput struct {
	Store  IssueStore       `json:"store"`
	Change issueflow.Change `json:"change"`
}

func (w *workflowIssues) activity(summary string) workflow.Context {
	return workflow.WithActivityOptions(w.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    w.opts.Heartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			MaximumAttempts: issueAttempts},
		Summary: summary,
	})
}

// issueAttempts bounds the attempts of one issue read or write (gh may be
// briefly unreachable); then the move fails and is undone.
const issueAttempts = 4

func (w *workflowIssues) read(in IssueReadInput, summary string) (IssueReadResult, error) {
	var out IssueReadResult
	err := workflow.ExecuteActivity(w.activity(summary), ActivityIssueRead, in).Get(w.ctx, &out)
	return out, activityError(err)
}

func (w *workflowIssues) change(ctx context.Context, c issueflow.Change) error {
	step, ok := issueflow.StepOf(ctx)
	if !ok {
		return fmt.Errorf("issue #%d: a %s change outside a move has no idempotency key", c.Issue, c.Kind)
	}
	c.Key = step.Key(w.in.RunID)
	err := workflow.ExecuteActivity(w.activity(fmt.Sprintf("#%d cycle %d: %s", step.Issue, step.Cycle, step.Name)),
		ActivityIssueChange, IssueChangeInput{Store: w.in.Store, Change: c}).Get(w.ctx, nil)
	return activityError(err)
}

// activityError is the worker's own message of a failed issue activity.
func activityError(err error) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return errors.New(ae.Message())
	}
	return err
}

func (w *workflowIssues) Labels(_ context.Context, issue int) ([]string, error) {
	out, err := w.read(IssueReadInput{Store: w.in.Store, Issue: issue}, fmt.Sprintf("#%d: read labels", issue))
	return out.Labels, err
}

func (w *workflowIssues) RecentComments(_ context.Context, issue, limit int) ([]string, error) {
	out, err := w.read(IssueReadInput{Store: w.in.Store, Issue: issue, Comments: max(limit, 1)}, fmt.Sprintf("#%d: read comments", issue))
	return out.Comments, err
}

func (w *workflowIssues) EditLabels(ctx context.Context, issue int, remove, add []string) error {
	if len(remove) == 0 && len(add) == 0 {
		return nil
	}
	return w.change(ctx, issueflow.Change{Issue: issue, Kind: issueflow.ChangeLabels, Remove: remove, Add: add})
}

func (w *workflowIssues) Comment(ctx context.Context, issue int, body string) error {
	return w.change(ctx, issueflow.Change{Issue: issue, Kind: issueflow.ChangeComment, Body: body})
}

func (w *workflowIssues) Close(ctx context.Context, issue int) error {
	return w.change(ctx, issueflow.Change{Issue: issue, Kind: issueflow.ChangeClose})
}

func (w *workflowIssues) Closed(context.Context, int) (bool, error) {
	return false, errNotInIssueWorkflow
}

func (w *workflowIssues) List(context.Context, issueflow.Criteria) ([]issueflow.Listed, error) {
	return nil, errNotInIssueWorkflow
}

func (w *workflowIssues) ListLabels(context.Context) ([]issueflow.LabelSpec, error) {
	return nil, errNotInIssueWorkflow
}

func (w *workflowIssues) CreateLabel(context.Context, issueflow.LabelSpec) error {
	return errNotInIssueWorkflow
}

func (w *workflowIssues) UpdateLabel(context.Context, issueflow.LabelSpec) error {
	return errNotInIssueWorkflow
}

// childDispatcher runs each dispatched agent as a capstan.Run child
// workflow on the workers, or gives it its stub outcome.
type childDispatcher struct {
	ctx  workflow.Context
	in   *IssueInput
	opts WorkflowOptions
	// n counts the issue's dispatches: the child runs' IDs.
	n int
}

// ChildRunID is the run ID of an issue's n-th dispatched agent.
func ChildRunID(runID string, issue, n int) string {
	return fmt.Sprintf("%s-%d-%d", runID, issue, n)
}

func (d *childDispatcher) Dispatch(_ context.Context, x issueflow.Dispatch) (event.WorkflowOutcome, error) {
	if d.in.Stub != nil {
		return issueflow.StubOutcome(x.Agent, d.in.Stub), nil
	}
	a, ok := d.in.Agents[x.Agent.ID]
	if !ok {
		return event.WorkflowOutcome{}, fmt.Errorf("agent %s was not pinned by the submitter", x.Agent.ID)
	}
	d.n++
	run := RunInput{RunID: ChildRunID(d.in.RunID, d.in.Issue, d.n), Agent: a.Name, AgentDir: a.Dir, Definition: a.Definition,
		DefinitionDigest: a.Digest, Model: d.in.Model, BaseURL: d.in.BaseURL, Params: map[string]string{},
		Started: workflow.Now(d.ctx), Options: d.in.Options, WorkDir: d.in.WorkDir}
	// The orchestrator's values reach the agent as the parameters it
	// declares; the others are not its parameters.
	for _, p := range a.Params {
		if v, ok := x.Params[p]; ok {
			run.Params[p] = v
		}
	}
	if d.in.Repo != "" {
		// Each run of the issue continues on the issue's branch from
		// where the previous one left it.
		actx := workflow.WithActivityOptions(d.ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 2 * time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: issueAttempts},
			Summary:             "tip of " + d.in.Branch,
		})
		var tip string
		if err := workflow.ExecuteActivity(actx, ActivityBranchTip, d.in.Repo, d.in.Branch).Get(d.ctx, &tip); err != nil {
			return event.WorkflowOutcome{}, activityError(err)
		}
		run.Repo, run.Branch, run.BaseCommit, run.WorkDir = d.in.Repo, d.in.Branch, tip, ""
	}
	queue := d.in.TaskQueue
	if queue == "" {
		queue = DefaultTaskQueue
	}
	cctx := workflow.WithChildOptions(d.ctx, workflow.ChildWorkflowOptions{
		WorkflowID: run.RunID, TaskQueue: queue,
		StaticSummary: fmt.Sprintf("capstan %s · issue #%d", a.Name, d.in.Issue),
		StaticDetails: fmt.Sprintf("agent `%s` · issue #%d · phase agent `%s` · branch `%s`", a.Name, d.in.Issue, x.Agent.ID, run.Branch),
	})
	var res *event.RunResult
	if err := workflow.ExecuteChildWorkflow(cctx, WorkflowName, run).Get(d.ctx, &res); err != nil {
		return event.WorkflowOutcome{RunID: run.RunID}, runFailed(run.RunID, err)
	}
	if res == nil {
		return event.WorkflowOutcome{RunID: run.RunID}, fmt.Errorf("run %s ended without a result", run.RunID)
	}
	out := event.WorkflowOutcome{RunID: res.RunID, Journal: res.Journal, Success: res.Success, Reason: res.CompletionReason,
		Verdict: res.Verdict, Handoff: res.Handoff}
	if res.Error != nil {
		out.Error = res.Error.Message
	}
	return out, nil
}

// IssueActivities are a worker's issue activities.
type IssueActivities struct {
	// Open opens an issue store; nil refuses every issue activity.
	Open OpenIssues
}

func (a *IssueActivities) open(s IssueStore) (issueflow.Issues, error) {
	if a.Open == nil {
		return nil, temporal.NewNonRetryableApplicationError("this worker cannot reach issues (it was started without an issue store)", ErrTypeBuild, nil)
	}
	is, err := a.Open(s)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("open the issues of %s: %v", s, err), ErrTypeBuild, err)
	}
	return is, nil
}

// Read is ActivityIssueRead.
func (a *IssueActivities) Read(ctx context.Context, in IssueReadInput) (*IssueReadResult, error) {
	is, err := a.open(in.Store)
	if err != nil {
		return nil, err
	}
	stop := heartbeat(ctx, fmt.Sprintf("issue #%d: read", in.Issue))
	defer stop()
	var out IssueReadResult
	if in.Comments > 0 {
		out.Comments, err = is.RecentComments(ctx, in.Issue, in.Comments)
	} else {
		out.Labels, err = is.Labels(ctx, in.Issue)
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Change is ActivityIssueChange: it applies the change once
// (issueflow.ApplyOnce), however often it is attempted.
func (a *IssueActivities) Change(ctx context.Context, in IssueChangeInput) (bool, error) {
	is, err := a.open(in.Store)
	if err != nil {
		return false, err
	}
	stop := heartbeat(ctx, "issue change "+in.Change.Key)
	defer stop()
	return issueflow.ApplyOnce(ctx, is, in.Change)
}

// BranchTip is ActivityBranchTip: the commit branch points to in repo.
func (a *IssueActivities) BranchTip(ctx context.Context, repo, branch string) (string, error) {
	out, err := git(ctx, os.TempDir(), append(slices.Clone(checkoutHardening), "ls-remote", repo, "refs/heads/"+branch)...)
	if err != nil {
		return "", workDirError("read branch "+branch+" of "+repo, err)
	}
	tip, _, _ := strings.Cut(out, "\t")
	if tip == "" {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("branch %s is not in %s", branch, repo), ErrTypeConflict, nil)
	}
	return tip, nil
}

// PinAgent is the agent a as issue workflows dispatch it (the pinned
// definition, as for a run), with the base URLs checked as for a run:
// workflow input never carries a key.
func PinAgent(a *agentdir.Agent, model, baseURL string) (DispatchAgent, error) {
	snap, tarball, err := packAgent(a)
	if err != nil {
		return DispatchAgent{}, err
	}
	if err := agent.CheckBaseURLs(model, baseURL, a.Definition().Runner.BaseURL, a.Dir(), nil); err != nil {
		return DispatchAgent{}, err
	}
	d := DispatchAgent{Name: a.Definition().Name, Dir: a.Dir(), Definition: tarball, Digest: snap.Digest()}
	for _, p := range a.Params() {
		d.Params = append(d.Params, p.Name)
	}
	return d, nil
}

// ErrIssueRunning is StartIssue's error when the issue's workflow is
// already running (another workflow run holds the issue).
var ErrIssueRunning = errors.New("the issue's workflow is already running")

// StartIssue starts the issue's workflow on the shared task queue, under
// IssueWorkflowID; an issue whose workflow is running is ErrIssueRunning.
func StartIssue(ctx context.Context, c client.Client, taskQueue, workflowID string, in *IssueInput) (client.WorkflowRun, error) {
	if taskQueue == "" {
		taskQueue = DefaultTaskQueue
	}
	wr, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: IssueWorkflowID(in.Store, workflowID, in.Issue), TaskQueue: taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		StaticSummary:            fmt.Sprintf("capstan issue #%d", in.Issue),
		StaticDetails:            fmt.Sprintf("issue #%d of %s · workflow `%s` · capstan workflow run %s", in.Issue, in.Store, in.WorkflowFile, in.RunID),
		Memo:                     map[string]any{MemoPhase: ""},
	}, IssueWorkflowName, *in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, ErrIssueRunning
	}
	return wr, err
}

// IssueEnded waits for a started issue workflow and returns its output;
// a workflow that failed is an error with the worker's message.
func IssueEnded(ctx context.Context, wr client.WorkflowRun) (*IssueOutput, error) {
	var out IssueOutput
	if err := wr.Get(ctx, &out); err != nil {
		return nil, runFailed(wr.GetID(), err)
	}
	return &out, nil
}

// IssueBranches prepares the git side of a workflow run's issues: when
// the work dir wd is a git repository, each issue gets the branch
// capstan/<run id>-issue-<n> at the work dir's HEAD in repo ("" = the work
// dir's own repository), all pushed at once, and the returned repository
// is where they are. A work dir that is no repository returns "" (the
// runs use it as it is on the workers).
func IssueBranches(ctx context.Context, wd, repo, runID string, issues []int) (string, map[int]string, error) {
	if err := noCredentialIn("--git-repo", repo); err != nil {
		return "", nil, err
	}
	head, err := workDirHead(ctx, wd, "")
	if err != nil {
		return "", nil, err
	}
	if head == "" {
		if repo != "" {
			return "", nil, fmt.Errorf("scaleout: --git-repo %s needs the work dir %s to be a git repository", repo, wd)
		}
		return "", nil, nil
	}
	if repo == "" {
		repo = wd
	}
	branches := map[int]string{}
	args := []string{"push", "-q", repo}
	for _, n := range issues {
		branches[n] = IssueBranch(runID, n)
		args = append(args, head+":refs/heads/"+branches[n])
	}
	if len(issues) == 0 {
		return repo, branches, nil
	}
	if _, err := git(ctx, wd, args...); err != nil {
		return "", nil, fmt.Errorf("scaleout: create the issues' branches in %s: %w", repo, err)
	}
	return repo, branches, nil
}

// IssueBranch is the branch of issue n in workflow run runID.
func IssueBranch(runID string, n int) string {
	return fmt.Sprintf("capstan/%s-issue-%d", runID, n)
}
