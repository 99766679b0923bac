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
