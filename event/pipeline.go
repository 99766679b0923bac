package event

// PipelineStageEvent is one agent stage of a pipeline run, as it ended.
type PipelineStageEvent struct {
	AgentID     string   `json:"agent_id"`
	Attempts    int      `json:"attempts"`
	DurationMs  float64  `json:"duration_ms"`
	Error       string   `json:"error,omitempty"`
	KeysWritten []string `json:"keys_written"`
	Status      string   `json:"status"`
}

// EventKind implements Payload.
func (PipelineStageEvent) EventKind() Kind { return KindPipelineStage }

// PipelineRunStartEvent is the run.start event of a pipeline run.
type PipelineRunStartEvent struct {
	Command string `json:"command"` // "pipeline run"
	File    string `json:"file"`
	Model   string `json:"model"`
	Repo    string `json:"repo"`
	Request string `json:"request"`
	WorkDir string `json:"workDir"`
}

// PipelineRunEndEvent is the run.end event of a pipeline run. Status is
// the summary's metadata.status, absent when nothing ran.
type PipelineRunEndEvent struct {
	Error     string  `json:"error,omitempty"`
	ErrorCode string  `json:"errorCode,omitempty"` // what tracing exports (never the message)
	Status    *string `json:"status,omitempty"`
	Success   bool    `json:"success"`
}

// EventKind implements Payload.
func (PipelineRunStartEvent) EventKind() Kind { return KindRunStart }

// EventKind implements Payload.
func (PipelineRunEndEvent) EventKind() Kind { return KindRunEnd }

// PipelineViolationKind classifies a contract violation.
type PipelineViolationKind string

// The kinds of a PipelineViolation.
const (
	ViolationPrecondition  PipelineViolationKind = "precondition"
	ViolationPostcondition PipelineViolationKind = "postcondition"
	ViolationNamespace     PipelineViolationKind = "namespace"
)

// PipelineViolation is one broken contract of a pipeline stage,
// recorded in diagnostics.violations. Message uses climpt's wording ("postcondition validation failed:
// reasoning.intents not found", "namespace violation: agent wrote to
// unauthorized key ...").
type PipelineViolation struct {
	AgentID string                `json:"agent_id"`
	Kind    PipelineViolationKind `json:"kind"`
	Key     string                `json:"key"`
	Message string                `json:"message"`
}

// EventKind implements Payload: a violation is journaled as a
// pipeline.violation event.
func (PipelineViolation) EventKind() Kind { return KindPipelineViolation }
