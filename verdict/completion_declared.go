package verdict

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
)

// Verifier checks completion conditions against the world.
// *CompletionValidator implements it.
type Verifier interface {
	Validate(ctx context.Context, conditions []agentdir.CompletionCondition) (event.ValidationResult, error)
}

// CompletionDeclaration is what the model said about being done.
type CompletionDeclaration struct {
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
func DetectDeclaration(structured json.RawMessage, responses []string, keyword string, fields DeclarationFields) CompletionDeclaration {
	if fields.Status == "" {
		fields.Status = "status"
	}
	if fields.NextAction == "" {
		fields.NextAction = "next_action"
	}
	var d CompletionDeclaration
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

// Declared reads the model's declaration of completion (agent.json
// completion type "structured"): status "completed" or next_action
// "complete" in the structured output, or Keyword in the response. A
// declaration is a claim, not completion: the run's verdict stage verifies
// it with the run's validators before the run completes, and sends the
// failure pattern's retry prompt when the world disagrees.
type Declared struct {
	// Keyword, when set, is also accepted as a declaration.
	Keyword string
	// Fields locate status and next_action in the structured output.
	Fields DeclarationFields
	// AcceptUndeclared asks the verdict stage to verify the run's
	// validators on every iteration and to complete when they hold even
	// without a declaration: the world's state decides, not the model's
	// word. It costs a validator run per
	// iteration; FromConfig accepts it only together with validators.
	AcceptUndeclared bool
	handlerState
	last CompletionDeclaration
}

// VerifyEveryIteration implements EveryIterationVerifier.
func (h *Declared) VerifyEveryIteration() bool { return h.AcceptUndeclared }

// EveryIterationVerifier is implemented by handlers that want the run's
// validators checked on every iteration, completing the run when they hold
// even if nothing was declared.
type EveryIterationVerifier interface {
	VerifyEveryIteration() bool
}

// Check implements Handler: a declaration is Complete and Declared (and
// still subject to verification by the verdict stage).
func (h *Declared) Check(_ context.Context, c CompletionContext) (event.CompletionResult, error) {
	if err := checkContext(c, true); err != nil {
		return event.CompletionResult{}, err
	}
	d := DetectDeclaration(c.Summary.StructuredOutput, c.Summary.AssistantResponses, h.Keyword, h.Fields)
	h.last = d
	if !d.Declared {
		return h.set(event.CompletionResult{}), nil
	}
	return h.set(event.CompletionResult{Complete: true, Declared: true, Reason: fmt.Sprintf("completion declared (%s)", d.Source)}), nil
}

// LastDeclaration is the declaration seen by the last Check.
func (h *Declared) LastDeclaration() CompletionDeclaration { return h.last }
