package schema

import (
	"encoding/json"
	"errors"
	"math"

	"github.com/capstan-dev/capstan/agenterr"
)

// maxProblems bounds the problems listed in an error message (all are
// available through Problems).
const maxProblems = 8

// Validator validates values against one compiled JSON Schema. It is safe
// for concurrent use.
type Validator struct {
	sch *Schema
}

// Compile compiles a self-contained JSON Schema (draft 2020-12 unless it
// declares another draft with $schema), such as the output of
// [Resolver.Resolve]. References to other documents are not loaded: nothing
// is read from disk or the network. An invalid schema is a
// SCHEMA_RESOLUTION error.
func Compile(raw json.RawMessage) (*Validator, error) {
	return compileValidator(Source{Raw: raw})
}

// compileValidator is [Compile] of src.
func compileValidator(src Source) (*Validator, error) {
	sch, err := CompileSource(src)
	var se *SourceError
	if errors.As(err, &se) {
		switch se.Stage {
		case "json":
			return nil, wrap(resErr("", "", "schema is not valid JSON"), se.Err)
		case "load":
			return nil, wrap(resErr("", "", "cannot load schema"), se.Err)
		default:
			var ext *externalRefError
			if errors.As(se.Err, &ext) {
				return nil, hint(wrap(resErr("", "", "invalid schema"), se.Err), "the schema must be self-contained; resolve it with schema.Resolver first")
			}
			return nil, hint(wrap(resErr("", "", "invalid schema"), se.Err), "fix each listed problem so that the schema is a valid JSON Schema")
		}
	}
	return &Validator{sch: sch}, nil
}

// Validate validates v. v may be a json.RawMessage or []byte holding JSON
// text, or a Go value, which is validated as encoding/json would encode it.
//
// A value that does not satisfy the schema is a SCHEMA_VALIDATION error
// (recoverable) wrapping a *ValidationError; [Problems] lists its problems,
// one per failing location, ready to be put into a retry prompt.
func (v *Validator) Validate(value any) error {
	inst, err := instance(value)
	if err != nil {
		return &agenterr.Error{
			Code: agenterr.CodeSchemaValidation, Layer: agenterr.LayerCompletion, Recoverable: true,
			Message: "value is not JSON", Err: &ValidationError{problems: []string{"at (root): value is not valid JSON: " + err.Error()}},
			Hint: "answer with a single JSON value",
		}
	}
	fails := v.sch.Failures(inst)
	if len(fails) == 0 {
		return nil
	}
	return &agenterr.Error{
		Code: agenterr.CodeSchemaValidation, Layer: agenterr.LayerCompletion, Recoverable: true,
		Message: "value does not match the schema",
		Err:     &ValidationError{problems: problemLines(fails), failures: fails},
		Hint:    "fix each listed location so that the output matches the schema",
	}
}

// Check validates value (JSON text as []byte or json.RawMessage, or a
// value as [Validator.Validate] takes) and returns a *ValidationError
// listing every problem, or nil when it is valid. Unlike
// [Validator.Validate] it adds no error code: callers report it in their
// own terms.
func (s *Schema) Check(value any) error {
	inst, err := instance(value)
	if err != nil {
		return &ValidationError{problems: []string{"at (root): value is not valid JSON: " + err.Error()}}
	}
	if fails := s.Failures(inst); len(fails) > 0 {
		return &ValidationError{problems: problemLines(fails), failures: fails}
	}
	return nil
}

// instance converts value into the form the validator expects.
func instance(value any) (any, error) {
	var data []byte
	switch x := value.(type) {
	case json.RawMessage:
		data = x
	case []byte:
		data = x
	default:
		if isGeneric(value, 0) {
			return value, nil // already decoded JSON (encoding/json's generic form)
		}
		b, err := json.Marshal(value)
		if err != nil {
			return nil, err
		}
		data = b
	}
	return Decode(data)
}

// isGeneric reports whether v is made only of the types encoding/json
// decodes into (numbers as float64 or json.Number), with finite numbers.
func isGeneric(v any, depth int) bool {
	if depth > 1000 {
		return false
	}
	switch x := v.(type) {
	case nil, bool, string, json.Number:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case []any:
		for _, e := range x {
			if !isGeneric(e, depth+1) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !isGeneric(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// ValidationError lists why a value does not satisfy a schema.
type ValidationError struct {
	problems []string
	failures []Failure
}

// Error lists the problems (at most eight, then how many more) separated
// by "; ".
func (e *ValidationError) Error() string { return joinProblems(e.problems) }

// Problems returns one line per failing location: "at /path: reason", or
// "at (root): reason" for the value itself.
func (e *ValidationError) Problems() []string { return append([]string(nil), e.problems...) }

// Failures returns the failing keywords behind the problems (none when
// the value was not JSON).
func (e *ValidationError) Failures() []Failure { return append([]Failure(nil), e.failures...) }

// Problems returns the problems of a validation error returned by
// [Validator.Validate], or nil when err is not one.
func Problems(err error) []string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Problems()
	}
	return nil
}
