package agentdir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Step kinds of a step's stepKind (intent routing).
const (
	KindWork         = "work"
	KindVerification = "verification"
	KindClosure      = "closure"
)

// Intents a step routed by its structuredGate may emit.
const (
	IntentNext     = "next"
	IntentRepeat   = "repeat"
	IntentJump     = "jump"
	IntentHandoff  = "handoff"
	IntentClosing  = "closing"
	IntentEscalate = "escalate"
	IntentAbort    = "abort"
)

// Intents lists every intent, in a stable order.
func Intents() []string {
	return []string{IntentNext, IntentRepeat, IntentJump, IntentHandoff, IntentClosing, IntentEscalate, IntentAbort}
}

// kindIntents are the intents each step kind may emit. abort (the model
// gives up) is allowed for every kind and is not listed.
var kindIntents = map[string][]string{
	KindWork:         {IntentNext, IntentRepeat, IntentJump, IntentHandoff},
	KindVerification: {IntentNext, IntentRepeat, IntentJump, IntentEscalate},
	KindClosure:      {IntentClosing, IntentRepeat},
}

// KindIntents are the intents each step kind may emit. abort (the model
// gives up) is allowed for every kind and is not listed.
// It returns a copy: changing it changes nothing else.
func KindIntents() map[string][]string {
	out := make(map[string][]string, len(kindIntents))
	for k, v := range kindIntents {
		out[k] = slices.Clone(v)
	}
	return out
}

// Kind returns the step's kind: its stepKind, or, when unset, the kind its
// c2 implies (initial and continuation → work, verification →
// verification, closure → closure); "" for any other c2.
func (s Step) Kind() string {
	if s.StepKind != "" {
		return s.StepKind
	}
	switch s.C2 {
	case "initial", "continuation":
		return KindWork
	case "verification":
		return KindVerification
	case "closure":
		return KindClosure
	}
	return ""
}

// StructuredGate says where a step's structured output carries the
// model's intent (and the jump target and handoff values), and which
// intents the step accepts. A step with a structuredGate is routed by its
// transitions, not by a check.
type StructuredGate struct {
	// AllowedIntents are the intents the step accepts; the enum of the
	// schema property at IntentSchemaRef must list exactly these.
	AllowedIntents []string `json:"allowedIntents"`
	// IntentSchemaRef is a JSON pointer ("#/properties/next_action/properties/action")
	// into the step's output schema, to the intent's enum.
	IntentSchemaRef string `json:"intentSchemaRef"`
	// IntentField is the dot path of the intent in the structured output
	// ("next_action.action").
	IntentField string `json:"intentField"`
	// TargetField is the dot path of the target step of a jump.
	TargetField string `json:"targetField,omitempty"`
	// HandoffFields are dot paths of values handed to later steps (the
	// last segment names the value).
	HandoffFields []string `json:"handoffFields,omitempty"`
	// TargetMode is accepted for compatibility; it has no effect
	// (validate warns).
	TargetMode string `json:"targetMode,omitempty"`
	// FailFast (default true) ends the run when the intent cannot be read;
	// false uses FallbackIntent (or next, or the first allowed intent).
	FailFast *bool `json:"failFast,omitempty"`
	// FallbackIntent is the intent used when failFast is false and the
	// intent cannot be read.
	FallbackIntent string `json:"fallbackIntent,omitempty"`
}

// IsFailFast reports whether an unreadable intent gets format retries and
// then ends the run (STEP_INTENT) rather than taking fallbackIntent.
func (g *StructuredGate) IsFailFast() bool { return g.FailFast == nil || *g.FailFast }

// IntentTransition is where one intent sends the step machine: a fixed
// target (null = terminal, for closing only), or a target chosen by a
// handoff value (Condition names the handoff value, Targets maps its
// values, "default" for any other).
type IntentTransition struct {
	// Target is the next step; nil with Terminal set means the flow ends.
	Target *string `json:"target,omitempty"`
	// Terminal is true when the file says "target": null.
	Terminal bool `json:"-"`
	// Fallback is accepted for compatibility; it has no effect (validate
	// warns).
	Fallback string `json:"fallback,omitempty"`
	// Condition names a handoff value; Targets maps its value to a step
	// (null = terminal).
	Condition string             `json:"condition,omitempty"`
	Targets   map[string]*string `json:"targets,omitempty"`
}

// UnmarshalJSON keeps "target": null apart from a missing target.
func (t *IntentTransition) UnmarshalJSON(b []byte) error {
	type plain IntentTransition
	var p plain
	if err := typeMismatchTolerated(json.Unmarshal(b, &p)); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	*t = IntentTransition(p)
	if raw, ok := keys["target"]; ok && bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		t.Terminal = true
	}
	return nil
}

// MarshalJSON writes a terminal transition as "target": null.
func (t IntentTransition) MarshalJSON() ([]byte, error) {
	type plain IntentTransition
	b, err := json.Marshal(plain(t))
	if err != nil || !t.Terminal || t.Target != nil {
		return b, err
	}
	if string(b) == "{}" {
		return []byte(`{"target":null}`), nil
	}
	return append([]byte(`{"target":null,`), b[1:]...), nil
}

// Steps lists the steps a transition can lead to (conditional targets
// in sorted key order); terminal targets are left out.
func (t IntentTransition) Steps() []string {
	var out []string
	if t.Target != nil && *t.Target != "" {
		out = append(out, *t.Target)
	}
	keys := make([]string, 0, len(t.Targets))
	for k := range t.Targets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := t.Targets[k]; v != nil && *v != "" {
			out = append(out, *v)
		}
	}
	return out
}

// InputSpec fills a prompt variable of a step from a value an earlier step
// produced: From is "<stepId>.<key>" (a top-level key of that step's
// structured output or one of its handoff values); the variable is
// {uv-<stepId with . as _>_<key>}. Without From the variable is the
// input's name and takes Default.
type InputSpec struct {
	From string `json:"from,omitempty"`
	// Required (default true) makes a missing value an error; otherwise
	// Default is used, or the variable is left unset.
	Required *bool           `json:"required,omitempty"`
	Default  json.RawMessage `json:"default,omitempty"`
}

// IsRequired reports whether a missing value is an error.
func (in InputSpec) IsRequired() bool { return in.Required == nil || *in.Required }

// Source splits From into the step id and the key (the key is after the
// last dot, so step ids may contain dots).
func (in InputSpec) Source() (step, key string, ok bool) {
	i := strings.LastIndex(in.From, ".")
	if i <= 0 || i == len(in.From)-1 {
		return "", "", false
	}
	return in.From[:i], in.From[i+1:], true
}

// Variable is the prompt variable (without "uv-") the input fills.
func (in InputSpec) Variable(name string) string {
	step, key, ok := in.Source()
	if !ok {
		return name
	}
	return strings.ReplaceAll(step, ".", "_") + "_" + key
}

// ValidationStep is how a closure step's completion is verified: its
// validationConditions must all pass when the step emits closing; a
// failing one sends its failure pattern's retry prompt, located under
// {c1}/{c2}/{c3}/. The key in validationSteps is the id of the step it
// verifies.
type ValidationStep struct {
	StepID      string `json:"stepId,omitempty"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// C2 and C3 locate the retry prompts (e.g. "retry", "issue").
	C2                   string                `json:"c2,omitempty"`
	C3                   string                `json:"c3,omitempty"`
	ValidationConditions []CompletionCondition `json:"validationConditions,omitempty"`
	OnFailure            *OnFailure            `json:"onFailure,omitempty"`
	// OutputSchemaRef is accepted for compatibility; the schema of the
	// closure step's answer is the step's own outputSchemaRef (validate
	// warns that this one has no effect).
	OutputSchemaRef *SchemaRef `json:"outputSchemaRef,omitempty"`
}

// StepVerification is what verifies a step's completion claim: the step's
// completionConditions and onFailure, or those of the validationSteps
// entry bound to it. C2 and C3 locate its retry prompts.
type StepVerification struct {
	Conditions []CompletionCondition
	OnFailure  *OnFailure
	C2, C3     string
}

// VerificationOf returns the verification of step id (st is its
// definition).
func (r *Registry) VerificationOf(id string, st Step) StepVerification {
	if vs, ok := r.ValidationSteps[id]; ok && len(st.CompletionConditions) == 0 {
		v := StepVerification{Conditions: vs.ValidationConditions, OnFailure: vs.OnFailure, C2: vs.C2, C3: vs.C3}
		if st.OnFailure != nil {
			v.OnFailure = st.OnFailure
		}
		if v.C2 == "" || v.C3 == "" {
			v.C2, v.C3 = st.C2, st.C3
		}
		return v
	}
	return StepVerification{Conditions: st.CompletionConditions, OnFailure: st.OnFailure, C2: st.C2, C3: st.C3}
}

// RoutedByIntent reports whether any step routes by a structuredGate.
func (r *Registry) RoutedByIntent() bool {
	for _, st := range r.Steps {
		if st.StructuredGate != nil {
			return true
		}
	}
	return false
}

// RouteTargets lists the steps the step's routing can lead to: its check
// transitions, retry fallback, in-agent escalation, sub-steps and intent
// transitions (the default initial.X → continuation.X of next included
// when that step exists and next has no transition). Jump targets, chosen
// by the model, are not listed.
func (r *Registry) RouteTargets(id string) []string {
	st := r.Steps[id]
	var next []string
	if st.Check != nil {
		next = append(next, st.Check.OnPass.Next, st.Check.OnFail.Next)
	}
	if st.Retry != nil {
		next = append(next, st.Retry.FallbackStep)
	}
	if st.Escalation != nil && (st.Escalation.NotificationMethod == "" || st.Escalation.NotificationMethod == "in_agent") {
		next = append(next, st.Escalation.EscalateTo)
	}
	next = append(next, st.SubSteps...)
	intents := make([]string, 0, len(st.Transitions))
	for k := range st.Transitions {
		intents = append(intents, k)
	}
	sort.Strings(intents)
	for _, k := range intents {
		next = append(next, st.Transitions[k].Steps()...)
	}
	if g := st.StructuredGate; g != nil {
		if _, has := st.Transitions[IntentNext]; !has && contains(g.AllowedIntents, IntentNext) {
			if c, ok := DefaultNext(id); ok {
				next = append(next, c)
			}
		}
	}
	out := next[:0]
	for _, n := range next {
		if _, ok := r.Steps[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// DefaultNext is where next goes from a step without a next transition:
// initial.X → continuation.X.
func DefaultNext(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "initial.")
	if !ok || rest == "" {
		return "", false
	}
	return "continuation." + rest, true
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// intentList renders intents for messages.
func intentList(xs []string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	return fmt.Sprintf("[%s]", strings.Join(xs, ", "))
}
