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

// ValidationResult says whether the completion conditions hold and, when
// one does not, the failure pattern of its validator and the params
// extracted from the validator's output (climpt calls it
// CompletionValidationResult).
type ValidationResult struct {
	Valid bool `json:"valid"`
	// Pattern is the failing validator's failurePattern.
	Pattern string `json:"pattern,omitempty"`
	// Params are the extracted params (extractParams) for the retry prompt.
	Params map[string]any `json:"params,omitempty"`
	// Validator names the failing validator.
	Validator string `json:"validator,omitempty"`
	// Output is the failing validator's raw outcome.
	Output *ValidatorOutput `json:"output,omitempty"`
	// Checked lists the validators that ran, in order, the failing one last.
	Checked []string `json:"checked,omitempty"`
	// Runs are the command validators that ran, with their output, in
	// order (for checks of what they printed, such as no lost tests).
	Runs []ValidatorRun `json:"-"`
}

// ValidatorRun is one command validator's run.
type ValidatorRun struct {
	// Validator is its name, Command the command as it ran.
	Validator string
	Command   string
	Output    ValidatorOutput
	// Passed says whether the run met the validator's successWhen (set by
	// RunCommandValidator).
	Passed bool
}

// ValidatorOutput is what one validator run produced.
type ValidatorOutput struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exitCode"`
	// Truncated is true when stdout or stderr exceeded the output cap; the
	// stream keeps its start and its end, joined by a line
	// "[capstan: output truncated, N bytes omitted here]". Truncated is
	// what the capture counted: text the command printed cannot set it
	// (a "[capstan:" the command printed is kept as "[not capstan:").
	Truncated bool `json:"truncated,omitempty"`
	// TimedOut is true when the command was killed at its timeout.
	TimedOut   bool  `json:"timedOut,omitempty"`
	DurationMs int64 `json:"durationMs"`
	// Report is the file that holds the run's whole standard output (up to
	// ValidatorConfig.ReportCap; ReportTruncated when it was longer), in a
	// directory of capstan's outside the work dir. It is valid until the
	// validator runs again or is closed; "" when the command kept none.
	Report          string `json:"-"`
	ReportTruncated bool   `json:"-"`
}
