package agentdir

import (
	"errors"

	"github.com/capstan-dev/capstan/agenterr"
)

// RuleError is a configuration rule broken, as reported by the code that
// builds the runtime from the configuration (the completion handler, the
// step machine): the rule's problem code (AC-…, SR-…, as listed by Codes)
// and a CONFIG_INVALID *agenterr.Error with the file, JSON pointer and
// hint. errors.Is(err, agenterr.ErrConfigurationValidation) holds, and
// ProblemFromError keeps the rule's code, so `capstan validate` reports
// the problem the builder found with the same code.
type RuleError struct {
	// Rule is the problem code.
	Rule string
	// Err is the located error.
	Err *agenterr.Error
}

// Rule returns the RuleError for code at pointer of file.
func Rule(code, file, pointer, hint, format string, args ...any) *RuleError {
	e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false, format, args...)
	e.File, e.Pointer, e.Hint = file, pointer, hint
	return &RuleError{Rule: code, Err: e}
}

func (e *RuleError) Error() string { return e.Err.Error() }

// Unwrap returns the located CONFIG_INVALID error.
func (e *RuleError) Unwrap() error { return e.Err }

// ruleOf returns the problem code of the first RuleError in err's chain.
func ruleOf(err error) string {
	var re *RuleError
	if errors.As(err, &re) {
		return re.Rule
	}
	return ""
}
