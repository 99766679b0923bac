package event

import (
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
)

// The payloads an agent run writes once, outside its iterations: how it
// ended (RunResult, run.end), what its GitHub integration did
// (GitHubCallEvent, GitHubOutcome), the clean run of its test validators
// (CleanRunEvent) and, for a pipeline, each agent it ran (AgentRunEvent).
// They are encoded with encoding/json.

// RunResult is how an agent run ended (climpt calls it AgentResult): what
// agent.Agent.Run and Stop return, what `capstan run --json` prints and
// what the run.end journal event carries.
type RunResult struct {
	Success bool `json:"success"`
	// CompletionReason is a stable token: completed, max_iterations,
	// emergency_stop, time_budget, token_budget, cost_budget, canceled,
	// aborted, validation_exhausted, step_loop_limit, cannot_complete,
	// test_change_requested,
	// error.
	CompletionReason string `json:"completionReason"`
	// Reason is the human explanation (the completion handler's reason, or
	// what stopped the run).
	Reason     string  `json:"reason,omitempty"`
	Iterations int     `json:"iterations"`
	SessionID  string  `json:"sessionId,omitempty"`
	RunID      string  `json:"runId"`
	Agent      string  `json:"agent"`
	Model      string  `json:"model"`
	StepID     string  `json:"stepId,omitempty"`
	Usage      Usage   `json:"usage"`
	CostUSD    float64 `json:"cost"`
	// UsageUnreported counts model responses the run was billed for whose
	// usage is in neither Usage nor CostUSD, which are then lower bounds:
	// responses a kill cut while they streamed, before their provider
	// reported their usage (OpenAI-compatible servers report it in the
	// last chunk of a stream), in iterations the resumed run ran again.
	UsageUnreported int `json:"usageUnreported,omitempty"`
	// DurationMs is the run's wall time in this process, from Start to
	// the end, the test baselines included.
	DurationMs int64 `json:"durationMs"`
	// TestBaselineMs is the part of DurationMs spent running the test
	// validators before the first iteration (the baseline that lost tests
	// are judged against; a resumed run reuses its journaled one).
	TestBaselineMs int64  `json:"testBaselineMs,omitempty"`
	Journal        string `json:"journal,omitempty"`
	// Error is why the run did not complete; never set when Success is.
	Error *ResultError `json:"error,omitempty"`
	// Warnings are problems that did not change the outcome, such as an
	// MCP server that failed while being shut down after the run
	// completed.
	Warnings []string `json:"warnings,omitempty"`
	// DefinitionDigest is the digest of the pinned agent definition the
	// run used (see package definition); "" when it was read from disk.
	DefinitionDigest string `json:"definitionDigest,omitempty"`
	// CannotComplete is the model's declaration that the task cannot be
	// done as specified, with its reason and evidence (CompletionReason
	// cannot_complete).
	CannotComplete *CannotComplete `json:"cannotComplete,omitempty"`
	// TestChange is the model's request to change protected files, with
	// the diff, when the run stopped for a human to decide it
	// (CompletionReason test_change_requested; runner.verification.testChanges
	// human).
	TestChange *TestChangeRequest `json:"testChange,omitempty"`
	// Verdict is the "verdict" string of the closure step's final answer
	// when a flow routed by intent completed by that step's verified
	// closing (e.g. "approved"); "" otherwise.
	Verdict string `json:"verdict,omitempty"`
	// Sandboxed is true when the commands capstan ran for the model (Bash,
	// command validators, subprocess steps, skill scripts) were confined by
	// the sandbox (MCP servers are not sandboxed yet); false when the run opted out
	// (--no-sandbox, "sandbox": {"enabled": false}) or ran degraded
	// (allowUnsandboxed on a machine that cannot sandbox). Warnings then
	// say why.
	Sandboxed bool `json:"sandboxed"`
	// Handoff are the closure step's handoff values when a flow routed by
	// intent completed by that step's verified closing: the values its
	// structuredGate.handoffFields name in its final answer, keyed by each
	// path's last segment (climpt's handoff data). Workflows fill comment
	// templates and handoff payloads from them.
	Handoff map[string]any `json:"handoff,omitempty"`
	// GitHub is what runner.integrations.github did to the run's issue
	// after it completed (nil when the integration is off or the run did
	// not complete). A failed gh call leaves the run completed; GitHub.OK
	// is false and Warnings say what failed.
	GitHub *GitHubOutcome `json:"github,omitempty"`
}

// EventKind implements Payload.
func (*RunResult) EventKind() Kind { return KindRunEnd }

// Err returns the error the run ended with, with its chain (errors.Is
// and errors.As see the validator failure, the provider error, …), or nil
// for a completed run. A RunResult read back from JSON has no chain; its Err
// is the ResultError itself.
func (r *RunResult) Err() error {
	if r == nil || r.Error == nil {
		return nil
	}
	return r.Error
}

// ResultError is the error part of a RunResult. It is an error whose Unwrap
// returns the original error (when the RunResult was made by a run, not read
// from JSON).
type ResultError struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	Recoverable bool   `json:"recoverable"`
	// Hint says what to do about it, when capstan knows.
	Hint string `json:"hint,omitempty"`
	err  error
}

// Error implements error.
func (e *ResultError) Error() string {
	if e == nil {
		return ""
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the error the ResultError was made from (nil after a
// JSON round trip).
func (e *ResultError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.err
}

// Is matches agenterr sentinels and *agenterr.Error values by code, also
// after a JSON round trip.
func (e *ResultError) Is(target error) bool {
	t, ok := target.(*agenterr.Error)
	return ok && e != nil && t.Code == e.Code
}

// NewResultError converts err into the RunResult form; nil stays nil.
func NewResultError(err error) *ResultError {
	if err == nil {
		return nil
	}
	re := &ResultError{Code: "INTERNAL", Message: err.Error(), err: err}
	if e := agenterr.From(err); e != nil {
		re.Code, re.Recoverable, re.Hint = e.Code, e.Recoverable, e.Hint
		re.Message = strings.TrimPrefix(re.Message, e.Code+": ")
	}
	return re
}

// GitHubCallEvent is the payload of a github.call event and one entry of
// GitHubOutcome.Calls.
type GitHubCallEvent struct {
	// Args are gh's arguments ("issue", "edit", "12", "--add-label", …).
	Args     []string `json:"args"`
	ExitCode int      `json:"exitCode"`
	// Output is what gh printed (stdout, then stderr), trimmed.
	Output     string `json:"output,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMs int64  `json:"durationMs"`
}

// EventKind implements Payload.
func (GitHubCallEvent) EventKind() Kind { return KindGitHubCall }

// GitHubOutcome is what runner.integrations.github did after the run
// completed: the closure action applied to the issue, where the action
// came from, the labels changed and every gh call with its result.
type GitHubOutcome struct {
	Issue string `json:"issue,omitempty"`
	// Action is close | label-only | label-and-close, or "" when nothing
	// was to be done (Skipped says why).
	Action string `json:"action,omitempty"`
	// ActionSource is output (the closing step's closure_action), config
	// (defaultClosureAction) or default.
	ActionSource string            `json:"actionSource,omitempty"`
	AddLabels    []string          `json:"addLabels,omitempty"`
	RemoveLabels []string          `json:"removeLabels,omitempty"`
	Calls        []GitHubCallEvent `json:"calls,omitempty"`
	// OK is true when every call succeeded (and at least one was made).
	OK      bool   `json:"ok"`
	Skipped string `json:"skipped,omitempty"`
}

// CleanRunEvent is the payload of verify.clean: the clean run of one
// test validator after the verification that completed the run.
type CleanRunEvent struct {
	Validator string `json:"validator"`
	Command   string `json:"command"`
	// Passed says whether the command met its successWhen.
	Passed bool `json:"passed"`
	// Differences are what the clean run did not confirm ("" when none):
	// the command's verdict, each test that passed in the verification
	// and did not here (with its outcome).
	Differences []string `json:"differences,omitempty"`
	// Output is the end of the clean run's output when it differs.
	Output     string `json:"output,omitempty"`
	DurationMs int64  `json:"durationMs"`
}

// EventKind implements Payload.
func (*CleanRunEvent) EventKind() Kind { return KindCleanRun }

// AgentRunEvent is the payload of agent.run: what agent.DirRunner emits
// for each agent it ran (a pipeline stage that is a whole agent).
type AgentRunEvent struct {
	Dir    string     `json:"dir"`
	Result *RunResult `json:"result"`
}

// EventKind implements Payload.
func (AgentRunEvent) EventKind() Kind { return KindAgentRun }
