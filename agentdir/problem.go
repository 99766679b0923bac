package agentdir

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
)

// Severity says whether a Problem makes a configuration invalid.
type Severity string

// Severities. Errors make a configuration invalid; warnings are reported but
// do not stop a run.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Problem is one finding of Validate: a stable Code (documented in
// docs/configuration.md), where it is (File relative to the agent folder,
// JSON Pointer, 1-based Line and Column when the file has a position for the
// pointer), what is wrong (Message) and what to do about it (Hint).
type Problem struct {
	Code     string   `json:"code"`
	Severity Severity `json:"severity"`
	File     string   `json:"file"`
	Pointer  string   `json:"pointer,omitempty"`
	Line     int      `json:"line,omitempty"`
	Column   int      `json:"column,omitempty"`
	Message  string   `json:"message"`
	Hint     string   `json:"hint,omitempty"`
	// FollowsFrom are, for a problem a check of ValidateOptions.Checks
	// found, the JSON Pointers of the steps registry's values it follows
	// from besides Pointer (a retry prompt that does not resolve follows
	// from its completion pattern). Validate drops the problem when one of
	// them, or a member of one, has the wrong type: the schema error says
	// so once.
	FollowsFrom []string `json:"-"`
}

// String renders the problem as "file:line:col: severity CODE message
// (pointer) — hint", the format of `capstan validate`.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Column)
	}
	fmt.Fprintf(&b, ": %s %s %s", p.Severity, p.Code, p.Message)
	if p.Pointer != "" {
		fmt.Fprintf(&b, " (%s)", p.Pointer)
	}
	if p.Hint != "" {
		b.WriteString(" — ")
		b.WriteString(p.Hint)
	}
	return b.String()
}

// ValidationResult is what validating an agent folder found. It holds
// problems only;
// Valid, Errors and Warnings are derived from them, so the invariant
// Valid() == (len(Errors()) == 0) cannot be broken.
type ValidationResult struct {
	problems []Problem
}

// NewValidationResult returns a result holding problems, sorted by file,
// line, column and code. Problems with an unknown severity count as errors.
func NewValidationResult(problems ...Problem) ValidationResult {
	ps := make([]Problem, len(problems))
	copy(ps, problems)
	for i := range ps {
		if ps[i].Severity != SeverityWarning {
			ps[i].Severity = SeverityError
		}
	}
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Pointer, b.Pointer),
			cmp.Compare(a.Code, b.Code),
		)
	})
	return ValidationResult{problems: ps}
}

// With returns a result holding r's problems and more; the lead's
// cross-layer checks (prompt files, schema refs) add theirs this way.
func (r ValidationResult) With(more ...Problem) ValidationResult {
	return NewValidationResult(append(slices.Clone(r.problems), more...)...)
}

// Valid reports whether there are no errors (warnings allowed).
func (r ValidationResult) Valid() bool { return len(r.Errors()) == 0 }

// Errors returns the problems of severity error.
func (r ValidationResult) Errors() []Problem { return r.filter(SeverityError) }

// Warnings returns the problems of severity warning.
func (r ValidationResult) Warnings() []Problem { return r.filter(SeverityWarning) }

// Problems returns every problem, errors and warnings, in report order.
func (r ValidationResult) Problems() []Problem { return slices.Clone(r.problems) }

func (r ValidationResult) filter(s Severity) []Problem {
	out := []Problem{}
	for _, p := range r.problems {
		if p.Severity == s {
			out = append(out, p)
		}
	}
	return out
}

type resultJSON struct {
	Valid    bool      `json:"valid"`
	Errors   []Problem `json:"errors"`
	Warnings []Problem `json:"warnings"`
}

// MarshalJSON renders {"valid", "errors", "warnings"}.
func (r ValidationResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(resultJSON{Valid: r.Valid(), Errors: r.Errors(), Warnings: r.Warnings()})
}

// UnmarshalJSON reads what MarshalJSON wrote; "valid" is recomputed from
// the problems, never trusted.
func (r *ValidationResult) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	for i := range j.Warnings {
		j.Warnings[i].Severity = SeverityWarning
	}
	*r = NewValidationResult(append(j.Errors, j.Warnings...)...)
	return nil
}

// ValidationError is the CONFIG_INVALID error of LoadAndValidate. It wraps
// an *agenterr.Error (so errors.Is(err, agenterr.ErrConfigurationValidation)
// and agenterr.From work) whose message lists every error, and keeps the
// full Result for callers that render problems themselves.
type ValidationError struct {
	Result ValidationResult
	Err    *agenterr.Error
}

func newValidationError(r ValidationResult) *ValidationError {
	errs := r.Errors()
	lines := make([]string, len(errs))
	for i, p := range errs {
		lines[i] = "  " + p.String()
	}
	e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
		"%d configuration error(s):\n%s", len(errs), strings.Join(lines, "\n"))
	e.Hint = "fix the files listed above; `capstan validate DIR` lists every problem"
	if len(errs) > 0 {
		e.File, e.Pointer, e.Line, e.Column = errs[0].File, errs[0].Pointer, errs[0].Line, errs[0].Column
	}
	return &ValidationError{Result: r, Err: e}
}

// Relocated returns the error with its problems passed through locate
// and the hint replaced: an agent built from Go values reports its
// problems at the Go fields that hold them, not at files it does not have.
func (e *ValidationError) Relocated(locate func([]Problem) []Problem, hint string) *ValidationError {
	v := newValidationError(NewValidationResult(locate(e.Result.Problems())...))
	v.Err.Hint = hint
	return v
}

// Error renders the wrapped error's message (every problem, one a line).
func (e *ValidationError) Error() string { return e.Err.Error() }

// Unwrap returns the *agenterr.Error with code CONFIG_INVALID.
func (e *ValidationError) Unwrap() error { return e.Err }

// Problems returns the errors and warnings found.
func (e *ValidationError) Problems() []Problem { return e.Result.Problems() }
