package event

// ClaudeCodeProcessEvent is a claude CLI process the claude-code provider
// started.
type ClaudeCodeProcessEvent struct {
	Args int `json:"args"` // the number of arguments
	// Confinement says how the process is confined (the sandbox, or not).
	Confinement string `json:"confinement"`
	Resume      string `json:"resume"` // the session it resumes ("" = a new one)
}

// ClaudeCodeRetryEvent is a retry of a failed API call the claude CLI
// reported (a model.retry event of the claude-code provider).
type ClaudeCodeRetryEvent struct {
	Attempt    int    `json:"attempt"`
	DelayMs    int64  `json:"delay_ms"`
	MaxRetries int    `json:"max_retries"`
	Provider   string `json:"provider"`
	Status     int    `json:"status"`
}

// EventKind implements Payload.
func (ClaudeCodeProcessEvent) EventKind() Kind { return KindClaudeCodeProcess }

// EventKind implements Payload.
func (ClaudeCodeRetryEvent) EventKind() Kind { return KindModelRetry }
