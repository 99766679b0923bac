package workflow

import "github.com/capstan-dev/capstan/event"

// The payloads of a workflow run's journal events. Their fields are in the
// order their JSON keys were always written in.

// IssueStartEvent is the payload of a workflow.issue.start event.
type IssueStartEvent struct {
	DryRun bool `json:"dryRun"`
	Issue  int  `json:"issue"`
}

// PhaseEvent is the payload of a workflow.phase event: the phase an
// issue's labels put it in (Type is absent for an unknown phase).
type PhaseEvent struct {
	Issue  int      `json:"issue"`
	Labels []string `json:"labels"`
	Phase  string   `json:"phase"`
	Type   string   `json:"type,omitempty"`
}

// DispatchEvent is the payload of a workflow.dispatch event: an agent
// about to run for an issue (issue 0: the prioritizer).
type DispatchEvent struct {
	Agent     string            `json:"agent"`
	Directory string            `json:"directory"`
	Issue     int               `json:"issue"`
	Params    map[string]string `json:"params"`
	Phase     string            `json:"phase"`
}

// OutcomeEvent is the payload of a workflow.outcome event: how an agent's
// run ended. A dispatch that failed has only Error; the prioritizer's has
// no Error.
type OutcomeEvent struct {
	Agent   string   `json:"agent"`
	Error   *string  `json:"error,omitempty"`
	Issue   int      `json:"issue"`
	Outcome *string  `json:"outcome,omitempty"`
	Run     *Outcome `json:"run,omitempty"`
}

// TransitionEvent is the payload of a workflow.transition event: an
// issue's move to another phase and its label changes.
type TransitionEvent struct {
	Add     []string `json:"add"`
	Agent   string   `json:"agent"`
	From    string   `json:"from"`
	Issue   int      `json:"issue"`
	Outcome string   `json:"outcome"`
	Remove  []string `json:"remove"`
	To      string   `json:"to"`
}

// StepEvent is the payload of a workflow.step event: one side effect of a
// transition (Cycle is absent for the prioritizer's steps).
type StepEvent struct {
	Cycle *int   `json:"cycle,omitempty"`
	Error string `json:"error"`
	Issue int    `json:"issue"`
	OK    bool   `json:"ok"`
	Step  string `json:"step"`
}

// CompensationEvent is the payload of a workflow.compensation event: a
// side effect undone after a later one failed.
type CompensationEvent struct {
	Compensation string `json:"compensation"`
	Cycle        int    `json:"cycle"`
	Error        string `json:"error"`
	Issue        int    `json:"issue"`
	OK           bool   `json:"ok"`
}

// HandoffEvent is the payload of a workflow.handoff event: a handoff's
// artifact written.
type HandoffEvent struct {
	Artifact  string `json:"artifact"`
	Handoff   string `json:"handoff"`
	Issue     int    `json:"issue"`
	Persisted bool   `json:"persisted"`
}

// LabelSyncEvent is the payload of a workflow.labels event.
type LabelSyncEvent struct {
	DryRun bool        `json:"dryRun"`
	Labels []LabelSync `json:"labels"`
}

// EventKind implements event.Payload.
func (IssueStartEvent) EventKind() event.Kind { return EventIssueStart }

// EventKind implements event.Payload.
func (PhaseEvent) EventKind() event.Kind { return EventPhase }

// EventKind implements event.Payload.
func (DispatchEvent) EventKind() event.Kind { return EventDispatch }

// EventKind implements event.Payload.
func (OutcomeEvent) EventKind() event.Kind { return EventOutcome }

// EventKind implements event.Payload.
func (TransitionEvent) EventKind() event.Kind { return EventTransition }

// EventKind implements event.Payload.
func (StepEvent) EventKind() event.Kind { return EventStep }

// EventKind implements event.Payload.
func (CompensationEvent) EventKind() event.Kind { return EventCompensation }

// EventKind implements event.Payload.
func (HandoffEvent) EventKind() event.Kind { return EventHandoff }

// EventKind implements event.Payload.
func (LabelSyncEvent) EventKind() event.Kind { return EventLabelSync }

// EventKind implements event.Payload: an issue's result is journaled as
// its workflow.issue.end event.
func (IssueResult) EventKind() event.Kind { return EventIssueEnd }

// EventKind implements event.Payload: a dry run's plan is journaled as a
// workflow.plan event.
func (Plan) EventKind() event.Kind { return EventPlan }

// EventKind implements event.Payload: the prioritizer's result is
// journaled as a workflow.prioritize event.
func (PrioritizeResult) EventKind() event.Kind { return EventPrioritize }

// EventKind implements event.Payload: a workflow run's start is its
// run.start event.
func (Start) EventKind() event.Kind { return event.KindRunStart }

// EventKind implements event.Payload: a workflow run's end is its run.end
// event.
func (End) EventKind() event.Kind { return event.KindRunEnd }
