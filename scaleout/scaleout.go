// Package scaleout runs capstan agent runs as Temporal workflows, so that
// many runs share a pool of workers and a run survives the loss of the
// machine it was running on.
//
// The run's loop is workflow code: it counts iterations, keeps the run's
// durable state (finished iterations, the commit of the work dir after the
// last one, usage), decides when to continue as new, and moves the run to
// another worker when its worker is lost. Each iteration — the prompt, the
// model's tool loop, the verdict stage — is one activity that steps the
// same agent a local `capstan run` drives (agent.Agent.Step), on the worker
// the run is pinned to, so budgets, completion verification, retry prompts
// and the step flow are decided by the one implementation capstan has.
//
// A run's work dir is a git checkout on its worker. After every iteration
// the worker commits the work dir to the run's branch in a repository
// every worker reaches; that commit, whose message carries the iteration's
// result, is the point at which the iteration counts. When a worker dies,
// another checks the branch out at the last commit and redoes the
// iteration that was cut: no finished iteration is lost or repeated, and
// the work dir has each tool's effects exactly once.
//
// Transcripts and tool outputs stay in the run journal, written by the
// workers into their state directory (shared by the workers); workflow
// history holds only the per-iteration results. API keys are read by the
// workers from their own environment and never enter workflow input.
package scaleout

import (
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
)

// Names of the workflow, its activities and its query, as Temporal's UI
// shows them. They are part of the recorded histories: renaming one
// breaks running workflows.
const (
	WorkflowName     = "capstan.Run"
	ActivityAcquire  = "capstan.AcquireWorker"
	ActivityIterate  = "capstan.Iteration"
	QueryProgress    = "capstan.progress"
	DefaultTaskQueue = "capstan"
	DefaultNamespace = "default"
)

// RunInput is a run's workflow input: everything a worker needs to build
// the agent, and nothing secret (API keys are the workers' own).
type RunInput struct {
	// RunID is the run's ID: the workflow ID and the journal's run ID.
	RunID string `json:"runId"`
	// Agent names the agent (for display).
	Agent string `json:"agent"`
	// AgentDir is the folder the definition was read from (for display
	// and the journal; workers do not read it).
	AgentDir string `json:"agentDir"`
	// Definition is the pinned agent definition (agentdir.Snapshot.Tar)
	// and DefinitionDigest its digest.
	Definition       []byte `json:"definition"`
	DefinitionDigest string `json:"definitionDigest"`
	// Model, BaseURL, Params, MaxIterations, Timeouts and MaxRetryAfter
	// are the run's options, as `capstan run` takes them.
	Model         string            `json:"model,omitempty"`
	BaseURL       string            `json:"baseUrl,omitempty"`
	Params        map[string]string `json:"params,omitempty"`
	MaxIterations int               `json:"maxIterations,omitempty"`
	Timeouts      llm.Timeouts      `json:"timeouts,omitzero"`
	MaxRetryAfter time.Duration     `json:"maxRetryAfter,omitempty"`
	// NoSandbox runs the agent's commands unsandboxed on the worker
	// (capstan run --temporal --no-sandbox; agent.Config.NoSandbox).
	NoSandbox bool `json:"noSandbox,omitempty"`
	// Repo is the git repository (a URL or path every worker reaches) that
	// holds the run's branch Branch, which starts at BaseCommit. Empty
	// Repo: the work dir is not a git repository, and WorkDir is used as it
	// is on whichever worker runs the run (see docs/scale-out.md).
	Repo       string `json:"repo,omitempty"`
	Branch     string `json:"branch,omitempty"`
	BaseCommit string `json:"baseCommit,omitempty"`
	WorkDir    string `json:"workDir,omitempty"`
	// Started is when the run was submitted (the time budget counts from
	// it).
	Started time.Time `json:"started"`
	// Options tune the workflow (zero = defaults).
	Options WorkflowOptions `json:"options,omitzero"`
	// State is where a continued run stands (nil for a new run).
	State *RunState `json:"state,omitempty"`
}

// WorkflowOptions tune how the workflow drives its activities.
type WorkflowOptions struct {
	// ContinueEvery makes the workflow continue as new after this many
	// iterations (default 25), keeping its history short.
	ContinueEvery int `json:"continueEvery,omitempty"`
	// Heartbeat is the iteration activity's heartbeat timeout (default
	// 20s): how long a silent worker is trusted before the iteration is
	// taken elsewhere.
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	// ScheduleToStart bounds how long an iteration waits for its pinned
	// worker (default 30s) before the run moves to another worker.
	ScheduleToStart time.Duration `json:"scheduleToStart,omitempty"`
	// IterationTimeout bounds one iteration attempt (default 2h).
	IterationTimeout time.Duration `json:"iterationTimeout,omitempty"`
	// MaxMoves bounds how many times a run moves to another worker
	// (default 20).
	MaxMoves int `json:"maxMoves,omitempty"`
	// ChainFor, when positive, is how long an attempt of the iteration
	// activity goes on from a finished iteration to the next: short
	// iterations share an activity and a workflow task, and the workflow
	// (its progress query) learns of them when the activity returns.
	// Zero: one iteration per activity.
	ChainFor time.Duration `json:"chainFor,omitempty"`
}

func (o WorkflowOptions) withDefaults() WorkflowOptions {
	if o.ContinueEvery <= 0 {
		o.ContinueEvery = 25
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 20 * time.Second
	}
	if o.ScheduleToStart <= 0 {
		o.ScheduleToStart = 30 * time.Second
	}
	if o.IterationTimeout <= 0 {
		o.IterationTimeout = 2 * time.Hour
	}
	if o.MaxMoves <= 0 {
		o.MaxMoves = 20
	}
	return o
}

// RunState is the durable state of a run between iterations.
type RunState struct {
	// Iteration is the number of finished iterations.
	Iteration int `json:"iteration"`
	// Commit is the work dir's commit after the last finished iteration
	// (the base commit before the first).
	Commit string `json:"commit,omitempty"`
	// Step is the current step.
	Step string `json:"step,omitempty"`
	// Usage and CostUSD are the run's totals.
	Usage   event.Usage `json:"usage"`
	CostUSD float64     `json:"cost"`
	// Moves counts the times the run moved to another worker.
	Moves int `json:"moves,omitempty"`
	// Queue is the task queue of the worker the run is pinned to, carried
	// over continue-as-new ("" = none yet).
	Queue string `json:"queue,omitempty"`
	// Last is the last iteration's outcome, for progress.
	Last *IterationOutcome `json:"last,omitempty"`
}

// IterationInput is the input of one iteration activity.
type IterationInput struct {
	Run *RunInput `json:"run"`
	// State is where the run stands before the iteration.
	State RunState `json:"state"`
	// ChainUntil, when more than State.Iteration+1, lets the attempt go
	// on from one finished iteration to the next, for ChainFor, until
	// that many have finished (the workflow's next continue-as-new);
	// zero = one iteration.
	ChainUntil int           `json:"chainUntil,omitempty"`
	ChainFor   time.Duration `json:"chainFor,omitempty"`
}

// IterationOutcome is what one iteration decided, in a few words.
type IterationOutcome struct {
	Iteration int    `json:"iteration"`
	Step      string `json:"step,omitempty"`
	Complete  bool   `json:"complete,omitempty"`
	Stop      bool   `json:"stop,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Tools are the names of the tools the model called, in order.
	Tools []string `json:"tools,omitempty"`
	// Usage and CostUSD are the run's totals after the iteration.
	Usage   event.Usage `json:"usage"`
	CostUSD float64     `json:"cost"`
}

// IterationResult is what an iteration activity returns; it is also
// recorded in the commit that makes the iteration count.
type IterationResult struct {
	// Iteration is the number of finished iterations after it.
	Iteration int `json:"iteration"`
	// Commit is the work dir's commit after it.
	Commit  string      `json:"commit,omitempty"`
	Step    string      `json:"step,omitempty"`
	Usage   event.Usage `json:"usage"`
	CostUSD float64     `json:"cost"`
	// Outcome is the finished iteration's outcome (nil when the run ended
	// before an iteration ran, on a limit).
	Outcome *IterationOutcome `json:"outcome,omitempty"`
	// Result is the run's result when the run ended.
	Result *event.RunResult `json:"result,omitempty"`
	// Queue is the task queue of the worker that ran the iteration (its
	// own): a run no worker held goes on there.
	Queue string `json:"queue,omitempty"`
	// Earlier are the outcomes of the iterations the same attempt ran
	// before this one (IterationInput.ChainUntil), oldest first.
	Earlier []IterationOutcome `json:"earlier,omitempty"`
}

// Progress is what the progress query returns.
type Progress struct {
	RunID string   `json:"runId"`
	Agent string   `json:"agent"`
	State RunState `json:"state"`
	// Recent are the outcomes of the run's last iterations (at most
	// recentOutcomes, since the workflow last continued as new), oldest
	// first.
	Recent []IterationOutcome `json:"recent,omitempty"`
	// Result is set once the run ended.
	Result *event.RunResult `json:"result,omitempty"`
}
