package completion

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/config"
)

// Verifier checks completion conditions against the world.
// *CompletionValidator implements it.
type Verifier interface {
	Validate(ctx context.Context, conditions []config.CompletionCondition) (ValidationResult, error)
}

// Declaration is what the model said about being done (seed 004 "AI
// declaration").
type Declaration struct {
	// Declared is true when the model declared completion.
	Declared bool `json:"declared"`
	// Source says how: "structured.status", "structured.next_action" or
	// "keyword".
	Source string `json:"source,omitempty"`
	// Status is the structured output's reported status, if any.
	Status string `json:"status,omitempty"`
	// NextAction is the structured output's declared next action, if any
	// (next_action as a string, or next_action.action).
	NextAction string `json:"nextAction,omitempty"`
	// NextActionReason is next_action.reason, if any.
	NextActionReason string `json:"nextActionReason,omitempty"`
}

// DeclarationFields names where Detect looks in the structured output.
// Paths are dot-separated ("result.status"). Empty fields use the defaults
// "status" and "next_action".
type DeclarationFields struct {
	Status     string
	NextAction string
}

// DetectDeclaration reads a declaration from the structured output (status
// == "completed", next_action == "complete" or next_action.action ==
// "complete") or, failing that, from keyword in the assistant responses
// ("" disables the keyword). Malformed structured output declares nothing.
func DetectDeclaration(structured json.RawMessage, responses []string, keyword string, fields DeclarationFields) Declaration {
	if fields.Status == "" {
		fields.Status = "status"
	}
	if fields.NextAction == "" {
		fields.NextAction = "next_action"
	}
	var d Declaration
	if len(structured) > 0 {
		var v any
		if json.Unmarshal(structured, &v) == nil {
			if s, ok := lookupPath(v, fields.Status).(string); ok {
				d.Status = s
			}
			switch na := lookupPath(v, fields.NextAction).(type) {
			case string:
				d.NextAction = na
			case map[string]any:
				if a, ok := na["action"].(string); ok {
					d.NextAction = a
				}
				if r, ok := na["reason"].(string); ok {
					d.NextActionReason = r
				}
			}
		}
	}
	switch {
	case strings.EqualFold(d.Status, "completed"):
		d.Declared, d.Source = true, "structured."+fields.Status
	case strings.EqualFold(d.NextAction, "complete"):
		d.Declared, d.Source = true, "structured."+fields.NextAction
	case containsKeyword(responses, keyword):
		d.Declared, d.Source = true, "keyword"
	}
	return d
}

// lookupPath follows a dot path through decoded JSON objects.
func lookupPath(v any, path string) any {
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// Declared is seed 004's "AI declaration + external verification" handler
// (agent.json completion type "structured"). A declaration alone is not
// completion: when the model declares completion, Conditions are verified
// and only a passing verification completes. A declaration with unmet
// conditions returns the failure in Result.Validation so the loop sends the
// failure pattern's retry prompt.
type Declared struct {
	// Keyword, when set, is also accepted as a declaration.
	Keyword string
	// Fields locate status and next_action in the structured output.
	Fields DeclarationFields
	// Conditions must all pass (in order) for a declaration to count.
	Conditions []config.CompletionCondition
	// Verifier runs Conditions; required when Conditions is not empty.
	Verifier Verifier
	// AcceptUndeclared verifies Conditions on every check and completes
	// when they hold even without a declaration (seed 004's
	// IssueCompletionHandler rule: "return externalConditionsMet"). A
	// declaration with unmet conditions still returns the failure. It
	// needs Conditions; it costs a validator run per iteration.
	AcceptUndeclared bool
	state
	last Declaration
}

// Check implements Handler.
func (h *Declared) Check(ctx context.Context, c Context) (Result, error) {
	if err := checkContext(c, true); err != nil {
		return Result{}, err
	}
	d := DetectDeclaration(c.Summary.StructuredOutput, c.Summary.AssistantResponses, h.Keyword, h.Fields)
	h.last = d
	if !d.Declared && !(h.AcceptUndeclared && len(h.Conditions) > 0) {
		return h.set(Result{}), nil
	}
	if len(h.Conditions) == 0 {
		return h.set(Result{Complete: true, Declared: true,
			Reason: fmt.Sprintf("completion declared (%s); no verification configured", d.Source)}), nil
	}
	if h.Verifier == nil {
		return Result{}, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"declared completion has %d conditions but no verifier", len(h.Conditions))
	}
	vr, err := h.Verifier.Validate(ctx, h.Conditions)
	if err != nil {
		return Result{}, err
	}
	if !vr.Valid {
		if !d.Declared {
			// Not declared, not done: nothing to retry.
			return h.set(Result{}), nil
		}
		return h.set(Result{Declared: true, Validation: &vr}), nil
	}
	names := make([]string, len(h.Conditions))
	for i, c := range h.Conditions {
		names[i] = c.Validator
	}
	if !d.Declared {
		return h.set(Result{Complete: true,
			Reason: "completion conditions hold (not declared): " + strings.Join(names, ", ")}), nil
	}
	return h.set(Result{Complete: true, Declared: true,
		Reason: fmt.Sprintf("completion declared (%s) and verified: %s", d.Source, strings.Join(names, ", "))}), nil
}

// LastDeclaration is the declaration seen by the last Check.
func (h *Declared) LastDeclaration() Declaration { return h.last }
