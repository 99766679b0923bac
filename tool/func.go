package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/schema"
)

// FuncTool is a Tool made from a Go function with a typed input; see Func.
type FuncTool[In any] struct {
	spec       Spec
	kind       Kind
	idempotent bool
	validator  *schema.Validator
	fn         func(ctx context.Context, in In) (string, error)
}

// Func returns a Tool named name that runs fn, with the input JSON Schema
// inferred from the Go type In by github.com/google/jsonschema-go instead
// of written by hand:
//
//   - In must be a struct (or a map with string keys): tool inputs are JSON
//     objects. Exported fields become properties under their json names;
//     a field without omitempty or omitzero is required; unknown properties
//     are not allowed; a `jsonschema:"…"` tag is the property's
//     description, which the model reads.
//   - Before fn runs, the model's input is validated against that schema
//     and then decoded strictly into In (unknown or differently-cased
//     fields, trailing data and numbers out of the field's range are
//     refused). Input
//     that fails is answered with a TOOL_INPUT error result listing every
//     problem by location, and fn is not called: fn only ever sees input
//     that matches its type.
//   - fn's string is the result the model reads; an error fn returns is an
//     error result with the error's text, which the model can react to.
//     A panic in fn is contained by the tool loop (tool.Invoke).
//
// The tool's kind is KindExecute, the cautious default: permission modes
// deny it unless allowedTools names it (or the mode is bypassPermissions).
// WithKind declares a read-only or editing tool.
//
// Func panics when In's schema cannot be inferred (a func, channel or
// complex field, a map with non-string keys, a recursive type) or is not an
// object schema; In is fixed at compile time, so the first test that
// builds the tool finds the mistake.
func Func[In any](name, description string, fn func(ctx context.Context, in In) (string, error)) *FuncTool[In] {
	if name == "" || fn == nil {
		panic("tool.Func: a tool needs a name and a function")
	}
	inferred, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool.Func(%q): cannot infer the input schema: %v", name, err))
	}
	if inferred.Type != "object" {
		var zero In
		panic(fmt.Sprintf("tool.Func(%q): input type %T is not a struct or map; tool inputs are JSON objects", name, zero))
	}
	raw, err := json.Marshal(inferred)
	if err != nil {
		panic(fmt.Sprintf("tool.Func(%q): encode the input schema: %v", name, err))
	}
	v, err := schema.Compile(raw)
	if err != nil {
		panic(fmt.Sprintf("tool.Func(%q): the inferred input schema does not compile: %v", name, err))
	}
	return &FuncTool[In]{spec: Spec{Name: name, Description: description, InputSchema: raw},
		kind: KindExecute, validator: v, fn: fn}
}

// WithKind returns a copy of the tool with kind k, for permission modes:
// KindRead for a tool that only observes, KindEdit for one that changes
// files in the work dir.
func (t *FuncTool[In]) WithKind(k Kind) *FuncTool[In] {
	c := *t
	c.kind = k
	return &c
}

// WithIdempotent returns a copy of the tool that declares itself
// idempotent: a call of it that a killed run had started is run again on
// resume (with the same tool.IdempotencyKey in its context) instead of
// being reported to the model as interrupted.
func (t *FuncTool[In]) WithIdempotent() *FuncTool[In] {
	c := *t
	c.idempotent = true
	return &c
}

// Idempotent implements Idempotent: set by WithIdempotent, or a KindRead
// tool.
func (t *FuncTool[In]) Idempotent() bool { return t.idempotent || t.kind == KindRead }

// Spec implements Tool; InputSchema is the schema inferred from In.
func (t *FuncTool[In]) Spec() Spec { return t.spec }

// Kind implements Tool.
func (t *FuncTool[In]) Kind() Kind { return t.kind }

// Run implements Tool: validate, decode, call fn.
func (t *FuncTool[In]) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	if !json.Valid(input) {
		return t.badInput("input is not valid JSON"), nil
	}
	if err := t.validator.Validate(input); err != nil {
		problems := schema.Problems(err)
		if len(problems) == 0 {
			problems = []string{err.Error()}
		}
		return t.badInput("input does not match the tool's input schema: " + strings.Join(problems, "; ")), nil
	}
	// json.Valid above has refused trailing data; the schema has refused
	// unknown properties, which the decoder would otherwise match without
	// regard to case.
	var in In
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return t.badInput("input cannot be decoded: " + err.Error()), nil
	}
	out, err := t.fn(ctx, in)
	if err != nil {
		return Result{Content: err.Error(), IsError: true}, nil
	}
	return Result{Content: out}, nil
}

// badInput is the TOOL_INPUT answer to input fn never sees.
func (t *FuncTool[In]) badInput(msg string) Result {
	e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true, "%s: %s", t.spec.Name, msg)
	e.Hint = "send a JSON object matching the input schema: " + string(t.spec.InputSchema)
	return Result{Content: e.Error(), IsError: true}
}
