package verdict

import (
	"context"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// StepEvaluation is the result of Evaluate: the step check and the
// transitions it caused (the step's own, then any gateway hops), in that
// order.
type StepEvaluation struct {
	Check CheckResult      `json:"check"`
	Moves []event.StepMove `json:"moves"`
	// Intent is what the step's structuredGate read (routed steps only).
	Intent *IntentInterpretation `json:"intent,omitempty"`
}

// StepComplete reports whether any move completed the step flow.
func (e StepEvaluation) StepComplete() bool {
	for _, mv := range e.Moves {
		if mv.Complete {
			return true
		}
	}
	return false
}

// Evaluate is the step half of a verdict (Stage.Decide) after an iteration
// ran the current step: the step check (step keywords, which decide the
// transition), then the transition and any gateways it leads to. The
// agent's completion handler (completion keywords, which decide the run)
// runs after it in Stage.Decide, told whether the moves completed the
// flow; both read the same response independently, so a keyword present
// in both makes both react. A step with a structuredGate is routed by the
// intent of its structured answer instead of a check (see route).
func (m *Machine) Evaluate(ctx context.Context, checker *Checker, in CheckInput, o StepOutcome) (StepEvaluation, error) {
	var ev StepEvaluation
	id, s := m.Current()
	if s.StructuredGate != nil && !m.IsTerminal() {
		return m.evaluateRouted(id, s, in)
	}
	if s.Check != nil {
		r, err := checker.Check(ctx, s.Check, in)
		if err != nil {
			return ev, err
		}
		ev.Check = r
	} else {
		ev.Check = CheckResult{Passed: true, Reason: "step has no check"}
	}
	o.Passed = ev.Check.Passed
	if o.Reason == "" {
		o.Reason = ev.Check.Reason
	}
	mv, err := m.Transition(ctx, o)
	if err != nil {
		return ev, err
	}
	ev.Moves = append(ev.Moves, mv)
	hops, err := m.RouteGateways(ctx, checker, in, o.Iteration)
	ev.Moves = append(ev.Moves, hops...)
	return ev, err
}

// evaluateRouted is Evaluate for a step routed by its structuredGate: the
// intent read from the structured output (never the text) takes the
// transition; the step's answer is recorded for later steps' inputs.
func (m *Machine) evaluateRouted(id string, s agentdir.Step, in CheckInput) (StepEvaluation, error) {
	var ev StepEvaluation
	it, err := InterpretIntent(id, s.StructuredGate, in.Structured)
	if err != nil {
		return ev, err
	}
	ev.Intent = &it
	ev.Check = CheckResult{Type: "intent", Passed: it.Intent != agentdir.IntentAbort && !it.Fallback, Reason: intentReason(it)}
	m.record(id, in.Structured, it.Handoff)
	mv, err := m.route(id, s, it)
	if err != nil {
		return ev, err
	}
	mv.From, mv.Passed, mv.Reason = id, ev.Check.Passed, ev.Check.Reason
	if mv.To == "" {
		mv.To = m.st.Current
	}
	m.opts.Emitter.Emit(mv)
	ev.Moves = append(ev.Moves, mv)
	return ev, nil
}

// RouteGateways routes through gateway steps without model calls: while
// the current step is a gateway, its check is evaluated on in (the
// previous iteration's response and actions) and its transition taken.
// More hops than there are steps means gateways route in a cycle, which is
// STEP_LOOP_LIMIT.
func (m *Machine) RouteGateways(ctx context.Context, checker *Checker, in CheckInput, iteration int) ([]event.StepMove, error) {
	var moves []event.StepMove
	for hops := 0; m.IsGateway(); hops++ {
		if hops > len(m.reg.Steps) {
			return moves, agenterr.New(agenterr.CodeStepLoopLimit, agenterr.LayerLoop, false,
				"gateways route in a cycle (at %q after %d hops)", m.st.Current, hops)
		}
		_, s := m.Current()
		r, err := checker.Check(ctx, s.Check, in)
		if err != nil {
			return moves, err
		}
		mv, err := m.Transition(ctx, StepOutcome{Passed: r.Passed, Reason: r.Reason, Iteration: iteration})
		if err != nil {
			return moves, err
		}
		moves = append(moves, mv)
	}
	return moves, nil
}
