package event

// ValidatorEvent is the data of a validator.result journal event.
type ValidatorEvent struct {
	Validator  string `json:"validator"`
	Type       string `json:"type"`
	Valid      bool   `json:"valid"`
	Pattern    string `json:"pattern,omitempty"`
	ExitCode   int    `json:"exitCode"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMs int64  `json:"durationMs"`
	// Output is the end of a failing validator's output (OutputExcerpt:
	// stdout then stderr, redacted, at most OutputExcerptBytes) and
	// OutputOmitted the number of bytes of it before the excerpt. A
	// passing validator's event has neither; journals written before
	// capstan recorded them have neither either.
	Output        string `json:"output,omitempty"`
	OutputOmitted int    `json:"outputOmitted,omitempty"`
}

// EventKind implements Payload.
func (ValidatorEvent) EventKind() Kind { return KindValidatorResult }
