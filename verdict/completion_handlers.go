package verdict

import (
	"context"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// state is the shared bookkeeping of the built-in handlers: the result of
// the last Check, plus a sticky forced completion (CompletionSignal
// "complete").
type handlerState struct {
	complete bool
	reason   string
	forced   bool
}

func (s *handlerState) set(r event.CompletionResult) event.CompletionResult {
	if s.forced {
		r.Complete, r.Reason = true, s.reason
	}
	s.complete, s.reason = r.Complete, r.Reason
	if !r.Complete {
		s.reason = ""
	}
	return r
}

// IsComplete reports the outcome of the last Check (or a forced completion).
func (s *handlerState) IsComplete() bool { return s.complete }

// Reason is why the handler is complete; "" when it is not.
func (s *handlerState) Reason() string {
	if !s.complete {
		return ""
	}
	return s.reason
}

// ForceComplete marks the handler complete regardless of later checks
// (CompletionSignal "complete"). data, when not nil, is quoted in the reason.
func (s *handlerState) ForceComplete(data any) {
	s.forced, s.complete = true, true
	s.reason = "completion signalled"
	if data != nil {
		s.reason = fmt.Sprintf("completion signalled: %v", data)
	}
}

// checkContext enforces the preconditions shared by every handler: an
// iteration has finished (Iteration > 0).
func checkContext(c CompletionContext, needSummary bool) error {
	if c.Iteration <= 0 {
		return agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"completion check needs iteration > 0, got %d", c.Iteration)
	}
	if needSummary && c.Summary == nil {
		return agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"completion check at iteration %d has no iteration summary", c.Iteration)
	}
	return nil
}

// IterationBudget completes after exactly Max iterations (agent.json
// completion type "iterationBudget"): Check with Iteration >= Max is
// complete, anything earlier is not.
type IterationBudget struct {
	// Max is the number of iterations to run (> 0).
	Max int
	handlerState
}

// Check implements Handler.
func (h *IterationBudget) Check(_ context.Context, c CompletionContext) (event.CompletionResult, error) {
	if err := checkContext(c, false); err != nil {
		return event.CompletionResult{}, err
	}
	if h.Max <= 0 {
		return event.CompletionResult{}, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"iteration budget needs maxIterations > 0, got %d", h.Max)
	}
	r := event.CompletionResult{}
	switch {
	case c.Iteration == h.Max:
		r = event.CompletionResult{Complete: true, Reason: fmt.Sprintf("iteration budget reached: %d of %d iterations", c.Iteration, h.Max)}
	case c.Iteration > h.Max: // a resumed run re-runs a stopped iteration past the budget
		unit := "iterations"
		if h.Max == 1 {
			unit = "iteration"
		}
		r = event.CompletionResult{Complete: true, Reason: fmt.Sprintf("iteration budget reached: iteration %d ran on resume, past the budget of %d %s", c.Iteration, h.Max, unit)}
	}
	return h.set(r), nil
}

// Keyword completes when the model's own text of the iteration contains
// Keyword (agent.json completion type "keyword"). Only assistant responses
// count: a keyword that appears in tool output (a file the model read, a
// command's stdout) is not a declaration by the model.
type Keyword struct {
	Keyword string
	handlerState
}

// Check implements Handler.
func (h *Keyword) Check(_ context.Context, c CompletionContext) (event.CompletionResult, error) {
	if err := checkContext(c, true); err != nil {
		return event.CompletionResult{}, err
	}
	if h.Keyword == "" {
		return event.CompletionResult{}, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"keyword completion needs a non-empty keyword")
	}
	r := event.CompletionResult{}
	if containsKeyword(c.Summary.AssistantResponses, h.Keyword) {
		r = event.CompletionResult{Complete: true, Declared: true, Reason: fmt.Sprintf("completion keyword %q found in the response", h.Keyword)}
	}
	return h.set(r), nil
}

func containsKeyword(responses []string, kw string) bool {
	if kw == "" {
		return false
	}
	for _, r := range responses {
		if strings.Contains(r, kw) {
			return true
		}
	}
	return false
}

// StepFlow completes when the step machine reached a completing transition
// (a check's onPass/onFail with "complete": true) in this iteration.
type StepFlow struct {
	handlerState
}

// Check implements Handler.
func (h *StepFlow) Check(_ context.Context, c CompletionContext) (event.CompletionResult, error) {
	if err := checkContext(c, false); err != nil {
		return event.CompletionResult{}, err
	}
	r := event.CompletionResult{}
	if c.StepComplete {
		step := ""
		if c.Summary != nil && c.Summary.StepID != "" {
			step = " at step " + c.Summary.StepID
		}
		r = event.CompletionResult{Complete: true, Reason: "step flow reached a completing transition" + step}
	}
	return h.set(r), nil
}

// Mode is how a Composite combines its conditions.
type CompositeMode string

// Composite modes: how a composite handler combines its conditions.
const (
	CompositeAny CompositeMode = "any" // complete when one condition is complete (OR)
	CompositeAll CompositeMode = "all" // complete when every condition is complete (AND)
)

// Condition is one named member of a Composite.
type CompositeCondition struct {
	Name    string
	Handler CompletionHandler
}

// Composite combines conditions (agent.json completion type "composite").
// Conditions are checked in order; in ModeAny the first complete condition
// ends the evaluation (short circuit) and the rest are not checked. In
// ModeAll every condition is checked each time.
type Composite struct {
	Mode       CompositeMode
	Conditions []CompositeCondition
	handlerState
	states map[string]bool
}

// Check implements Handler. The result is Declared when any member saw a
// declaration.
func (h *Composite) Check(ctx context.Context, c CompletionContext) (event.CompletionResult, error) {
	if err := checkContext(c, false); err != nil {
		return event.CompletionResult{}, err
	}
	if h.Mode != CompositeAny && h.Mode != CompositeAll {
		return event.CompletionResult{}, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"composite mode must be %q or %q, got %q", CompositeAny, CompositeAll, h.Mode)
	}
	if len(h.Conditions) == 0 {
		return event.CompletionResult{}, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"composite completion has no conditions")
	}
	states := make(map[string]bool, len(h.Conditions))
	for _, cond := range h.Conditions {
		states[cond.Name] = false
	}
	var (
		done     []string
		declared bool
		result   event.CompletionResult
	)
	for _, cond := range h.Conditions {
		r, err := cond.Handler.Check(ctx, c)
		if err != nil {
			return event.CompletionResult{}, fmt.Errorf("composite condition %q: %w", cond.Name, err)
		}
		states[cond.Name] = r.Complete
		declared = declared || r.Declared
		if r.Complete {
			done = append(done, fmt.Sprintf("%s (%s)", cond.Name, r.Reason))
			if h.Mode == CompositeAny {
				break
			}
		}
	}
	switch {
	case h.Mode == CompositeAny && len(done) > 0:
		result = event.CompletionResult{Complete: true, Reason: "any: " + done[0]}
	case h.Mode == CompositeAll && len(done) == len(h.Conditions):
		result = event.CompletionResult{Complete: true, Reason: "all: " + strings.Join(done, "; ")}
	}
	result.Declared = declared
	h.states = states
	return h.set(result), nil
}

// ConditionStates returns each condition's state after the last Check.
// Conditions skipped by ModeAny's short
// circuit are false. The map is a copy.
func (h *Composite) ConditionStates() map[string]bool {
	out := make(map[string]bool, len(h.states))
	for k, v := range h.states {
		out[k] = v
	}
	return out
}

// AdvancePhase forwards the phase-advance signal to every member that is
// PhaseAware.
func (h *Composite) AdvancePhase() {
	for _, c := range h.Conditions {
		if p, ok := c.Handler.(PhaseAware); ok {
			p.AdvancePhase()
		}
	}
}
