package verdict

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

func gate(intents ...string) *agentdir.StructuredGate {
	return &agentdir.StructuredGate{AllowedIntents: intents, IntentField: "next_action.action",
		IntentSchemaRef: "#/properties/next_action/properties/action"}
}

func TestInterpret(t *testing.T) {
	g := gate("next", "repeat", "closing", "jump")
	g.TargetField = "next_action.details.target"
	g.HandoffFields = []string{"analysis.understanding", "issue", "missing.value"}
	for _, tc := range []struct {
		out, intent, target, reason string
	}{
		{`{"next_action":{"action":"next"}}`, "next", "", ""},
		{`{"next_action":{"action":"Continue","reason":"moving on"}}`, "next", "", "moving on"},
		{`{"next_action":{"action":"pass"}}`, "next", "", ""},
		{`{"next_action":{"action":"wait"},"reason":"top-level reason"}`, "repeat", "", "top-level reason"},
		{`{"next_action":{"action":"FAIL"}}`, "repeat", "", ""},
		{`{"next_action":{"action":"done"}}`, "closing", "", ""},
		{`{"next_action":{"action":"finished"}}`, "closing", "", ""},
		{`{"next_action":{"action":"jump","details":{"target":"initial.x"}}}`, "jump", "initial.x", ""},
	} {
		in, err := InterpretIntent("s", g, json.RawMessage(tc.out))
		if err != nil || in.Intent != tc.intent || in.Target != tc.target || in.Reason != tc.reason || in.Fallback {
			t.Errorf("%s: %+v %v", tc.out, in, err)
		}
	}
	in, err := InterpretIntent("s", g, json.RawMessage(`{"next_action":{"action":"next"},"analysis":{"understanding":"u"},"issue":7}`))
	if err != nil || len(in.Handoff) != 2 || in.Handoff["understanding"] != "u" || in.Handoff["issue"] != float64(7) {
		t.Fatalf("handoff %+v %v", in.Handoff, err)
	}
	// failFast (the default): no intent, an unknown one, one not allowed,
	// a non-string, no JSON at all.
	for _, out := range []string{`{"status":"completed"}`, `{"next_action":{"action":"proceed"}}`,
		`{"next_action":{"action":"handoff"}}`, `{"next_action":{"action":3}}`, ``, `not json`} {
		_, err := InterpretIntent("s", g, json.RawMessage(out))
		if !errors.Is(err, agenterr.ErrStepIntent) {
			t.Errorf("%q: %v", out, err)
		}
	}
	// failFast false: fallbackIntent, else next, else the first allowed.
	no := false
	for _, tc := range []struct {
		g    *agentdir.StructuredGate
		want string
	}{
		{&agentdir.StructuredGate{AllowedIntents: []string{"next", "repeat"}, IntentField: "a", FailFast: &no, FallbackIntent: "repeat"}, "repeat"},
		{&agentdir.StructuredGate{AllowedIntents: []string{"repeat", "next"}, IntentField: "a", FailFast: &no}, "next"},
		{&agentdir.StructuredGate{AllowedIntents: []string{"closing", "repeat"}, IntentField: "a", FailFast: &no}, "closing"},
	} {
		in, err := InterpretIntent("s", tc.g, json.RawMessage(`{}`))
		if err != nil || in.Intent != tc.want || !in.Fallback || in.Reason == "" {
			t.Errorf("%+v: %+v %v", tc.g, in, err)
		}
	}
}

// routedRegistry: initial.a (work) → continuation.a (default next) →
// handoff by a handoff value → closure.a / verification.v.
func routedRegistry() agentdir.Registry {
	str := func(s string) *string { return &s }
	hg := gate("next", "repeat", "handoff", "jump")
	hg.HandoffFields = []string{"result.kind", "result.ok"}
	hg.TargetField = "target"
	return agentdir.Registry{EntryStep: "initial.a", Steps: map[string]agentdir.Step{
		"initial.a": {StepID: "initial.a", C2: "initial", C3: "a", StructuredGate: gate("next", "repeat", "closing"),
			Inputs: map[string]agentdir.InputSpec{"plan": {From: "verification.v.plan"}}},
		"continuation.a": {StepID: "continuation.a", C2: "continuation", C3: "a", StructuredGate: hg,
			Transitions: map[string]agentdir.IntentTransition{
				"handoff": {Condition: "kind", Targets: map[string]*string{"check": str("verification.v"), "true": str("initial.a"), "default": str("closure.a")}},
			}},
		"verification.v": {StepID: "verification.v", C2: "verification", C3: "v", StructuredGate: gate("next", "escalate"),
			Transitions: map[string]agentdir.IntentTransition{"next": {Target: str("continuation.a")}, "escalate": {Target: str("initial.a")}}},
		"closure.a": {StepID: "closure.a", C2: "closure", C3: "a", StructuredGate: gate("closing", "repeat"),
			Transitions: map[string]agentdir.IntentTransition{"closing": {Terminal: true}}},
		"part": {StepID: "part", Type: TypeSubStep, C2: "x", C3: "part"},
		"host": {StepID: "host", C2: "x", C3: "host", SubSteps: []string{"part"}},
	}}
}

func evalRouted(t *testing.T, m *Machine, out string) (StepEvaluation, error) {
	t.Helper()
	return m.Evaluate(context.Background(), NewChecker(CheckerConfig{}), CheckInput{Structured: json.RawMessage(out)},
		StepOutcome{Iteration: 1})
}

func TestRouteByIntent(t *testing.T) {
	m, err := NewMachine(new(routedRegistry()), MachineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		out, to, kind string
	}{
		{`{"next_action":{"action":"repeat"}}`, "initial.a", MoveRepeat},
		{`{"next_action":{"action":"next"}}`, "continuation.a", MoveNext}, // initial.X → continuation.X
		{`{"next_action":{"action":"handoff"},"result":{"kind":"check"}}`, "verification.v", MoveHandoff},
		{`{"next_action":{"action":"escalate"},"plan":"p1"}`, "initial.a", MoveEscalate},
		{`{"next_action":{"action":"next"}}`, "continuation.a", MoveNext},
		{`{"next_action":{"action":"jump"},"target":"verification.v"}`, "verification.v", MoveJump},
		{`{"next_action":{"action":"next"}}`, "continuation.a", MoveNext},
		{`{"next_action":{"action":"handoff"},"result":{"kind":true}}`, "initial.a", MoveHandoff},
		{`{"next_action":{"action":"next"}}`, "continuation.a", MoveNext},
		{`{"next_action":{"action":"handoff"},"result":{"kind":"other"}}`, "closure.a", MoveHandoff}, // default
		{`{"next_action":{"action":"closing"}}`, "closure.a", MoveClosing},
	}
	for i, s := range steps {
		ev, err := evalRouted(t, m, s.out)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		mv := ev.Moves[0]
		if mv.To != s.to || mv.Kind != s.kind || ev.Intent == nil {
			t.Fatalf("step %d: %+v", i, mv)
		}
	}
	if !m.Completed() {
		t.Fatal("closing did not complete the flow")
	}
	// Each step's last answer is kept, with its handoff values by name.
	if got := m.Snapshot().Outputs["continuation.a"]["kind"]; got != "other" {
		t.Fatalf("outputs %v", m.Snapshot().Outputs)
	}
}

func TestRouteErrors(t *testing.T) {
	reg := routedRegistry()
	// A work step that lists closing (validate rejects it) still cannot
	// complete the flow at run time.
	for _, tc := range []struct {
		name, at, out string
	}{
		{"closing from a work step", "initial.a", `{"next_action":{"action":"closing"}}`},
		{"jump to an unknown step", "continuation.a", `{"next_action":{"action":"jump"},"target":"ghost"}`},
		{"jump to a sub-step", "continuation.a", `{"next_action":{"action":"jump"},"target":"part"}`},
		{"jump without target", "continuation.a", `{"next_action":{"action":"jump"}}`},
	} {
		m, err := NewMachine(new(reg), MachineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if tc.at != m.st.Current {
			m.enterStep(tc.at)
		}
		_, err = evalRouted(t, m, tc.out)
		if !errors.Is(err, agenterr.ErrStepRoute) || m.Completed() {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// A conditional handoff whose value matches no target and that has no
	// default.
	str := func(s string) *string { return &s }
	reg = routedRegistry()
	c := reg.Steps["continuation.a"]
	c.Transitions = map[string]agentdir.IntentTransition{"handoff": {Condition: "kind", Targets: map[string]*string{"x": str("closure.a")}}}
	reg.Steps["continuation.a"] = c
	m, _ := NewMachine(new(reg), MachineOptions{})
	m.enterStep("continuation.a")
	if _, err := evalRouted(t, m, `{"next_action":{"action":"handoff"},"result":{"kind":"y"}}`); !errors.Is(err, agenterr.ErrStepRoute) {
		t.Fatalf("unmatched condition: %v", err)
	}
	// A transition to a missing step is refused when the machine is built.
	reg = routedRegistry()
	v := reg.Steps["verification.v"]
	v.Transitions = map[string]agentdir.IntentTransition{"next": {Target: str("ghost")}}
	reg.Steps["verification.v"] = v
	if _, err := NewMachine(new(reg), MachineOptions{}); !errors.Is(err, agenterr.ErrConfigurationValidation) {
		t.Fatalf("NewMachine: %v", err)
	}
}

// A routed step loops on itself as long as the run's budgets allow, unless
// the registry sets stepLoopLimit.
func TestRoutedLoopLimit(t *testing.T) {
	reg := routedRegistry()
	m, _ := NewMachine(new(reg), MachineOptions{})
	for i := 0; i < 3*DefaultLoopLimit; i++ {
		if _, err := evalRouted(t, m, `{"next_action":{"action":"repeat"}}`); err != nil {
			t.Fatalf("repeat %d: %v", i, err)
		}
	}
	reg.StepLoopLimit = 2
	m, _ = NewMachine(new(reg), MachineOptions{})
	_, err1 := evalRouted(t, m, `{"next_action":{"action":"repeat"}}`)
	_, err2 := evalRouted(t, m, `{"next_action":{"action":"repeat"}}`)
	if err1 != nil || !errors.Is(err2, agenterr.ErrStepLoopLimit) {
		t.Fatalf("%v %v", err1, err2)
	}
}

// Inputs read the recorded outputs; a fork's outputs are the machine's only
// once committed, and they survive Snapshot/Restore (resume).
func TestInputsFromOutputs(t *testing.T) {
	m, _ := NewMachine(new(routedRegistry()), MachineOptions{})
	if _, err := m.Inputs("initial.a"); !errors.Is(err, agenterr.ErrStepRoute) {
		t.Fatalf("required input without output: %v", err)
	}
	m.enterStep("verification.v")
	f := m.Fork(nil, nil)
	if _, err := evalRouted(t, f, `{"next_action":{"action":"next"},"plan":{"steps":[1,2]}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Inputs("initial.a"); err == nil {
		t.Fatal("an uncommitted fork's output reached the machine")
	}
	m.Commit(f)
	got, err := m.Inputs("initial.a")
	if err != nil || got["verification_v_plan"] != `{"steps":[1,2]}` {
		t.Fatalf("%v %v", got, err)
	}
	b, _ := json.Marshal(m.Snapshot())
	var st event.StepState
	_ = json.Unmarshal(b, &st)
	m2, _ := NewMachine(new(routedRegistry()), MachineOptions{})
	if err := m2.Restore(st); err != nil {
		t.Fatal(err)
	}
	if got, err := m2.Inputs("initial.a"); err != nil || got["verification_v_plan"] != `{"steps":[1,2]}` {
		t.Fatalf("after restore: %v %v", got, err)
	}
	// An optional input takes its default, or stays unset.
	reg := routedRegistry()
	no := false
	a := reg.Steps["initial.a"]
	a.Inputs = map[string]agentdir.InputSpec{"x": {From: "closure.a.x", Required: &no, Default: json.RawMessage(`"none"`)},
		"y": {From: "closure.a.y", Required: &no}, "mode": {Default: json.RawMessage(`"fast"`)}}
	reg.Steps["initial.a"] = a
	m3, _ := NewMachine(new(reg), MachineOptions{})
	if got, err := m3.Inputs("initial.a"); err != nil || len(got) != 2 || got["closure_a_x"] != "none" || got["mode"] != "fast" {
		t.Fatalf("optional inputs: %v %v", got, err)
	}
}
