package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/capstan-dev/capstan/agenterr"
)

// schemaURL is the location under which a compiled schema is registered;
// it is never fetched.
const schemaURL = "capstan:///schema.json"

// maxProblems bounds the problems listed in an error message (all are
// available through Problems).
const maxProblems = 8

var printer = message.NewPrinter(language.English)

// Validator validates values against one compiled JSON Schema. It is safe
// for concurrent use.
type Validator struct {
	sch *jsonschema.Schema
}

// Compile compiles a self-contained JSON Schema (draft 2020-12 unless it
// declares another draft with $schema), such as the output of
// [Resolver.Resolve]. References to other documents are not loaded: nothing
// is read from disk or the network. An invalid schema is a
// SCHEMA_RESOLUTION error.
func Compile(raw json.RawMessage) (*Validator, error) {
	sch, err := CompileSource(Source{Raw: raw})
	var se *SourceError
	if errors.As(err, &se) {
		switch se.Stage {
		case "json":
			return nil, wrap(resErr("", "", "schema is not valid JSON"), se.Err)
		case "load":
			return nil, wrap(resErr("", "", "cannot load schema"), se.Err)
		default:
			return nil, hint(wrap(resErr("", "", "invalid schema"), se.Err), "the schema must be a valid, self-contained JSON Schema; resolve it with schema.Resolver first")
		}
	}
	return &Validator{sch: sch}, nil
}

// Source is a JSON Schema document to compile with [CompileSource].
type Source struct {
	// Raw is the document. When nil, the document at URL is read through
	// Loader.
	Raw []byte
	// Doc, when set, is Raw already decoded by the caller (with the
	// validator library's UnmarshalJSON), so the document is not decoded
	// twice; it is used instead of Raw and must not change afterwards.
	Doc any
	// URL names the document and is the base of its relative references
	// ("" = an internal name that is never fetched).
	URL string
	// Loader reads the documents that references point at. Nil means none
	// is read: a reference to another document is an error, and nothing is
	// read from disk or the network (the JSON Schema meta-schemas are
	// built in).
	Loader jsonschema.URLLoader
}

// SourceError is a failure of [CompileSource]: Stage is "json" (Raw is not
// JSON), "load" (the document cannot be registered) or "compile" (it is
// not a valid schema, or a reference cannot be resolved).
type SourceError struct {
	Stage string
	URL   string
	Err   error
}

func (e *SourceError) Error() string {
	switch e.Stage {
	case "json":
		return fmt.Sprintf("schema %s is not JSON: %v", e.URL, e.Err)
	default:
		return fmt.Sprintf("schema %s: %v", e.URL, e.Err)
	}
}

// Unwrap returns the underlying error.
func (e *SourceError) Unwrap() error { return e.Err }

// CompileSource is capstan's one way to compile a JSON Schema with the
// validator library: every package that needs a compiled
// *jsonschema.Schema (configuration files, skill schemas, pipeline
// contracts, provider output checks, [Compile]) calls it, so the default
// draft (2020-12), the refusal to read referenced documents unless a
// Loader is given, and the errors are the same everywhere.
func CompileSource(src Source) (*jsonschema.Schema, error) {
	url := src.URL
	if url == "" {
		url = schemaURL
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if src.Loader != nil {
		c.UseLoader(src.Loader)
	} else {
		c.UseLoader(noLoader{})
	}
	if src.Raw != nil || src.Doc != nil {
		doc := src.Doc
		if doc == nil {
			var err error
			if doc, err = jsonschema.UnmarshalJSON(bytes.NewReader(src.Raw)); err != nil {
				return nil, &SourceError{Stage: "json", URL: url, Err: err}
			}
		}
		if err := c.AddResource(url, doc); err != nil {
			return nil, &SourceError{Stage: "load", URL: url, Err: err}
		}
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, &SourceError{Stage: "compile", URL: url, Err: err}
	}
	return sch, nil
}

// noLoader refuses every document: a compiled schema must be
// self-contained unless its caller says where references may be read.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references to other documents are not loaded (%s); make the schema self-contained", url)
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
	err = v.sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &agenterr.Error{
			Code: agenterr.CodeSchemaValidation, Layer: agenterr.LayerCompletion, Recoverable: true,
			Message: "value cannot be validated", Err: err,
		}
	}
	problems := collectProblems(ve)
	return &agenterr.Error{
		Code: agenterr.CodeSchemaValidation, Layer: agenterr.LayerCompletion, Recoverable: true,
		Message: "value does not match the schema",
		Err:     &ValidationError{problems: problems, cause: ve},
		Hint:    "fix each listed location so that the output matches the schema",
	}
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
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
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
	cause    error
}

// Error lists the problems (at most eight, then how many more) separated
// by "; ".
func (e *ValidationError) Error() string {
	if len(e.problems) <= maxProblems {
		return strings.Join(e.problems, "; ")
	}
	return strings.Join(e.problems[:maxProblems], "; ") + fmt.Sprintf("; and %d more", len(e.problems)-maxProblems)
}

// Problems returns one line per failing location: "at /path: reason", or
// "at (root): reason" for the value itself.
func (e *ValidationError) Problems() []string { return append([]string(nil), e.problems...) }

// Unwrap returns the validator library's error, when there is one.
func (e *ValidationError) Unwrap() error { return e.cause }

// Problems returns the problems of a validation error returned by
// [Validator.Validate], or nil when err is not one.
func Problems(err error) []string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Problems()
	}
	return nil
}

// collectProblems flattens the library's error tree into one line per leaf
// cause, without duplicates, sorted by location (the value itself first).
func collectProblems(ve *jsonschema.ValidationError) []string {
	type problem struct{ loc, line string }
	var out []problem
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		loc := "(root)"
		if len(e.InstanceLocation) > 0 {
			var b strings.Builder
			for _, tok := range e.InstanceLocation {
				b.WriteByte('/')
				b.WriteString(escapeToken(tok))
			}
			loc = b.String()
		}
		line := "at " + loc + ": " + e.ErrorKind.LocalizedString(printer)
		if !seen[line] {
			seen[line] = true
			out = append(out, problem{loc, line})
		}
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].loc != out[j].loc {
			return out[i].loc < out[j].loc
		}
		return out[i].line < out[j].line
	})
	lines := make([]string, len(out))
	for i, p := range out {
		lines[i] = p.line
	}
	return lines
}
