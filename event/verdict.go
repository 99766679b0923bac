package event

// RetryPromptEvent is the payload of a retry.prompt journal event: a
// targeted retry prompt (Kind "completion": a validator failed with
// Pattern) or a format retry (Kind "format"), as sent to the model.
type RetryPromptEvent struct {
	Kind      string         `json:"kind"` // "completion" or "format"
	Step      string         `json:"step"`
	Pattern   string         `json:"pattern,omitempty"`
	Validator string         `json:"validator,omitempty"`
	Params    map[string]any `json:"params,omitempty"`
	Source    string         `json:"source"`
	Attempt   int            `json:"attempt"`
	Max       int            `json:"maxAttempts"`
	Text      string         `json:"text"`
	Warnings  []string       `json:"warnings,omitempty"`
}

// StepMove is one transition of the step machine: the payload of a
// step.transition event.
type StepMove struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Kind     string `json:"kind"`
	Passed   bool   `json:"passed"`
	Complete bool   `json:"complete,omitempty"`
	Aborted  bool   `json:"aborted,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Intent is the intent a step routed by its structuredGate emitted.
	Intent string `json:"intent,omitempty"`
}

// EscalationEvent is the data of an escalation journal event.
type EscalationEvent struct {
	Step       string `json:"step"`
	EscalateTo string `json:"escalateTo"`
	Method     string `json:"method"`
	ReturnFlow string `json:"returnFlow"`
	Reason     string `json:"reason,omitempty"`
	Iteration  int    `json:"iteration,omitempty"`
}

// EventKind implements Payload.
func (RetryPromptEvent) EventKind() Kind { return KindRetryPrompt }

// EventKind implements Payload.
func (StepMove) EventKind() Kind { return KindStepTransition }

// EventKind implements Payload.
func (EscalationEvent) EventKind() Kind { return KindEscalation }

// CannotComplete is the model's statement that the task cannot be done as
// specified.
type CannotComplete struct {
	// Iteration is the iteration it was made in.
	Iteration int `json:"iteration"`
	// Reason is why, in the model's words ("" when it gave none).
	Reason string `json:"reason"`
	// Evidence is what supports it (test names, contradicting lines, …).
	Evidence string `json:"evidence,omitempty"`
}

// StepState is the step machine's full state; Snapshot and Restore move it in and
// out (for resume). It marshals to JSON.
type StepState struct {
	Current string         `json:"current"`
	Visits  map[string]int `json:"visits"`
	// LastEntered is the step last entered through a transition (the
	// parent, while sub-steps run); Consecutive counts how many times in a
	// row it was entered (retries and sub-step moves excluded).
	LastEntered string `json:"lastEntered"`
	Consecutive int    `json:"consecutive"`
	Retries     int    `json:"retries"`
	Completed   bool   `json:"completed,omitempty"`
	Aborted     bool   `json:"aborted,omitempty"`
	// Parent is set while the sub-steps of a parent step run.
	Parent *ParentState `json:"parent,omitempty"`
	// Return is set while an in_agent escalation's target step runs.
	Return *ReturnState `json:"return,omitempty"`
	// Outputs are, per step routed by intent, the top-level values of its
	// last structured output and its handoff values (step inputs read
	// them).
	Outputs map[string]map[string]any `json:"outputs,omitempty"`
}

// ParentState tracks a parent step's sub-steps.
type ParentState struct {
	Step  string `json:"step"`
	Index int    `json:"index"`
	// Retries counts the parent's own retries (re-runs of all sub-steps).
	Retries int `json:"retries,omitempty"`
}

// ReturnState says where an in_agent escalation goes afterwards.
type ReturnState struct {
	Flow   string `json:"flow"`   // resume | abort | restart
	From   string `json:"from"`   // the escalating step
	Target string `json:"target"` // the escalation step
}

// CompletionResult is the outcome of one completion handler's check.
type CompletionResult struct {
	Complete bool   `json:"complete"`
	Reason   string `json:"reason,omitempty"`
	// Declared is true when the model declared completion this iteration
	// (structured output or completion keyword), whether or not the
	// declaration was accepted.
	Declared bool `json:"declared,omitempty"`
	// Validation is set by the verdict stage when the run's validators
	// checked a completion against the world and one failed (handlers
	// themselves never verify). Journals written before the verdict stage
	// carry it from the structured handler.
	Validation *ValidationResult `json:"validation,omitempty"`
}

// VerdictAction is what an iteration's verdict tells the loop to do next:
// "continue", "retry", "complete" or "stop".
type VerdictAction string

// CheckEvent is the payload of the completion.check journal event: the
// completion handler's claim and what verification made of it. Its JSON is
// a superset of CompletionResult's (older journals decode into it).
type CheckEvent struct {
	CompletionResult
	// Verdict is the iteration's Action.
	Verdict VerdictAction `json:"verdict,omitempty"`
	// Verified lists the validators that ran this iteration, in order.
	Verified []string `json:"verified,omitempty"`
	// ClosureVerdict is the closure step's "verdict" (see Verdict).
	ClosureVerdict string `json:"closureVerdict,omitempty"`
}

// EventKind implements Payload.
func (CheckEvent) EventKind() Kind { return KindCompletionCheck }

// PendingPrompt is a retry prompt waiting for the next iteration, with
// the failure it answers (absent in journals of older runs).
type PendingPrompt struct {
	Text   string `json:"text"`
	Source string `json:"source"`
	// Kind ("completion" or "format"), Validator, Pattern, Attempt and Max
	// are those of the retry.prompt event that scheduled it.
	Kind      string `json:"kind,omitempty"`
	Validator string `json:"validator,omitempty"`
	Pattern   string `json:"pattern,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
	Max       int    `json:"maxAttempts,omitempty"`
}

// StepStateEvent is the step machine's state after an iteration and the
// retry prompt it scheduled, for resume: the stepState of an iteration.end
// event, and in journals of format 1 the payload of a step.state event of
// its own, written just before iteration.end.
type StepStateEvent struct {
	State   StepState      `json:"state"`
	Pending *PendingPrompt `json:"pending,omitempty"`
}

// EventKind implements Payload.
func (StepStateEvent) EventKind() Kind { return KindStepState }
