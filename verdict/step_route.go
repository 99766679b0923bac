package verdict

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// Move kinds of intent routing (next, escalate and abort are shared with
// check transitions).
const (
	MoveRepeat  = "repeat"  // intent repeat: the same step again
	MoveJump    = "jump"    // intent jump: to the step the model named
	MoveHandoff = "handoff" // intent handoff: to transitions.handoff
	MoveClosing = "closing" // intent closing from a closure step: the flow is done
)

// routeErr is a STEP_ROUTE error at the step's pointer.
func (m *Machine) routeErr(id, hint, format string, args ...any) error {
	return &agenterr.Error{Code: agenterr.CodeStepRoute, Layer: agenterr.LayerStep,
		Message: fmt.Sprintf("step %q: ", id) + fmt.Sprintf(format, args...), File: m.opts.File,
		Pointer: agentdir.JoinPointer("steps", id), Hint: hint}
}

// route takes the transition of step id for the intent in is (the step's
// structuredGate read it from the structured output). Rules:
//   - closing completes the flow; only a closure step may emit it.
//   - abort ends the flow without completion (the model gives up).
//   - repeat runs the step again (or goes to transitions.repeat when set).
//   - jump goes to the step named at targetField (any step of the
//     registry but a sub-step).
//   - next, handoff, escalate follow transitions.<intent>: a target, or a
//     target chosen by the handoff value named by condition ("default" for
//     any other value); next without a transition goes from initial.X to
//     continuation.X.
//   - a transition to null is terminal, which only closing may be.
func (m *Machine) route(id string, s agentdir.Step, in IntentInterpretation) (event.StepMove, error) {
	kind := s.Kind()
	if kind != "" && in.Intent != agentdir.IntentAbort && !slices.Contains(agentdir.KindIntents()[kind], in.Intent) {
		return event.StepMove{}, m.routeErr(id, fmt.Sprintf("a %s step emits one of %v", kind, agentdir.KindIntents()[kind]),
			"intent %q is not allowed for a %s step", in.Intent, kind)
	}
	mv := event.StepMove{Intent: in.Intent}
	switch in.Intent {
	case agentdir.IntentClosing:
		if kind != agentdir.KindClosure {
			return event.StepMove{}, m.routeErr(id, `only a step with "stepKind": "closure" (or c2 "closure") may emit closing; work steps hand off to one`,
				"closing from a %s step", kindName(kind))
		}
		if t, ok := s.Transitions[agentdir.IntentClosing]; ok && !t.Terminal && t.Target != nil {
			return event.StepMove{}, m.routeErr(id, `closing ends the flow: write "closing": {"target": null}`,
				"transitions.closing names step %q; closing is terminal", *t.Target)
		}
		m.st.Completed = true
		m.st.Return = nil
		mv.Kind, mv.Complete = MoveClosing, true
		return mv, nil
	case agentdir.IntentAbort:
		m.st.Aborted = true
		mv.Kind, mv.Aborted = MoveAbort, true
		return mv, nil
	case agentdir.IntentRepeat:
		target := id
		if _, ok := s.Transitions[agentdir.IntentRepeat]; ok {
			t, terminal, err := m.transitionTarget(id, s, in)
			if err != nil {
				return event.StepMove{}, err
			}
			if terminal {
				return event.StepMove{}, m.routeErr(id, "only closing may end the flow; name the step to repeat with",
					"transitions.repeat is null (terminal), which only closing may be")
			}
			target = t
		}
		if err := m.enterRouted(target); err != nil {
			return event.StepMove{}, err
		}
		mv.Kind = MoveRepeat
		return mv, nil
	case agentdir.IntentJump:
		t := in.Target
		if t == "" {
			return event.StepMove{}, m.routeErr(id, "the answer must name the target step at structuredGate.targetField",
				"jump without a target")
		}
		if err := m.jumpable(id, t); err != nil {
			return event.StepMove{}, err
		}
		if err := m.enterRouted(t); err != nil {
			return event.StepMove{}, err
		}
		mv.Kind = MoveJump
		return mv, nil
	}
	target, terminal, err := m.transitionTarget(id, s, in)
	if err != nil {
		return event.StepMove{}, err
	}
	if terminal {
		return event.StepMove{}, m.routeErr(id, "only closing may end the flow; name the next step",
			"transitions.%s is null (terminal), which only closing may be", in.Intent)
	}
	if err := m.enterRouted(target); err != nil {
		return event.StepMove{}, err
	}
	switch in.Intent {
	case agentdir.IntentHandoff:
		mv.Kind = MoveHandoff
	case agentdir.IntentEscalate:
		mv.Kind = MoveEscalate
	default:
		mv.Kind = MoveNext
	}
	return mv, nil
}

// transitionTarget resolves transitions.<intent> of step id.
func (m *Machine) transitionTarget(id string, s agentdir.Step, in IntentInterpretation) (target string, terminal bool, err error) {
	t, ok := s.Transitions[in.Intent]
	if !ok {
		if in.Intent == agentdir.IntentNext {
			if c, ok := agentdir.DefaultNext(id); ok {
				if _, exists := m.reg.Steps[c]; exists {
					return c, false, nil
				}
			}
		}
		return "", false, m.routeErr(id, fmt.Sprintf(`add "transitions": {%q: {"target": "<step id>"}}`, in.Intent),
			"no transition for intent %q", in.Intent)
	}
	if t.Condition != "" {
		val := "default"
		if v, ok := in.Handoff[t.Condition]; ok && v != nil {
			switch x := v.(type) {
			case string:
				val = x
			case bool:
				val = strconv.FormatBool(x)
			default:
				val = handoffText(x)
			}
		}
		p, ok := t.Targets[val]
		if !ok {
			p, ok = t.Targets["default"]
		}
		if !ok {
			return "", false, m.routeErr(id, `add a "default" target to the conditional transition`,
				"transitions.%s: handoff value %s=%q matches no target", in.Intent, t.Condition, val)
		}
		if p == nil {
			return "", true, nil
		}
		target = *p
	} else {
		if t.Terminal || t.Target == nil {
			return "", true, nil
		}
		target = *t.Target
	}
	if _, ok := m.reg.Steps[target]; !ok {
		return "", false, m.routeErr(id, "name one of the registry's steps", "transitions.%s names unknown step %q", in.Intent, target)
	}
	return target, false, nil
}

// jumpable checks a jump target the model chose.
func (m *Machine) jumpable(id, target string) error {
	st, ok := m.reg.Steps[target]
	if !ok {
		return m.routeErr(id, "the jump target must be one of the registry's step ids", "jump to unknown step %q", target)
	}
	if st.Type == TypeSubStep {
		return m.routeErr(id, "jump to the parent step instead", "jump to sub-step %q", target)
	}
	return nil
}

// enterRouted enters id through an intent; the consecutive-entry limit
// applies only when the registry sets stepLoopLimit (a routed flow loops
// on its continuation step by design; the run's budgets bound it).
func (m *Machine) enterRouted(id string) error {
	if m.reg.StepLoopLimit > 0 {
		return m.enter(id)
	}
	m.enterStep(id)
	return nil
}

func kindName(kind string) string {
	if kind == "" {
		return "kind-less"
	}
	return kind
}

// record keeps the outputs of step id for later steps' inputs: the
// top-level keys of its structured output, overlaid with its handoff
// values.
func (m *Machine) record(id string, output json.RawMessage, handoff map[string]any) {
	var doc map[string]any
	if len(output) > 0 {
		_ = json.Unmarshal(output, &doc)
	}
	if len(doc) == 0 && len(handoff) == 0 {
		return
	}
	vals := make(map[string]any, len(doc)+len(handoff))
	maps.Copy(vals, doc)
	maps.Copy(vals, handoff)
	if m.st.Outputs == nil {
		m.st.Outputs = map[string]map[string]any{}
	}
	m.st.Outputs[id] = vals
}

// Inputs are the prompt variables that step id's inputs take from earlier
// steps' outputs: {uv-<stepId with . as _>_<key>}. Strings are passed as
// they are, other values as JSON. A required input (the default) that no
// earlier iteration produced is STEP_ROUTE; an optional one takes its
// default, or stays unset.
func (m *Machine) Inputs(id string) (map[string]string, error) {
	s := m.reg.Steps[id]
	if len(s.Inputs) == 0 {
		return nil, nil
	}
	names := slices.Sorted(maps.Keys(s.Inputs))
	out := make(map[string]string, len(names))
	for _, name := range names {
		spec := s.Inputs[name]
		from, key, ok := spec.Source()
		if !ok && spec.From != "" {
			return nil, m.routeErr(id, `write from as "<stepId>.<key>"`, "input %q: from %q names no step and key", name, spec.From)
		}
		v, found := m.st.Outputs[from][key] // no from: only the default
		switch {
		case found && v != nil:
			out[spec.Variable(name)] = handoffText(v)
		case len(spec.Default) > 0 && string(spec.Default) != "null":
			var d any
			if err := json.Unmarshal(spec.Default, &d); err != nil {
				return nil, m.routeErr(id, "write default as JSON", "input %q: default: %v", name, err)
			}
			out[spec.Variable(name)] = handoffText(d)
		case spec.IsRequired():
			return nil, m.routeErr(id,
				fmt.Sprintf("make step %q produce %q (a top-level key of its answer or a handoffFields entry) before this step runs, or set \"required\": false", from, key),
				"input %q needs %s, which no earlier iteration produced", name, spec.From)
		}
	}
	return out, nil
}
