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
