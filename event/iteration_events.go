package event

// IterationStartEvent is the payload of an iteration.start event; it moves
// the run's position to the new iteration (the step is not known yet).
type IterationStartEvent struct {
	Iteration int `json:"iteration"`
}

// Position implements event.Positioner.
func (e IterationStartEvent) Position() (int, string) { return e.Iteration, "" }

// IterationEvent is the payload of an iteration.end journal event.
type IterationEvent struct {
	Summary *IterationSummary `json:"summary"`
	Outcome OutcomeEvent      `json:"outcome"`
	// RunUsage and RunCostUSD are the run's totals after the iteration
	// (resumed iterations included).
	RunUsage   Usage   `json:"runUsage"`
	RunCostUSD float64 `json:"runCost"`
	// StepState is the step machine's state after the iteration and the
	// retry prompt it scheduled, what resume restores (absent for a redo
	// and for a loop without a step machine). Journals of format 1 carry
	// it in a step.state event before iteration.end instead.
	StepState *StepStateEvent `json:"stepState,omitempty"`
}

// OutcomeEvent is the journal form of an Outcome.
type OutcomeEvent struct {
	Complete bool   `json:"complete"`
	Stop     bool   `json:"stop,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`
	// Redo marks an iteration whose query did not finish (see
	// Outcome.Redo): not counted; resume runs it again under its number.
	Redo bool `json:"redo,omitempty"`
}

// QueryStartEvent is the payload of a query.start journal event.
type QueryStartEvent struct {
	SessionID string `json:"session_id,omitempty"`
	Source    string `json:"source,omitempty"`
	// Model is set when the query goes to a step's own model
	// ("provider:model"); absent for the run's model.
	Model string `json:"model,omitempty"`
}

// PromptEvent is the payload of a prompt.resolved journal event; it moves
// the run's position to the iteration's step.
type PromptEvent struct {
	Source    string `json:"source,omitempty"`
	Text      string `json:"text"`
	Iteration int    `json:"-"`
	Step      string `json:"-"`
}

// Position implements event.Positioner.
func (e PromptEvent) Position() (int, string) { return e.Iteration, e.Step }

// ErrorEvent is the payload of an error journal event.
type ErrorEvent struct {
	Code        string `json:"code,omitempty"`
	Message     string `json:"message"`
	Recoverable bool   `json:"recoverable"`
}

// EventKind implements Payload.
func (IterationStartEvent) EventKind() Kind { return KindIterationStart }

// EventKind implements Payload.
func (IterationEvent) EventKind() Kind { return KindIterationEnd }

// EventKind implements Payload.
func (QueryStartEvent) EventKind() Kind { return KindQueryStart }

// EventKind implements Payload.
func (PromptEvent) EventKind() Kind { return KindPromptResolved }

// EventKind implements Payload.
func (ErrorEvent) EventKind() Kind { return KindError }
