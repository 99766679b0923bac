package agentdir

import (
	"encoding/json"
	"testing"
)

// flowRegistry is a valid registry routed by intent: initial.main (work)
// → continuation.main (work) → handoff → closure.main (closure), which a
// validation step verifies.
func flowRegistry() map[string]any {
	gate := func(intents ...any) map[string]any {
		return map[string]any{"allowedIntents": intents, "intentField": "next_action.action",
			"intentSchemaRef": "#/properties/next_action/properties/action", "handoffFields": []any{"summary"}}
	}
	ref := map[string]any{"file": "review.schema.json", "schema": "review"}
	return map[string]any{
		"agentId": "demo", "c1": "steps", "entryStep": "initial.main",
		"steps": map[string]any{
			"initial.main": map[string]any{"stepId": "initial.main", "c2": "initial", "c3": "main", "stepKind": "work",
				"uvVariables": []any{"topic"}, "outputSchemaRef": ref, "structuredGate": gate("next", "repeat"),
				"transitions": map[string]any{"next": map[string]any{"target": "continuation.main"}}},
			"continuation.main": map[string]any{"c2": "continuation", "c3": "main", "outputSchemaRef": ref,
				"structuredGate": gate("next", "repeat", "handoff"),
				"transitions": map[string]any{"next": map[string]any{"target": "continuation.main"},
					"handoff": map[string]any{"target": "closure.main"}},
				"inputs": map[string]any{"plan": map[string]any{"from": "initial.main.summary"}}},
			"closure.main": map[string]any{"c2": "closure", "c3": "main", "outputSchemaRef": ref,
				"structuredGate": gate("closing", "repeat"),
				"transitions":    map[string]any{"closing": map[string]any{"target": nil}}},
		},
		"validators": map[string]any{
			"out-exists": map[string]any{"type": "file", "path": "out.txt", "failurePattern": "file-missing"},
		},
		"completionPatterns": map[string]any{
			"file-missing": map[string]any{"edition": "failed", "adaptation": "file-missing"},
		},
		"validationSteps": map[string]any{
			"closure.main": map[string]any{"c2": "retry", "c3": "main",
				"validationConditions": []any{map[string]any{"validator": "out-exists"}},
				"onFailure":            map[string]any{"action": "retry", "maxAttempts": 2}},
		},
	}
}

func flowAgent() map[string]any {
	a := baseAgent()
	at(a, "runner")["completion"] = map[string]any{"type": "stepFlow"}
	return a
}

type flowCase struct {
	name     string
	mutate   func(r map[string]any)
	code     string
	severity Severity
	pointer  string
}

func flowCases() []flowCase {
	step := func(r map[string]any, keys ...string) map[string]any {
		return at(r, append([]string{"steps"}, keys...)...)
	}
	return []flowCase{
		{"check and gate", func(r map[string]any) {
			step(r, "initial.main")["check"] = map[string]any{"type": "keyword", "keywords": []any{"X"},
				"onPass": map[string]any{"next": "closure.main"}, "onFail": map[string]any{"retry": true}}
		}, "SR-GATE-CHECK", SeverityError, "/steps/initial.main/check"},
		{"gate without schema", func(r map[string]any) { delete(step(r, "initial.main"), "outputSchemaRef") },
			"SR-GATE-SCHEMA", SeverityError, "/steps/initial.main/structuredGate"},
		{"external intent pointer", func(r map[string]any) {
			step(r, "initial.main", "structuredGate")["intentSchemaRef"] = "common.schema.json#/x"
		}, "SR-GATE-FIELD", SeverityError, "/steps/initial.main/structuredGate/intentSchemaRef"},
		{"jump without targetField", func(r map[string]any) {
			step(r, "initial.main", "structuredGate")["allowedIntents"] = []any{"next", "jump"}
		}, "SR-GATE-FIELD", SeverityError, "/steps/initial.main/structuredGate/targetField"},
		{"closing from a work step", func(r map[string]any) {
			step(r, "continuation.main", "structuredGate")["allowedIntents"] = []any{"next", "closing"}
		}, "SR-GATE-INTENT", SeverityError, "/steps/continuation.main/structuredGate/allowedIntents/1"},
		{"closing from a kind-less step", func(r map[string]any) {
			s := step(r, "closure.main")
			s["c2"] = "section"
		}, "SR-GATE-INTENT", SeverityError, "/steps/closure.main/structuredGate/allowedIntents/0"},
		{"escalate from a work step", func(r map[string]any) {
			step(r, "initial.main", "structuredGate")["allowedIntents"] = []any{"next", "escalate"}
		}, "SR-GATE-INTENT", SeverityError, "/steps/initial.main/structuredGate/allowedIntents/1"},
		{"fallbackIntent with failFast", func(r map[string]any) {
			step(r, "initial.main", "structuredGate")["fallbackIntent"] = "next"
		}, "SR-INERT-FIELD", SeverityWarning, "/steps/initial.main/structuredGate/fallbackIntent"},
		{"fallbackIntent not allowed", func(r map[string]any) {
			g := step(r, "initial.main", "structuredGate")
			g["fallbackIntent"], g["failFast"] = "handoff", false
		}, "SR-GATE-INTENT", SeverityError, "/steps/initial.main/structuredGate/fallbackIntent"},
		{"targetMode", func(r map[string]any) { step(r, "initial.main", "structuredGate")["targetMode"] = "dynamic" },
			"SR-INERT-FIELD", SeverityWarning, "/steps/initial.main/structuredGate/targetMode"},
		{"flow step without gate", func(r map[string]any) {
			s := step(r, "continuation.main")
			delete(s, "structuredGate")
			delete(s, "transitions")
			delete(s, "inputs")
		}, "SR-GATE-MISSING", SeverityError, "/steps/continuation.main"},
		{"unknown intent key", func(r map[string]any) {
			step(r, "initial.main", "transitions")["proceed"] = map[string]any{"target": "closure.main"}
		}, "SR-TRANSITION-INTENT", SeverityError, "/steps/initial.main/transitions/proceed"},
		{"transitions without gate", func(r map[string]any) {
			s := step(r, "initial.main")
			delete(s, "structuredGate")
			s["check"] = map[string]any{"type": "keyword", "keywords": []any{"X"},
				"onPass": map[string]any{"next": "continuation.main"}, "onFail": map[string]any{"retry": true}}
		}, "SR-TRANSITION-INTENT", SeverityError, "/steps/initial.main/transitions"},
		{"transition to unknown step", func(r map[string]any) {
			step(r, "continuation.main", "transitions")["handoff"] = map[string]any{"target": "closure.ghost"}
		}, "SR-TRANSITION-TARGET", SeverityError, "/steps/continuation.main/transitions/handoff/target"},
		{"terminal next", func(r map[string]any) {
			step(r, "initial.main", "transitions")["next"] = map[string]any{"target": nil}
		}, "SR-TRANSITION-TERMINAL", SeverityError, "/steps/initial.main/transitions/next/target"},
		{"closing with a target", func(r map[string]any) {
			step(r, "closure.main", "transitions")["closing"] = map[string]any{"target": "initial.main"}
		}, "SR-TRANSITION-TERMINAL", SeverityError, "/steps/closure.main/transitions/closing/target"},
		{"handoff without transition", func(r map[string]any) {
			delete(step(r, "continuation.main", "transitions"), "handoff")
		}, "SR-TRANSITION-MISSING", SeverityError, "/steps/continuation.main/structuredGate/allowedIntents/2"},
		{"condition on no handoff value", func(r map[string]any) {
			step(r, "continuation.main", "transitions")["handoff"] = map[string]any{"condition": "verdict",
				"targets": map[string]any{"default": "closure.main"}}
		}, "SR-TRANSITION-CONDITION", SeverityError, "/steps/continuation.main/transitions/handoff/condition"},
		{"transition never taken", func(r map[string]any) {
			step(r, "initial.main", "transitions")["handoff"] = map[string]any{"target": "closure.main"}
		}, "SR-INERT-FIELD", SeverityWarning, "/steps/initial.main/transitions/handoff"},
		{"input from nothing", func(r map[string]any) {
			step(r, "continuation.main", "inputs")["plan"] = map[string]any{"from": "summary"}
		}, "SR-INPUT-FROM", SeverityError, "/steps/continuation.main/inputs/plan/from"},
		{"input without from or default", func(r map[string]any) {
			step(r, "continuation.main", "inputs")["plan"] = map[string]any{"required": false}
		}, "SR-INPUT-FROM", SeverityError, "/steps/continuation.main/inputs/plan"},
		{"input from unknown step", func(r map[string]any) {
			step(r, "continuation.main", "inputs")["plan"] = map[string]any{"from": "initial.ghost.summary"}
		}, "SR-INPUT-FROM", SeverityError, "/steps/continuation.main/inputs/plan/from"},
		{"validation step for no step", func(r map[string]any) {
			at(r, "validationSteps")["closure.polling"] = at(r, "validationSteps", "closure.main")
		}, "SR-VALIDATION-STEP", SeverityWarning, "/validationSteps/closure.polling"},
		{"validation step on a work step", func(r map[string]any) {
			at(r, "validationSteps")["continuation.main"] = at(r, "validationSteps", "closure.main")
		}, "SR-VALIDATION-STEP", SeverityWarning, "/validationSteps/continuation.main"},
		{"validation step and completionConditions", func(r map[string]any) {
			step(r, "closure.main")["completionConditions"] = []any{map[string]any{"validator": "out-exists"}}
		}, "SR-VALIDATION-DUPLICATE", SeverityError, "/validationSteps/closure.main"},
		{"validation condition unknown", func(r map[string]any) {
			at(r, "validationSteps", "closure.main")["validationConditions"] = []any{map[string]any{"validator": "ghost"}}
		}, "SR-CONDITION-VALIDATOR", SeverityError, "/validationSteps/closure.main/validationConditions/0/validator"},
		{"validation outputSchemaRef", func(r map[string]any) {
			at(r, "validationSteps", "closure.main")["outputSchemaRef"] = map[string]any{"file": "review.schema.json", "schema": "review"}
		}, "SR-INERT-FIELD", SeverityWarning, "/validationSteps/closure.main/outputSchemaRef"},
		{"unknown stepKind", func(r map[string]any) { step(r, "initial.main")["stepKind"] = "planning" },
			"SR-SCHEMA-ENUM", SeverityError, "/steps/initial.main/stepKind"},
		{"unknown intent", func(r map[string]any) {
			step(r, "initial.main", "structuredGate")["allowedIntents"] = []any{"next", "proceed"}
		}, "SR-SCHEMA-ENUM", SeverityError, "/steps/initial.main/structuredGate/allowedIntents/1"},
	}
}

func flowFiles() map[string]string {
	return map[string]string{
		"prompts/steps/continuation/main/f_default.md": "Go on.",
		"prompts/steps/closure/main/f_default.md":      "Close.",
	}
}

// The flow fixture is valid, and each mutation is reported with its code,
// severity and pointer.
func TestFlowValidation(t *testing.T) {
	dir := writeAgent(t, flowAgent(), flowRegistry(), flowFiles())
	if res := Check(dir, testOpts); len(res.Problems()) != 0 {
		t.Fatalf("the flow fixture is not clean:\n%s", dump(res))
	}
	for _, tc := range flowCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := flowRegistry()
			tc.mutate(r)
			dir := writeAgent(t, flowAgent(), r, flowFiles())
			res := Check(dir, testOpts)
			var found bool
			for _, p := range res.Problems() {
				if p.Code == tc.code && p.Pointer == tc.pointer {
					found = true
					if p.Severity != tc.severity || p.File != DefaultRegistryFile || p.Hint == "" || p.Line == 0 {
						t.Errorf("got %s", p)
					}
				}
			}
			if !found {
				t.Fatalf("no %s at %s:\n%s", tc.code, tc.pointer, dump(res))
			}
			if tc.severity == SeverityWarning && !res.Valid() {
				t.Errorf("a warning alone made the config invalid:\n%s", dump(res))
			}
		})
	}
}

// A terminal transition survives a load and a marshal.
func TestIntentTransitionNull(t *testing.T) {
	var tr map[string]IntentTransition
	if err := json.Unmarshal([]byte(`{"closing":{"target":null},"next":{"target":"b"},"handoff":{}}`), &tr); err != nil {
		t.Fatal(err)
	}
	if !tr["closing"].Terminal || tr["next"].Terminal || tr["handoff"].Terminal || *tr["next"].Target != "b" {
		t.Fatalf("%+v", tr)
	}
	b, _ := json.Marshal(tr["closing"])
	if string(b) != `{"target":null}` {
		t.Fatalf("marshal: %s", b)
	}
}

// Kinds come from stepKind, else from c2.
func TestStepKind(t *testing.T) {
	for _, tc := range []struct {
		st   Step
		want string
	}{
		{Step{C2: "initial"}, KindWork}, {Step{C2: "continuation"}, KindWork},
		{Step{C2: "verification"}, KindVerification}, {Step{C2: "closure"}, KindClosure},
		{Step{C2: "section"}, ""}, {Step{C2: "initial", StepKind: KindClosure}, KindClosure},
	} {
		if got := tc.st.Kind(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.st, got, tc.want)
		}
	}
}
