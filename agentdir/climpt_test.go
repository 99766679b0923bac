package agentdir

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// climptAgent is a valid agent.json in climpt's spelling: runner.flow,
// runner.verdict (verdict), a camelCase parameter.
func climptAgent(verdict map[string]any) map[string]any {
	return map[string]any{
		"version":     "1.0.0",
		"name":        "demo",
		"description": "climpt-format test agent",
		"parameters": map[string]any{
			"issue":      map[string]any{"type": "number", "description": "issue", "required": true, "cli": "--issue"},
			"topic":      map[string]any{"type": "string", "description": "topic", "default": "boats", "cli": "--topic"},
			"iterateMax": map[string]any{"type": "number", "description": "cap", "default": 5},
		},
		"runner": map[string]any{
			"flow": map[string]any{
				"systemPromptPath": "prompts/system.md",
				"prompts":          map[string]any{"registry": "steps_registry.json"},
			},
			"verdict":    verdict,
			"boundaries": map[string]any{"allowedTools": []any{"Read"}, "permissionMode": "plan"},
		},
	}
}

// climptRegistry is a valid steps_registry.json in climpt's spelling: the
// entry of every verdict type is initial.main.
func climptRegistry() map[string]any {
	mapping := map[string]any{}
	for vt := range VerdictTypes() {
		mapping[vt] = "initial.main"
	}
	return map[string]any{
		"agentId": "demo", "version": "1.0.0", "c1": "steps",
		"pathTemplate":             StandardPathTemplate,
		"pathTemplateNoAdaptation": StandardPathTemplateNoAdaptation,
		"entryStepMapping":         mapping,
		"steps": map[string]any{
			"initial.main": map[string]any{
				"stepId": "initial.main", "name": "main", "type": "prompt", "c2": "initial", "c3": "main",
				"uvVariables": []any{"topic"}, "usesStdin": false,
			},
		},
	}
}

func opts(kv ...string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = json.RawMessage(kv[i+1])
	}
	return out
}

// TestClimptVerdictTypes: every climpt verdict type (and its defaults)
// becomes the runner.completion it means; maxIterations of the types that
// do not count iterations becomes the iteration budget.
func TestClimptVerdictTypes(t *testing.T) {
	cases := []struct {
		name    string
		verdict string
		want    Completion
		budget  int
	}{
		{"count:iteration", `{"type": "count:iteration", "config": {"maxIterations": 3}}`, Completion{Type: "iterationBudget", MaxIterations: 3}, 0},
		{"count:iteration default", `{"type": "count:iteration"}`, Completion{Type: "iterationBudget", MaxIterations: DefaultVerdictMaxIterations}, 0},
		{"count:check", `{"type": "count:check", "config": {"maxChecks": 4}}`, Completion{Type: "iterationBudget", MaxIterations: 4}, 0},
		{"count:check default", `{"type": "count:check", "config": {}}`, Completion{Type: "iterationBudget", MaxIterations: DefaultVerdictMaxChecks}, 0},
		{"detect:keyword", `{"type": "detect:keyword", "config": {"verdictKeyword": "FIN", "maxIterations": 7}}`, Completion{Type: "keyword", Keyword: "FIN"}, 7},
		{"detect:keyword default", `{"type": "detect:keyword"}`, Completion{Type: "keyword", Keyword: DefaultVerdictKeyword}, 0},
		{"detect:structured names", `{"type": "detect:structured", "config": {"signalType": "sig", "requiredFields": ["summary"]}}`,
			Completion{Type: "signal", Options: opts("signalType", `"sig"`, "requiredFields", `["summary"]`)}, 0},
		{"detect:structured values", `{"type": "detect:structured", "config": {"signalType": "sig", "requiredFields": { "result" :  "complete" }}}`,
			Completion{Type: "signal", Options: opts("signalType", `"sig"`, "requiredFields", `{"result": "complete"}`)}, 0},
		{"detect:graph", `{"type": "detect:graph", "config": {"maxIterations": 12, "entryStep": "initial.main"}}`, Completion{Type: "stepFlow"}, 12},
		{"poll:state", `{"type": "poll:state", "config": {"maxIterations": 9}}`,
			Completion{Type: "externalState", Options: opts("resource", `"issue"`, "number", `"${issue}"`)}, 9},
		{"poll:state issueClose", `{"type": "poll:state", "config": {"type": "issueClose", "issueParam": "issue", "targetState": "open", "resourceType": "github-issue"}}`,
			Completion{Type: "externalState", Options: opts("resource", `"issue"`, "number", `"${issue}"`, "state", `"OPEN"`)}, 0},
		{"meta:composite and", `{"type": "meta:composite", "config": {"operator": "and", "conditions": [
			{"type": "count:iteration", "config": {"maxIterations": 2}}, {"type": "detect:keyword", "config": {"verdictKeyword": "K"}}]}}`,
			Completion{Type: "composite", Mode: "all", Conditions: []Completion{{Type: "iterationBudget", MaxIterations: 2}, {Type: "keyword", Keyword: "K"}}}, 0},
		{"meta:composite or", `{"type": "meta:composite", "config": {"operator": "or", "conditions": [{"type": "detect:keyword", "config": {}}]}}`,
			Completion{Type: "composite", Mode: "any", Conditions: []Completion{{Type: "keyword", Keyword: DefaultVerdictKeyword}}}, 0},
		{"meta:composite first", `{"type": "meta:composite", "config": {"operator": "first", "conditions": [{"type": "count:check", "config": {"maxChecks": 2}}]}}`,
			Completion{Type: "composite", Mode: "any", Conditions: []Completion{{Type: "iterationBudget", MaxIterations: 2}}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var verdict map[string]any
			if err := json.Unmarshal([]byte(tc.verdict), &verdict); err != nil {
				t.Fatal(err)
			}
			dir := writeAgent(t, climptAgent(verdict), climptRegistry(), nil)
			a, err := LoadAndValidate(dir, testOpts)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range a.Warnings() {
				t.Errorf("warning: %s", w)
			}
			r := a.Definition().Runner
			if !equalCompletion(t, r.Completion, tc.want) {
				t.Errorf("completion %s, want %s", show(r.Completion), show(tc.want))
			}
			if r.Budgets.MaxIterations != tc.budget {
				t.Errorf("budget %d, want %d", r.Budgets.MaxIterations, tc.budget)
			}
			reg := a.Registry()
			if reg.EntryStep != "initial.main" || reg.Steps["initial.main"].Type != DefaultStepType {
				t.Errorf("entry %q, step type %q", reg.EntryStep, reg.Steps["initial.main"].Type)
			}
			// The mapping is idempotent: the validated copy validates again
			// (both spellings now set, agreeing) to the same completion.
			again, err := NewAgent(dir, a.Definition(), a.Registry(), testOpts)
			if err != nil {
				t.Fatalf("re-validating the copy: %v", err)
			}
			if !equalCompletion(t, again.Definition().Runner.Completion, tc.want) {
				t.Errorf("copy: completion %s", show(again.Definition().Runner.Completion))
			}
		})
	}
}

func show(c Completion) string { b, _ := json.Marshal(c); return string(b) }

// equalCompletion compares completions, options by JSON value.
func equalCompletion(t *testing.T, a, b Completion) bool {
	t.Helper()
	norm := func(c Completion) any {
		raw, _ := json.Marshal(c)
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// TestClimptSpellings: each climpt spelling fills the field it means, and
// a problem in a value written in climpt's spelling points at that
// spelling, with its line.
func TestClimptSpellings(t *testing.T) {
	countIter := map[string]any{"type": "count:iteration", "config": map[string]any{"maxIterations": 2}}
	t.Run("flow", func(t *testing.T) {
		a := climptAgent(countIter)
		flow := at(a, "runner", "flow")
		flow["defaultModel"] = "haiku"
		flow["schemas"] = map[string]any{"base": "contracts"}
		flow["prompts"] = map[string]any{"registry": "reg/steps.json", "fallbackDir": "shared"}
		r := climptRegistry()
		at(r, "steps", "initial.main")["outputSchemaRef"] = map[string]any{"file": "main.schema.json", "schema": "main"}
		at(r, "steps", "initial.main")["model"] = "opus"
		dir := writeAgent(t, a, nil, map[string]string{
			"reg/steps.json":             mustJSON(t, r),
			"contracts/main.schema.json": `{"main": {"type": "object"}}`,
			"shared/f_default.md":        "shared",
		})
		ag, err := LoadAndValidate(dir, testOpts)
		if err != nil {
			t.Fatal(err)
		}
		run := ag.Definition().Runner
		if run.SystemPromptPath != "prompts/system.md" || run.Prompts.Registry != "reg/steps.json" || run.Prompts.FallbackDir != "shared" ||
			run.SchemasDir != "contracts" || run.Model != "claude-code:haiku" {
			t.Fatalf("runner %+v", run)
		}
		if m := ag.Registry().Steps["initial.main"].Model; m != "claude-code:opus" {
			t.Errorf("step model %q", m)
		}
	})
	problem := func(t *testing.T, a, r map[string]any, extra map[string]string, code, ptr string) Problem {
		t.Helper()
		res := Check(writeAgent(t, a, r, extra), testOpts)
		p := findProblem(t, res, code)
		if p.Pointer != ptr || p.Line == 0 {
			t.Fatalf("got %s, want pointer %s with a line\n%s", p, ptr, dump(res))
		}
		return p
	}
	t.Run("system prompt missing", func(t *testing.T) {
		a := climptAgent(countIter)
		at(a, "runner", "flow")["systemPromptPath"] = "prompts/nope.md"
		problem(t, a, climptRegistry(), nil, "AC-SYSTEM-PROMPT-MISSING", "/runner/flow/systemPromptPath")
	})
	t.Run("fallbackDir missing", func(t *testing.T) {
		a := climptAgent(countIter)
		at(a, "runner", "flow", "prompts")["fallbackDir"] = "nope"
		problem(t, a, climptRegistry(), nil, "AC-PROMPTS-DIR-MISSING", "/runner/flow/prompts/fallbackDir")
	})
	t.Run("schema folder", func(t *testing.T) {
		a := climptAgent(countIter)
		at(a, "runner", "flow")["schemas"] = map[string]any{"base": "contracts"}
		r := climptRegistry()
		at(r, "steps", "initial.main")["outputSchemaRef"] = map[string]any{"file": "main.schema.json", "schema": "main"}
		p := problem(t, a, r, map[string]string{"schemas/main.schema.json": `{}`}, "SR-SCHEMA-FILE", "/steps/initial.main/outputSchemaRef/file")
		if !strings.Contains(p.Message, "contracts/main.schema.json") {
			t.Errorf("%s", p)
		}
	})
	t.Run("nested meta", func(t *testing.T) {
		a := climptAgent(map[string]any{"type": "meta:composite", "config": map[string]any{"operator": "and", "conditions": []any{
			map[string]any{"type": "meta:composite", "config": map[string]any{}}}}})
		problem(t, a, climptRegistry(), nil, "AC-VERDICT-UNSUPPORTED", "/runner/verdict/config/conditions/0/type")
	})
	t.Run("poll:state resource", func(t *testing.T) {
		a := climptAgent(map[string]any{"type": "poll:state", "config": map[string]any{"resourceType": "github-project"}})
		problem(t, a, climptRegistry(), nil, "AC-VERDICT-UNSUPPORTED", "/runner/verdict/config/resourceType")
	})
	t.Run("graph registry", func(t *testing.T) {
		a := climptAgent(map[string]any{"type": "detect:graph", "config": map[string]any{"registryPath": "other.json"}})
		problem(t, a, climptRegistry(), nil, "AC-VERDICT-FIELD", "/runner/verdict/config/registryPath")
	})
	t.Run("count beyond the hard limit", func(t *testing.T) {
		a := climptAgent(map[string]any{"type": "count:iteration", "config": map[string]any{"maxIterations": 500}})
		problem(t, a, climptRegistry(), nil, "AC-BUDGET-HARD-LIMIT", "/runner/verdict/config/maxIterations")
	})
	t.Run("verdict field of another type", func(t *testing.T) {
		a := climptAgent(map[string]any{"type": "count:iteration", "config": map[string]any{"maxIterations": 2, "verdictKeyword": "X"}})
		problem(t, a, climptRegistry(), nil, "AC-CLIMPT-INERT", "/runner/verdict/config/verdictKeyword")
	})
	t.Run("verdict maxIterations and budgets differ", func(t *testing.T) {
		a := climptAgent(map[string]any{"type": "detect:keyword", "config": map[string]any{"verdictKeyword": "K", "maxIterations": 20}})
		at(a, "runner")["budgets"] = map[string]any{"maxIterations": 6}
		problem(t, a, climptRegistry(), nil, "AC-SPELLING-CONFLICT", "/runner/verdict/config/maxIterations")
	})
	t.Run("composite condition maxIterations", func(t *testing.T) {
		a := climptAgent(map[string]any{"type": "meta:composite", "config": map[string]any{"operator": "or", "conditions": []any{
			map[string]any{"type": "detect:keyword", "config": map[string]any{"verdictKeyword": "K", "maxIterations": 3}},
			map[string]any{"type": "count:iteration", "config": map[string]any{"maxIterations": 4}}}}})
		problem(t, a, climptRegistry(), nil, "AC-CLIMPT-INERT", "/runner/verdict/config/conditions/0/config/maxIterations")
	})
	t.Run("both completion spellings", func(t *testing.T) {
		a := climptAgent(countIter)
		at(a, "runner")["completion"] = map[string]any{"type": "keyword", "keyword": "DONE"}
		problem(t, a, climptRegistry(), nil, "AC-SPELLING-CONFLICT", "/runner/verdict")
	})
	t.Run("failure patterns", func(t *testing.T) {
		r := climptRegistry()
		r["failurePatterns"] = map[string]any{
			"dirty":  map[string]any{"edition": "failed", "adaptation": "dirty"},
			"unused": map[string]any{"edition": "failed"},
		}
		r["validators"] = map[string]any{"clean": map[string]any{"type": "command", "command": "git status --porcelain", "successWhen": "empty", "failurePattern": "dirty"}}
		// That a validator's failurePattern finds them is the validator
		// builder's rule: agent.TestClimptFailurePatternsAreFound.
		res := Check(writeAgent(t, climptAgent(countIter), r, nil), testOpts)
		p := findProblem(t, res, "SR-PATTERN-UNUSED")
		if p.Pointer != "/failurePatterns/unused" || p.Line == 0 {
			t.Errorf("%s", p)
		}
	})
	t.Run("entry by verdict type", func(t *testing.T) {
		r := climptRegistry()
		steps := at(r, "steps")
		steps["initial.poll"] = map[string]any{"c2": "initial", "c3": "main"}
		r["entryStepMapping"] = map[string]any{"poll:state": "initial.poll", "count:iteration": "initial.main"}
		ag, err := LoadAndValidate(writeAgent(t, climptAgent(map[string]any{"type": "poll:state"}), r, nil), testOpts)
		if err != nil {
			t.Fatal(err)
		}
		if e := ag.Registry().EntryStep; e != "initial.poll" {
			t.Errorf("entry %q, want initial.poll", e)
		}
		// A mapping to a missing step is the builder's SR-ENTRY-STEP (agent
		// TestBuilderRulesAreReportedByValidate).
		at(r, "entryStepMapping")["poll:state"] = "initial.gone"
		p := problem(t, climptAgent(map[string]any{"type": "poll:state"}), r, nil, "SR-ENTRY-STEP", "/entryStepMapping/poll:state")
		if !strings.Contains(p.Message, "entryStepMapping") || strings.Contains(p.Hint, "set entryStep") {
			t.Errorf("the problem names entryStep, not the mapping that chose the entry: %s", p)
		}
		delete(at(r, "entryStepMapping"), "poll:state")
		problem(t, climptAgent(map[string]any{"type": "poll:state"}), r, nil, "SR-ENTRY-STEP", "/entryStepMapping")
	})
	t.Run("camelCase parameter flag", func(t *testing.T) {
		ag, err := LoadAndValidate(writeAgent(t, climptAgent(countIter), climptRegistry(), nil), testOpts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ag.Params() {
			if p.Name == "iterateMax" && p.Flag != "--iterate-max" {
				t.Errorf("flag %s", p.Flag)
			}
		}
		vars, err := ag.ResolveParams(map[string]string{"issue": "3", "iterateMax": "9"})
		if err != nil || vars["iterateMax"] != "9" {
			t.Errorf("%v %v", vars, err)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUnreachableStepErrorsAreWarnings: a problem in a step no entry
// reaches is a warning saying so; the same problem on the entry's path is
// an error. Reachability follows climpt's transitions.
func TestUnreachableStepErrorsAreWarnings(t *testing.T) {
	r := climptRegistry()
	steps := at(r, "steps")
	at(steps, "initial.main")["transitions"] = map[string]any{
		"next":    map[string]any{"target": "continuation.main"},
		"handoff": map[string]any{"condition": "kind", "targets": map[string]any{"a": "closure.main", "default": "closure.main"}},
	}
	steps["continuation.main"] = map[string]any{"c2": "continuation", "c3": "main", "uvVariables": []any{"ghost"}}
	steps["closure.main"] = map[string]any{"c2": "closure", "c3": "main"}
	steps["dead.main"] = map[string]any{"c2": "dead", "c3": "main", "uvVariables": []any{"phantom"}}
	steps["initial.other"] = map[string]any{"c2": "initial", "c3": "other", "uvVariables": []any{"spectre"}}
	at(r, "entryStepMapping")["poll:state"] = "initial.other"
	res := Check(writeAgent(t, climptAgent(map[string]any{"type": "count:iteration"}), r, nil), testOpts)
	other := findProblem(t, res, "PA-UV-UNSUPPLIED")
	for _, p := range res.Problems() {
		if p.Code == "PA-UV-UNSUPPLIED" && strings.Contains(p.Pointer, "initial.other") {
			other = p
		}
	}
	if other.Severity != SeverityWarning || !strings.Contains(other.Message, `step "initial.other" is reached only from the entry of verdict type poll:state`) {
		t.Fatalf("other verdict type's entry: %s\n%s", other, dump(res))
	}
	var live, dead *Problem
	for _, p := range res.Problems() {
		if p.Code == "PA-UV-UNSUPPLIED" {
			switch {
			case strings.Contains(p.Pointer, "continuation.main"):
				live = &p
			case strings.Contains(p.Pointer, "dead.main"):
				dead = &p
			}
		}
	}
	if live == nil || live.Severity != SeverityError {
		t.Fatalf("reachable step: %v\n%s", live, dump(res))
	}
	if dead == nil || dead.Severity != SeverityWarning || !strings.Contains(dead.Message, `step "dead.main" cannot be reached from the entry step "initial.main"`) {
		t.Fatalf("dead step: %v\n%s", dead, dump(res))
	}
}

// TestReachableFollowsClimptRoutes: transitions' target, targets and
// fallback, a gate allowing jump (every step), and initial.X →
// continuation.X when there is no next transition.
func TestReachableFollowsClimptRoutes(t *testing.T) {
	reg := `{"entryStep": "initial.a", "steps": {
	  "initial.a": {"c2": "initial", "c3": "a", "structuredGate": {"allowedIntents": ["next", "repeat"]}, "transitions": {"repeat": {"target": "initial.a"}}},
	  "continuation.a": {"c2": "continuation", "c3": "a", "structuredGate": {"allowedIntents": ["next", "handoff"]}, "transitions": {
	    "next": {"target": "b", "fallback": "c"}, "handoff": {"condition": "k", "targets": {"x": "d"}}}},
	  "b": {"c2": "b", "c3": "b"}, "c": {"c2": "c", "c3": "c"},
	  "d": {"c2": "d", "c3": "d", "structuredGate": {"allowedIntents": ["next", "jump"]}},
	  "e": {"c2": "e", "c3": "e"},
	  "initial.f": {"c2": "initial", "c3": "f", "structuredGate": {"allowedIntents": ["next"]}, "transitions": {"next": {"target": "b"}}},
	  "continuation.f": {"c2": "continuation", "c3": "f"}
	}}`
	var r Registry
	if err := json.Unmarshal([]byte(reg), &r); err != nil {
		t.Fatal(err)
	}
	r.src = newSource(DefaultRegistryFile, []byte(reg))
	got := Reachable(&r)
	for _, id := range []string{"initial.a", "continuation.a", "b", "c", "d", "e", "initial.f", "continuation.f"} {
		if !got[id] {
			t.Errorf("%s not reachable: %v", id, got)
		}
	}
	// Without the jump, e and initial.f are dead; continuation.f stays dead
	// behind initial.f's next transition, and c behind a transition's
	// fallback, which routes nowhere.
	reg2 := strings.Replace(reg, `"next", "jump"`, `"next"`, 1)
	r.src = newSource(DefaultRegistryFile, []byte(reg2))
	if err := json.Unmarshal([]byte(reg2), &r); err != nil {
		t.Fatal(err)
	}
	got = Reachable(&r)
	for _, id := range []string{"c", "e", "initial.f", "continuation.f"} {
		if got[id] {
			t.Errorf("%s reachable: %v", id, got)
		}
	}
}
