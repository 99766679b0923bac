package event

// The payloads of a workflow run's journal (capstan workflow run): its
// start and end, each issue's phases, dispatches, outcomes, transitions
// and their side effects, the label preflight, a dry run's plan and the
// prioritizer's result. Their fields are in the order their JSON keys
// were always written in; they are encoded with encoding/json.

// The kinds of a workflow run's events (its run.start and run.end are
// KindRunStart and KindRunEnd, payloads WorkflowStart and WorkflowEnd).
const (
	KindWorkflowIssueStart   Kind = "workflow.issue.start"  // WorkflowIssueStartEvent
	KindWorkflowPhase        Kind = "workflow.phase"        // WorkflowPhaseEvent
	KindWorkflowDispatch     Kind = "workflow.dispatch"     // WorkflowDispatchEvent
	KindWorkflowOutcome      Kind = "workflow.outcome"      // WorkflowOutcomeEvent
	KindWorkflowTransition   Kind = "workflow.transition"   // WorkflowTransitionEvent
	KindWorkflowStep         Kind = "workflow.step"         // WorkflowStepEvent
	KindWorkflowCompensation Kind = "workflow.compensation" // WorkflowCompensationEvent
	KindWorkflowHandoff      Kind = "workflow.handoff"      // WorkflowHandoffEvent
	KindWorkflowLabelSync    Kind = "workflow.labels"       // WorkflowLabelSyncEvent
	KindWorkflowIssueEnd     Kind = "workflow.issue.end"    // WorkflowIssueResult
	KindWorkflowPlan         Kind = "workflow.plan"         // WorkflowPlan
	KindWorkflowPrioritize   Kind = "workflow.prioritize"   // WorkflowPrioritizeResult
)

// WorkflowStart is the data of a workflow run's run.start event.
type WorkflowStart struct {
	Command  string `json:"command"`
	Workflow string `json:"workflow"`
	WorkDir  string `json:"workDir,omitempty"`
	Issues   string `json:"issues"`
	Store    string `json:"store"`
	DryRun   bool   `json:"dryRun,omitempty"`
	Stub     bool   `json:"stubDispatch,omitempty"`
	// Temporal is the Temporal frontend the issues ran on ("" = here).
	Temporal string `json:"temporal,omitempty"`
}

// WorkflowEnd is the data of a workflow run's run.end event.
type WorkflowEnd struct {
	Success bool                  `json:"success"`
	Status  string                `json:"status"`
	Issues  []WorkflowIssueResult `json:"issues"`
	Skipped []int                 `json:"skipped,omitempty"`
	Error   string                `json:"error,omitempty"`
	// Prioritized is what --prioritize did.
	Prioritized *WorkflowPrioritizeResult `json:"prioritized,omitempty"`
}

// WorkflowOutcome is what a dispatched run ended with.
type WorkflowOutcome struct {
	RunID   string `json:"runId,omitempty"`
	Journal string `json:"journal,omitempty"`
	Success bool   `json:"success"`
	// Reason is the run's completion reason (completed, max_iterations, …).
	Reason  string `json:"completionReason,omitempty"`
	Verdict string `json:"verdict,omitempty"`
	// Handoff are the closure step's handoff values (Result.handoff).
	Handoff map[string]any `json:"handoff,omitempty"`
	// Error is why the run did not complete.
	Error string `json:"error,omitempty"`
}

// WorkflowTransition is one move of an issue.
type WorkflowTransition struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Agent   string `json:"agent"`
	Outcome string `json:"outcome"`
	RunID   string `json:"runId,omitempty"`
}

// WorkflowIssueResult is how an issue's run ended.
type WorkflowIssueResult struct {
	Issue      int                  `json:"issue"`
	Status     string               `json:"status"`
	FinalPhase string               `json:"finalPhase"`
	Cycles     int                  `json:"cycles"`
	History    []WorkflowTransition `json:"history"`
	Closed     bool                 `json:"closed,omitempty"`
	// Error says what failed (status failed, or a compensated move).
	Error string `json:"error,omitempty"`
	// Plan is what a dry run would do next.
	Plan *WorkflowPlan `json:"plan,omitempty"`
}

// WorkflowPlan is what a dry run prints for an issue: its phase, the agent that
// would run, and for each outcome the agent's phases route, the move.
type WorkflowPlan struct {
	Issue  int                `json:"issue"`
	Phase  string             `json:"phase"`
	Agent  string             `json:"agent"`
	Labels []string           `json:"labels"`
	Moves  []WorkflowPlanMove `json:"moves"`
}

// WorkflowPlanMove is one outcome's move in a Plan.
type WorkflowPlanMove struct {
	Outcome  string   `json:"outcome"`
	To       string   `json:"to"`
	Remove   []string `json:"remove,omitempty"`
	Add      []string `json:"add,omitempty"`
	Template string   `json:"comment,omitempty"`
	Close    bool     `json:"close,omitempty"`
}

// WorkflowAssignment is one entry of priorities.json: the priority label the
// prioritizer agent gives an issue.
type WorkflowAssignment struct {
	Issue    int    `json:"issue"`
	Priority string `json:"priority"`
}

// WorkflowPrioritizeResult is what a prioritizer run did.
type WorkflowPrioritizeResult struct {
	Issues      []int                `json:"issues"`
	RunID       string               `json:"runId,omitempty"`
	Assignments []WorkflowAssignment `json:"assignments"`
	// Changed are the issues whose labels were changed.
	Changed []int `json:"changed"`
}

// WorkflowLabelSync is what the label preflight did to one label.
type WorkflowLabelSync struct {
	Name string `json:"name"`
	// Action is created, updated, unchanged or failed (dry runs report
	// what they would do).
	Action string `json:"action"`
	Error  string `json:"error,omitempty"`
}

// WorkflowIssueStartEvent is the payload of a workflow.issue.start event.
type WorkflowIssueStartEvent struct {
	DryRun bool `json:"dryRun"`
	Issue  int  `json:"issue"`
}

// WorkflowPhaseEvent is the payload of a workflow.phase event: the phase an
// issue's labels put it in (Type is absent for an unknown phase).
type WorkflowPhaseEvent struct {
	Issue  int      `json:"issue"`
	Labels []string `json:"labels"`
	Phase  string   `json:"phase"`
	Type   string   `json:"type,omitempty"`
}

// WorkflowDispatchEvent is the payload of a workflow.dispatch event: an agent
// about to run for an issue (issue 0: the prioritizer).
type WorkflowDispatchEvent struct {
	Agent     string            `json:"agent"`
	Directory string            `json:"directory"`
	Issue     int               `json:"issue"`
	Params    map[string]string `json:"params"`
	Phase     string            `json:"phase"`
}

// WorkflowOutcomeEvent is the payload of a workflow.outcome event: how an agent's
// run ended. A dispatch that failed has only Error; the prioritizer's has
// no Error.
type WorkflowOutcomeEvent struct {
	Agent   string           `json:"agent"`
	Error   *string          `json:"error,omitempty"`
	Issue   int              `json:"issue"`
	Outcome *string          `json:"outcome,omitempty"`
	Run     *WorkflowOutcome `json:"run,omitempty"`
}

// WorkflowTransitionEvent is the payload of a workflow.transition event: an
// issue's move to another phase and its label changes.
type WorkflowTransitionEvent struct {
	Add     []string `json:"add"`
	Agent   string   `json:"agent"`
	From    string   `json:"from"`
	Issue   int      `json:"issue"`
	Outcome string   `json:"outcome"`
	Remove  []string `json:"remove"`
	To      string   `json:"to"`
}

// WorkflowStepEvent is the payload of a workflow.step event: one side effect of a
// transition (Cycle is absent for the prioritizer's steps).
type WorkflowStepEvent struct {
	Cycle *int   `json:"cycle,omitempty"`
	Error string `json:"error"`
	Issue int    `json:"issue"`
	OK    bool   `json:"ok"`
	Step  string `json:"step"`
}

// WorkflowCompensationEvent is the payload of a workflow.compensation event: a
// side effect undone after a later one failed.
type WorkflowCompensationEvent struct {
	Compensation string `json:"compensation"`
	Cycle        int    `json:"cycle"`
	Error        string `json:"error"`
	Issue        int    `json:"issue"`
	OK           bool   `json:"ok"`
}

// WorkflowHandoffEvent is the payload of a workflow.handoff event: a handoff's
// artifact written.
type WorkflowHandoffEvent struct {
	Artifact  string `json:"artifact"`
	Handoff   string `json:"handoff"`
	Issue     int    `json:"issue"`
	Persisted bool   `json:"persisted"`
}

// WorkflowLabelSyncEvent is the payload of a workflow.labels event.
type WorkflowLabelSyncEvent struct {
	DryRun bool                `json:"dryRun"`
	Labels []WorkflowLabelSync `json:"labels"`
}

// EventKind implements Payload.
func (WorkflowIssueStartEvent) EventKind() Kind { return KindWorkflowIssueStart }

// EventKind implements Payload.
func (WorkflowPhaseEvent) EventKind() Kind { return KindWorkflowPhase }

// EventKind implements Payload.
func (WorkflowDispatchEvent) EventKind() Kind { return KindWorkflowDispatch }

// EventKind implements Payload.
func (WorkflowOutcomeEvent) EventKind() Kind { return KindWorkflowOutcome }

// EventKind implements Payload.
func (WorkflowTransitionEvent) EventKind() Kind { return KindWorkflowTransition }

// EventKind implements Payload.
func (WorkflowStepEvent) EventKind() Kind { return KindWorkflowStep }

// EventKind implements Payload.
func (WorkflowCompensationEvent) EventKind() Kind { return KindWorkflowCompensation }

// EventKind implements Payload.
func (WorkflowHandoffEvent) EventKind() Kind { return KindWorkflowHandoff }

// EventKind implements Payload.
func (WorkflowLabelSyncEvent) EventKind() Kind { return KindWorkflowLabelSync }

// EventKind implements Payload.
func (WorkflowIssueResult) EventKind() Kind { return KindWorkflowIssueEnd }

// EventKind implements Payload.
func (WorkflowPlan) EventKind() Kind { return KindWorkflowPlan }

// EventKind implements Payload.
func (WorkflowPrioritizeResult) EventKind() Kind { return KindWorkflowPrioritize }

// EventKind implements Payload: a workflow run's start is its run.start
// event.
func (WorkflowStart) EventKind() Kind { return KindRunStart }

// EventKind implements Payload: a workflow run's end is its run.end
// event.
func (WorkflowEnd) EventKind() Kind { return KindRunEnd }
