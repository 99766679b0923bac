// Iteration records: what one iteration did (IterationSummary), what
// carries into the next one (ContextCarry) and the rule that updates the
// carry (UpdateCarry). The loop produces them; the verdict and the step
// checks read them.

package event

import (
	"encoding/json"
	"strings"
	"time"
)

// DetectedAction is an action the loop detected in a response (a tool call,
// a declared completion, a keyword).
type DetectedAction struct {
	Type   string          `json:"type"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// ActionResult is the outcome of a detected action, as the step checks of
// the next iteration see it.
type ActionResult struct {
	Action  string `json:"action"`
	Success bool   `json:"success"`
	Output  string `json:"output,omitempty"`
}

// IterationSummary records one iteration: the prompt sent, what the model
// answered, the tools it used, the actions detected, errors and usage, and
// the step it ran with that step's structured output, which completion checks
// read.
type IterationSummary struct {
	Iteration          int              `json:"iteration"`
	SessionID          string           `json:"sessionId,omitempty"`
	StepID             string           `json:"stepId,omitempty"`
	Prompt             string           `json:"prompt,omitempty"`
	AssistantResponses []string         `json:"assistantResponses"`
	ToolsUsed          []ToolUse        `json:"toolsUsed"`
	DetectedActions    []DetectedAction `json:"detectedActions"`
	ActionResults      []ActionResult   `json:"actionResults,omitempty"`
	StructuredOutput   json.RawMessage  `json:"structuredOutput,omitempty"`
	Errors             []string         `json:"errors"`
	Usage              Usage            `json:"usage"`
	CostUSD            float64          `json:"costUsd,omitempty"`
	// UsageUnreported counts the model responses of the iteration that
	// the provider billed without reporting their usage (streams dropped
	// before their usage and retried): Usage and CostUSD miss them.
	UsageUnreported int       `json:"usageUnreported,omitempty"`
	Timestamp       time.Time `json:"timestamp"`
	DurationMs      int64     `json:"durationMs"`
}

// Text joins the assistant responses with newlines.
func (s *IterationSummary) Text() string { return strings.Join(s.AssistantResponses, "\n") }

// ContextCarry is what one iteration hands to the next: the previous
// response and the context accumulated so far.
type ContextCarry struct {
	PreviousResponse   string         `json:"previousResponse,omitempty"`
	AccumulatedContext map[string]any `json:"accumulatedContext,omitempty"`
}

// UpdateCarry computes the carry for the next iteration: the previous response is
// the iteration's responses joined by newlines; the accumulated context keeps
// what it had and records the last tools used and actions detected.
func UpdateCarry(c ContextCarry, s *IterationSummary) ContextCarry {
	acc := make(map[string]any, len(c.AccumulatedContext)+2)
	for k, v := range c.AccumulatedContext {
		acc[k] = v
	}
	tools := make([]string, len(s.ToolsUsed))
	for i, t := range s.ToolsUsed {
		tools[i] = t.Name
	}
	actions := make([]string, len(s.DetectedActions))
	for i, a := range s.DetectedActions {
		actions[i] = a.Type
	}
	acc["lastToolsUsed"] = tools
	acc["lastActions"] = actions
	return ContextCarry{PreviousResponse: s.Text(), AccumulatedContext: acc}
}
