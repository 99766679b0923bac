package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/verdict"
)

// The fixtures below are written in climpt's registry format (stepKind,
// structuredGate, transitions, inputs, validationSteps) and modelled on
// the step graphs of climpt's iterator, reviewer and facilitator agents.

// stepSchema is a named output schema whose intent enum is intents; extra
// are further properties (name → schema).
func stepSchema(intents []string, extra map[string]any) map[string]any {
	props := map[string]any{
		"stepId":  map[string]any{"type": "string"},
		"status":  map[string]any{"type": "string"},
		"summary": map[string]any{"type": "string"},
		"next_action": map[string]any{"type": "object", "required": []any{"action"}, "properties": map[string]any{
			"action": map[string]any{"type": "string", "enum": intents},
			"reason": map[string]any{"type": "string"},
			"details": map[string]any{"type": "object", "properties": map[string]any{
				"target": map[string]any{"type": "string"}}},
		}},
	}
	for k, v := range extra {
		props[k] = v
	}
	return map[string]any{"type": "object", "required": []any{"next_action"}, "properties": props}
}

// flowStepDef is one routed step of a fixture registry.
func flowStepDef(id, kind, file string, intents []string, transitions map[string]any, more map[string]any) map[string]any {
	parts := strings.SplitN(id, ".", 2)
	s := map[string]any{"stepId": id, "name": id, "c2": parts[0], "c3": strings.ReplaceAll(parts[1], ".", "-"),
		"outputSchemaRef": map[string]any{"file": file, "schema": id},
		"structuredGate": map[string]any{"allowedIntents": intents, "intentField": "next_action.action",
			"intentSchemaRef": "#/properties/next_action/properties/action"},
		"transitions": transitions}
	if kind != "" {
		s["stepKind"] = kind
	}
	for k, v := range more {
		if k == "gate" {
			for gk, gv := range v.(map[string]any) {
				s["structuredGate"].(map[string]any)[gk] = gv
			}
			continue
		}
		s[k] = v
	}
	return s
}

func to(target any) map[string]any { return map[string]any{"target": target} }

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// transitionsOf returns the run's committed step transitions as
// "from>to:kind".
func transitionsOf(t *testing.T, res *event.RunResult) []string {
	t.Helper()
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, ev := range events {
		if ev.Type == journal.StepTransition {
			var mv event.StepMove
			if err := json.Unmarshal(ev.Data, &mv); err != nil {
				t.Fatal(err)
			}
			path = append(path, mv.From+">"+mv.To+":"+mv.Kind)
		}
	}
	return path
}

// iteratorAgent is an iterator-like agent: initial.polling →
// continuation.polling (loops on next) → handoff → closure.polling, whose
// closing is verified by a validation step (git-clean, then a
// type-check-like command) with retry prompts under retry/issue.
func iteratorAgent(t *testing.T, completionJSON, script string) string {
	t.Helper()
	intents := func(xs ...string) []string { return xs }
	schemas := map[string]any{
		"initial.polling": stepSchema(intents("next", "repeat"), map[string]any{
			"analysis": map[string]any{"type": "object", "properties": map[string]any{"understanding": map[string]any{"type": "string"}}},
			"issue":    map[string]any{"type": "integer"}}),
		"continuation.polling": stepSchema(intents("next", "repeat", "handoff"), map[string]any{
			"progress": map[string]any{"type": "string"}}),
		"closure.polling": stepSchema(intents("closing", "repeat"), map[string]any{
			"verdict": map[string]any{"type": "string"}}),
	}
	reg := map[string]any{
		"agentId": "iter", "version": "1.0.0", "c1": "steps", "entryStep": "initial.polling",
		"steps": map[string]any{
			"initial.polling": flowStepDef("initial.polling", "work", "polling.schema.json", intents("next", "repeat"),
				map[string]any{"next": to("continuation.polling"), "repeat": to("initial.polling")},
				map[string]any{"uvVariables": []any{"issue"},
					"gate": map[string]any{"handoffFields": []any{"analysis.understanding", "issue"}}}),
			"continuation.polling": flowStepDef("continuation.polling", "work", "polling.schema.json", intents("next", "repeat", "handoff"),
				map[string]any{"next": to("continuation.polling"), "repeat": to("continuation.polling"), "handoff": to("closure.polling")},
				map[string]any{"uvVariables": []any{"issue", "initial_polling_understanding"},
					"inputs": map[string]any{"understanding": map[string]any{"from": "initial.polling.understanding"}},
					"gate":   map[string]any{"handoffFields": []any{"progress"}}}),
			"closure.polling": flowStepDef("closure.polling", "closure", "polling.schema.json", intents("closing", "repeat"),
				map[string]any{"closing": to(nil), "repeat": to("closure.polling")}, map[string]any{"uvVariables": []any{"issue"}}),
		},
		"completionPatterns": map[string]any{
			"git-dirty":  map[string]any{"edition": "failed", "adaptation": "git-dirty", "params": []any{"changedFiles", "untrackedFiles"}},
			"type-error": map[string]any{"edition": "failed", "adaptation": "type-error", "params": []any{"typeErrors", "errorOutput"}},
		},
		"validators": map[string]any{
			"git-clean": map[string]any{"type": "command", "command": "git status --porcelain", "successWhen": "empty",
				"failurePattern": "git-dirty",
				"extractParams":  map[string]any{"changedFiles": "parseChangedFiles", "untrackedFiles": "parseUntrackedFiles"}},
			"type-check": map[string]any{"type": "command", "successWhen": "exitCode:0", "failurePattern": "type-error",
				"command":       `if grep -q BROKEN app.ts; then echo "app.ts:3:7: Type 'string' is not assignable to type 'number'."; exit 1; fi`,
				"extractParams": map[string]any{"typeErrors": "parseTypeErrors", "errorOutput": "stdout"}},
		},
		"validationSteps": map[string]any{
			"closure.polling": map[string]any{"stepId": "closure.polling", "name": "External state validation", "c2": "retry", "c3": "issue",
				"validationConditions": []any{map[string]any{"validator": "git-clean"}, map[string]any{"validator": "type-check"}},
				"onFailure":            map[string]any{"action": "retry", "maxAttempts": 3}},
		},
	}
	return writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "iter", "description": "iterator-like",
  "parameters": {"issue": {"type": "number", "required": true, "description": "issue number"}},
  "runner": {"model": "script:script.yaml", "completion": ` + completionJSON + `,
    "boundaries": {"allowedTools": ["Read", "Write", "Bash"], "permissionMode": "acceptEdits"},
    "budgets": {"maxIterations": 12}}}`,
		"steps_registry.json":                              mustJSON(reg),
		"schemas/polling.schema.json":                      mustJSON(schemas),
		"prompts/steps/initial/polling/f_default.md":       "Iteration {uv-iteration}: read issue #{uv-issue} and say what it asks.",
		"prompts/steps/continuation/polling/f_default.md":  "Continue issue #{uv-issue}. You understood: {uv-initial_polling_understanding}.",
		"prompts/steps/closure/polling/f_default.md":       "Close issue #{uv-issue}: check your work, then answer closing.",
		"prompts/steps/retry/issue/f_failed_git-dirty.md":  "## Uncommitted changes\n\n{{#each untrackedFiles}}- untracked: {{this}}\n{{/each}}{{#each changedFiles}}- changed: {{this}}\n{{/each}}Commit them, then answer closing again.\n",
		"prompts/steps/retry/issue/f_failed_type-error.md": "## Type errors\n\n{{#each typeErrors}}- {{this.file}}:{{this.line}}:{{this.column}} {{this.message}}\n{{/each}}Fix them, commit, then answer closing again.\n",
		"script.yaml": script,
	})
}

const iteratorScript = `turns:
  - expect: {prompt_contains: ["Iteration 1: read issue #7"]}
    structured: {stepId: initial.polling, status: in_progress, analysis: {understanding: "add a greeting to app.ts"}, issue: 7,
      next_action: {action: next, reason: "understood"}}
  - expect: {prompt_contains: ["You understood: add a greeting to app.ts."]}
    tool_calls:
      - name: Write
        input: {file_path: app.ts, content: "let greeting: number;\n// BROKEN\ngreeting = 'hello';\n"}
  - structured: {stepId: continuation.polling, status: in_progress, progress: "wrote app.ts", next_action: {action: next}}
  - expect: {prompt_contains: ["Continue issue #7"]}
    structured: {stepId: continuation.polling, status: completed, progress: "done", next_action: {action: handoff, reason: "ready to close"}}
  - expect: {prompt_contains: ["Close issue #7"]}
    structured: {stepId: closure.polling, next_action: {action: closing}, verdict: "done"}
  - expect: {prompt_contains: ["## Uncommitted changes", "- untracked: app.ts", "Commit them"]}
    tool_calls:
      - name: Bash
        input: {command: "git add -A && git -c user.name=t -c user.email=t@example.invalid commit -qm work"}
  - structured: {stepId: closure.polling, next_action: {action: closing}, verdict: "done"}
  - expect: {prompt_contains: ["## Type errors", "- app.ts:3:7 Type 'string' is not assignable to type 'number'."]}
    tool_calls:
      - name: Write
        input: {file_path: app.ts, content: "let greeting: string;\ngreeting = 'hello';\n"}
      - name: Bash
        input: {command: "git -c user.name=t -c user.email=t@example.invalid commit -qam fix"}
  - structured: {stepId: closure.polling, next_action: {action: closing}, verdict: "done"}
`

// TestClimptIteratorFlow runs the iterator-like agent along its designed
// path: the work steps route by intent, the handoff value reaches the next
// step's prompt, a work step's status "completed" does not end the run,
// and the closure step's closing completes it only once its validation
// conditions hold — each failure sending its retry prompt from
// retry/issue.
func TestClimptIteratorFlow(t *testing.T) {
	needTools(t, "git", "grep")
	// A structured completion handler would take the work step's status
	// "completed" as a declaration; in a routed flow it must not count.
	dir := iteratorAgent(t, `{"type": "structured"}`, iteratorScript)
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: gitFixture(t, map[string]string{"README.md": "demo\n"}),
		Params: map[string]string{"issue": "7"}})
	path := transitionsOf(t, res)
	if !res.Success || res.Iterations != 6 || res.StepID != "closure.polling" || res.Verdict != "done" {
		t.Fatalf("%+v %+v\ntransitions %v", res, res.Error, path)
	}
	want := "initial.polling>continuation.polling:next continuation.polling>continuation.polling:next " +
		"continuation.polling>closure.polling:handoff closure.polling>closure.polling:closing"
	if got := strings.Join(path, " "); got != want {
		t.Fatalf("transitions\n got %s\nwant %s", got, want)
	}
	patterns, texts := retryPatterns(t, res)
	if !slices.Equal(patterns, []string{"git-dirty", "type-error"}) || !strings.Contains(texts[0], "untracked: app.ts") {
		t.Fatalf("retry prompts %v %q", patterns, texts)
	}
	// The completion check names the closing and what verified it.
	events, _ := journal.ReadFile(res.Journal)
	var last event.CheckEvent
	for _, ev := range events {
		if ev.Type == journal.CompletionCheck {
			last = event.CheckEvent{}
			_ = json.Unmarshal(ev.Data, &last)
		}
	}
	if !last.Complete || last.ClosureVerdict != "done" || !slices.Equal(last.Verified, []string{"git-clean", "type-check"}) ||
		!strings.Contains(last.Reason, "closure step closure.polling emitted closing") {
		t.Fatalf("last completion.check %+v", last)
	}
}

// With an iteration budget as runner.completion, reaching it before the
// closure step closes stops the run without completion (the budget is a
// cap, not a completion).
func TestClimptBudgetBeforeClosing(t *testing.T) {
	script := `turns:
  - structured: {analysis: {understanding: "x"}, issue: 7, next_action: {action: next}}
  - structured: {progress: "p", next_action: {action: next}}
`
	res := runToEnd(t, load(t, iteratorAgent(t, `{"type": "iterationBudget", "maxIterations": 2}`, script)),
		BuildOptions{WorkDir: t.TempDir(), Params: map[string]string{"issue": "7"}})
	if res.Success || res.CompletionReason != verdict.ReasonAborted || res.Iterations != 2 ||
		!strings.Contains(res.Reason, "before a closure step emitted closing") {
		t.Fatalf("%+v %+v", res, res.Error)
	}
}

// routedAgent builds an agent from a registry map and schemas; the
// completion is stepFlow.
func routedAgent(t *testing.T, reg map[string]any, schemas map[string]any, prompts map[string]string, script string) string {
	t.Helper()
	files := map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "` + reg["agentId"].(string) + `", "description": "routed",
  "runner": {"model": "script:script.yaml", "completion": {"type": "stepFlow"},
    "boundaries": {"allowedTools": ["Read", "Bash"], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 12}}}`,
		"steps_registry.json":      mustJSON(reg),
		"schemas/flow.schema.json": mustJSON(schemas),
		"script.yaml":              script,
	}
	for id := range reg["steps"].(map[string]any) {
		parts := strings.SplitN(id, ".", 2)
		files[fmt.Sprintf("prompts/steps/%s/%s/f_default.md", parts[0], strings.ReplaceAll(parts[1], ".", "-"))] = "Step " + id + "."
	}
	for k, v := range prompts {
		files[k] = v
	}
	return writeAgent(t, files)
}

// TestClimptReviewerFlow runs a reviewer-like graph: the entry step
// repeats, hands over to its continuation, hands off to the closure step,
// which first repeats and then closes (verified by git-clean); the closure
// step's verdict reaches the Result.
func TestClimptReviewerFlow(t *testing.T) {
	needTools(t, "git")
	in := func(xs ...string) []string { return xs }
	reg := map[string]any{
		"agentId": "rev", "c1": "steps", "entryStep": "initial.issue",
		"steps": map[string]any{
			"initial.issue": flowStepDef("initial.issue", "work", "flow.schema.json", in("next", "repeat", "handoff"),
				map[string]any{"next": to("continuation.issue"), "repeat": to("initial.issue"), "handoff": to("closure.review")},
				map[string]any{"gate": map[string]any{"handoffFields": []any{"review.findings"}}}),
			"continuation.issue": flowStepDef("continuation.issue", "work", "flow.schema.json", in("next", "repeat", "handoff"),
				map[string]any{"next": to("continuation.issue"), "handoff": to("closure.review")},
				map[string]any{"uvVariables": []any{"initial_issue_findings"},
					"inputs": map[string]any{"findings": map[string]any{"from": "initial.issue.findings"}}}),
			"closure.review": flowStepDef("closure.review", "closure", "flow.schema.json", in("closing", "repeat"),
				map[string]any{"closing": to(nil)}, nil),
		},
		"validators": map[string]any{"git-clean": map[string]any{"type": "command", "command": "git status --porcelain",
			"successWhen": "empty", "failurePattern": "git-dirty"}},
		"validationSteps": map[string]any{"closure.review": map[string]any{"c2": "retry", "c3": "review",
			"validationConditions": []any{map[string]any{"validator": "git-clean"}}}},
	}
	review := map[string]any{"type": "object", "properties": map[string]any{"findings": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}}
	schemas := map[string]any{
		"initial.issue":      stepSchema(in("next", "repeat", "handoff"), map[string]any{"review": review}),
		"continuation.issue": stepSchema(in("next", "repeat", "handoff"), nil),
		"closure.review":     stepSchema(in("closing", "repeat"), map[string]any{"verdict": map[string]any{"type": "string"}}),
	}
	prompts := map[string]string{"prompts/steps/continuation/issue/f_default.md": "Findings so far: {uv-initial_issue_findings}"}
	script := `turns:
  - expect: {prompt_contains: ["Step initial.issue."]}
    structured: {next_action: {action: repeat, reason: "need to read the diff"}}
  - expect: {prompt_contains: ["Step initial.issue."]}
    structured: {review: {findings: ["missing test", "typo"]}, next_action: {action: next}}
  - expect: {prompt_contains: ['Findings so far: ["missing test","typo"]']}
    structured: {next_action: {action: handoff}}
  - expect: {prompt_contains: ["Step closure.review."]}
    structured: {next_action: {action: repeat, reason: "double-check"}}
  - expect: {prompt_contains: ["Step closure.review."]}
    structured: {next_action: {action: closing}, verdict: "approved"}
`
	res := runToEnd(t, load(t, routedAgent(t, reg, schemas, prompts, script)), BuildOptions{WorkDir: gitFixture(t, map[string]string{"a.txt": "a\n"})})
	path := transitionsOf(t, res)
	want := "initial.issue>initial.issue:repeat initial.issue>continuation.issue:next continuation.issue>closure.review:handoff " +
		"closure.review>closure.review:repeat closure.review>closure.review:closing"
	if !res.Success || res.Verdict != "approved" || strings.Join(path, " ") != want {
		t.Fatalf("%+v %+v\n got %s\nwant %s", res, res.Error, strings.Join(path, " "), want)
	}
}

// TestClimptFacilitatorFlow runs a facilitator-like chain with the other
// intents: a conditional handoff chosen by a handoff value, a verification
// step that escalates to its support step, a jump to a step the model
// names, and the closure.
func TestClimptFacilitatorFlow(t *testing.T) {
	in := func(xs ...string) []string { return xs }
	str := map[string]any{"type": "string"}
	reg := map[string]any{
		"agentId": "fac", "c1": "steps", "entryStep": "initial.discover",
		"steps": map[string]any{
			"initial.discover": flowStepDef("initial.discover", "", "flow.schema.json", in("next", "repeat", "handoff"),
				map[string]any{"next": to("initial.statuscheck"), "handoff": to("closure.facilitation")}, nil),
			"initial.statuscheck": flowStepDef("initial.statuscheck", "", "flow.schema.json", in("next", "handoff"),
				map[string]any{"next": to("initial.report"), "handoff": map[string]any{"condition": "health",
					"targets": map[string]any{"blocked": "verification.blockers", "default": "initial.report"}}},
				map[string]any{"gate": map[string]any{"handoffFields": []any{"status.health"}}}),
			"verification.blockers": flowStepDef("verification.blockers", "", "flow.schema.json", in("next", "escalate"),
				map[string]any{"next": to("initial.report"), "escalate": to("initial.judge")}, nil),
			"initial.judge": flowStepDef("initial.judge", "", "flow.schema.json", in("next", "jump"),
				map[string]any{"next": to("initial.report")},
				map[string]any{"gate": map[string]any{"targetField": "next_action.details.target"}}),
			"initial.report": flowStepDef("initial.report", "", "flow.schema.json", in("next", "repeat"),
				map[string]any{"next": to("closure.facilitation")}, nil),
			"closure.facilitation": flowStepDef("closure.facilitation", "", "flow.schema.json", in("closing", "repeat"),
				map[string]any{"closing": to(nil)}, nil),
		},
	}
	schemas := map[string]any{
		"initial.discover":      stepSchema(in("next", "repeat", "handoff"), nil),
		"initial.statuscheck":   stepSchema(in("next", "handoff"), map[string]any{"status": map[string]any{"type": "object", "properties": map[string]any{"health": str}}}),
		"verification.blockers": stepSchema(in("next", "escalate"), nil),
		"initial.judge":         stepSchema(in("next", "jump"), nil),
		"initial.report":        stepSchema(in("next", "repeat"), nil),
		"closure.facilitation":  stepSchema(in("closing", "repeat"), map[string]any{"verdict": str}),
	}
	script := `turns:
  - structured: {next_action: {action: next}}
  - expect: {prompt_contains: ["Step initial.statuscheck."]}
    structured: {status: {health: blocked}, next_action: {action: handoff}}
  - expect: {prompt_contains: ["Step verification.blockers."]}
    structured: {next_action: {action: escalate, reason: "two issues block each other"}}
  - expect: {prompt_contains: ["Step initial.judge."]}
    structured: {next_action: {action: jump, details: {target: initial.report}}}
  - expect: {prompt_contains: ["Step initial.report."]}
    structured: {next_action: {action: next}}
  - expect: {prompt_contains: ["Step closure.facilitation."]}
    structured: {next_action: {action: closing}, verdict: "reported"}
`
	res := runToEnd(t, load(t, routedAgent(t, reg, schemas, nil, script)), BuildOptions{WorkDir: t.TempDir()})
	path := transitionsOf(t, res)
	want := "initial.discover>initial.statuscheck:next initial.statuscheck>verification.blockers:handoff " +
		"verification.blockers>initial.judge:escalate initial.judge>initial.report:jump initial.report>closure.facilitation:next " +
		"closure.facilitation>closure.facilitation:closing"
	if !res.Success || res.Verdict != "reported" || strings.Join(path, " ") != want {
		t.Fatalf("%+v %+v\n got %s\nwant %s", res, res.Error, strings.Join(path, " "), want)
	}
}

// oneStepFlow is a registry with one work step and its closure.
func oneStepFlow(gate map[string]any) (map[string]any, map[string]any) {
	in := func(xs ...string) []string { return xs }
	reg := map[string]any{
		"agentId": "one", "c1": "steps", "entryStep": "initial.work",
		"steps": map[string]any{
			"initial.work": flowStepDef("initial.work", "work", "flow.schema.json", in("next", "handoff"),
				map[string]any{"next": to("initial.work"), "handoff": to("closure.work")}, map[string]any{"gate": gate}),
			"closure.work": flowStepDef("closure.work", "closure", "flow.schema.json", in("closing", "repeat"),
				map[string]any{"closing": to(nil)}, nil),
		},
	}
	schemas := map[string]any{
		"initial.work": map[string]any{"type": "object", "properties": map[string]any{
			"next_action": map[string]any{"type": "object", "properties": map[string]any{
				"action": map[string]any{"type": "string", "enum": in("next", "handoff")}, "reason": map[string]any{"type": "string"}}},
			"status": map[string]any{"type": "string"}, "reason": map[string]any{"type": "string"}}},
		"closure.work": stepSchema(in("closing", "repeat"), nil),
	}
	return reg, schemas
}

// The abort intent is the model giving up: the run stops with
// cannot_complete (exit code 4 of capstan run) and the model's reason.
func TestClimptAbortIsCannotComplete(t *testing.T) {
	reg, schemas := oneStepFlow(map[string]any{"allowedIntents": []string{"next", "handoff", "abort"}})
	schemas["initial.work"].(map[string]any)["properties"].(map[string]any)["next_action"].(map[string]any)["properties"].(map[string]any)["action"] =
		map[string]any{"type": "string", "enum": []string{"next", "handoff", "abort"}}
	script := `turns:
  - structured: {next_action: {action: abort, reason: "the issue asks for two contradicting behaviours"}}
`
	res := runToEnd(t, load(t, routedAgent(t, reg, schemas, nil, script)), BuildOptions{WorkDir: t.TempDir()})
	if res.Success || res.CompletionReason != ReasonCannotComplete || res.CannotComplete == nil ||
		res.CannotComplete.Reason != "the issue asks for two contradicting behaviours" {
		t.Fatalf("%+v %+v", res, res.CannotComplete)
	}
}

// An answer without a readable intent (failFast, the default) gets a
// format retry naming the intent field and its values, under the step's
// onFailure attempts, then ends the run with STEP_INTENT; with failFast
// false the fallback intent routes.
func TestClimptIntentFailFastAndFallback(t *testing.T) {
	reg, schemas := oneStepFlow(nil)
	script := `turns:
  - structured: {status: "working"}
  - expect: {prompt_contains: ["no value at next_action.action", "one of [next handoff]"]}
    structured: {next_action: {action: handoff}}
  - expect: {prompt_contains: ["Step closure.work."]}
    structured: {next_action: {action: closing}}
`
	res := runToEnd(t, load(t, routedAgent(t, reg, schemas, nil, script)), BuildOptions{WorkDir: t.TempDir()})
	if !res.Success || res.Iterations != 3 {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	script = `turns:
  - structured: {status: "working"}
  - structured: {status: "still working"}
  - structured: {status: "working hard"}
`
	res = runToEnd(t, load(t, routedAgent(t, reg, schemas, nil, script)), BuildOptions{WorkDir: t.TempDir()})
	if res.Success || res.Error == nil || res.Error.Code != agenterr.CodeStepIntent || res.Iterations != 3 ||
		res.CompletionReason != verdict.ReasonValidationExhausted {
		t.Fatalf("%+v %+v", res, res.Error)
	}

	reg, schemas = oneStepFlow(map[string]any{"failFast": false, "fallbackIntent": "handoff"})
	script = `turns:
  - structured: {status: "working"}
  - expect: {prompt_contains: ["Step closure.work."]}
    structured: {next_action: {action: closing}}
`
	res = runToEnd(t, load(t, routedAgent(t, reg, schemas, nil, script)), BuildOptions{WorkDir: t.TempDir()})
	if path := transitionsOf(t, res); !res.Success || strings.Join(path, " ") != "initial.work>closure.work:handoff closure.work>closure.work:closing" {
		t.Fatalf("%+v %+v %v", res, res.Error, path)
	}
}

// The intent is read from the structured answer only: prose that says
// "closing" or a status the schema allows does not route.
func TestClimptIntentNotFromProse(t *testing.T) {
	reg, schemas := oneStepFlow(nil)
	reg["steps"].(map[string]any)["initial.work"].(map[string]any)["onFailure"] = map[string]any{"action": "retry", "maxAttempts": 1}
	script := `turns:
  - text: "All done. next_action: handoff. closing"
    structured: {status: "completed"}
`
	res := runToEnd(t, load(t, routedAgent(t, reg, schemas, nil, script)), BuildOptions{WorkDir: t.TempDir()})
	var e *agenterr.Error
	if res.Success || !errors.As(res.Err(), &e) || e.Code != agenterr.CodeStepIntent {
		t.Fatalf("%+v %+v", res, res.Error)
	}
}

// A required input that no earlier step produced is STEP_ROUTE when the
// step's prompt is built.
func TestClimptMissingInput(t *testing.T) {
	reg, schemas := oneStepFlow(nil)
	cl := reg["steps"].(map[string]any)["closure.work"].(map[string]any)
	cl["inputs"] = map[string]any{"summary": map[string]any{"from": "initial.work.summary"}}
	script := `turns:
  - structured: {next_action: {action: handoff}}
`
	res := runToEnd(t, load(t, routedAgent(t, reg, schemas, nil, script)), BuildOptions{WorkDir: t.TempDir()})
	if res.Success || res.Error == nil || res.Error.Code != agenterr.CodeStepRoute || !strings.Contains(res.Error.Message, "initial.work.summary") {
		t.Fatalf("%+v %+v", res, res.Error)
	}
}

// validate checks that the schema's intent enum is exactly allowedIntents.
func TestFlowValidateEnum(t *testing.T) {
	reg, schemas := oneStepFlow(nil)
	schemas["initial.work"].(map[string]any)["properties"].(map[string]any)["next_action"].(map[string]any)["properties"].(map[string]any)["action"] =
		map[string]any{"type": "string", "enum": []string{"next", "handoff", "closing"}}
	dir := routedAgent(t, reg, schemas, nil, "turns:\n  - text: x\n")
	res := agentdir.Check(dir, ValidateOptions())
	var found bool
	for _, p := range res.Problems() {
		if p.Code == CodeGateEnum {
			found = p.Pointer == "/steps/initial.work/structuredGate/intentSchemaRef" && strings.Contains(p.Message, "not allowed: [closing]") && p.Line > 0
		}
	}
	if !found || res.Valid() {
		t.Fatalf("no SR-GATE-ENUM:\n%v", res.Problems())
	}

	// A validation step's declared pattern without a retry prompt file
	// gets the generic prompt: a warning, not an error.
	dir = iteratorAgent(t, `{"type": "stepFlow"}`, "turns:\n  - text: x\n")
	if err := os.Remove(filepath.Join(dir, "prompts/steps/retry/issue/f_failed_git-dirty.md")); err != nil {
		t.Fatal(err)
	}
	res = agentdir.Check(dir, ValidateOptions())
	found = false
	for _, p := range res.Problems() {
		if p.Code == CodeRetryPromptGeneric {
			found = p.Pointer == "/validationSteps/closure.polling/validationConditions/0" && p.Severity == agentdir.SeverityWarning &&
				strings.Contains(p.Hint, "prompts/steps/retry/issue/f_failed_git-dirty.md")
		}
	}
	if !found || !res.Valid() {
		t.Fatalf("no SR-RETRY-PROMPT-GENERIC warning:\n%v", res.Problems())
	}
}

// The closure step's validation step honours onFailure: retry until
// maxAttempts closings failed (validation_exhausted), or skip (the closing
// stands although the condition fails).
func TestClimptClosureOnFailure(t *testing.T) {
	for _, tc := range []struct {
		onFailure map[string]any
		success   bool
		reason    string
		iters     int
	}{
		{map[string]any{"action": "retry", "maxAttempts": 2}, false, ReasonValidationExhausted, 3},
		{map[string]any{"action": "skip"}, true, "completed", 2},
		{map[string]any{"action": "abort"}, false, verdict.ReasonAborted, 2},
	} {
		reg, schemas := oneStepFlow(nil)
		reg["validators"] = map[string]any{"out-exists": map[string]any{"type": "file", "path": "out.txt", "failurePattern": "file-not-exists"}}
		reg["validationSteps"] = map[string]any{"closure.work": map[string]any{"c2": "retry", "c3": "work",
			"validationConditions": []any{map[string]any{"validator": "out-exists"}}, "onFailure": tc.onFailure}}
		script := `turns:
  - structured: {next_action: {action: handoff}}
  - structured: {next_action: {action: closing}}
  - expect: {prompt_contains: ["file-not-exists", "out.txt"]}
    structured: {next_action: {action: closing}}
`
		res := runToEnd(t, load(t, routedAgent(t, reg, schemas, nil, script)), BuildOptions{WorkDir: t.TempDir()})
		if res.Success != tc.success || res.CompletionReason != tc.reason || res.Iterations != tc.iters {
			t.Errorf("%v: %+v %+v", tc.onFailure, res, res.Error)
		}
	}
}

// A resumed routed run continues at its step with the answers it had
// kept: a later step's input still has the value an earlier step handed
// off before the run stopped.
func TestClimptResumeKeepsInputs(t *testing.T) {
	in := func(xs ...string) []string { return xs }
	reg := map[string]any{
		"agentId": "res", "c1": "steps", "entryStep": "initial.a",
		"steps": map[string]any{
			"initial.a": flowStepDef("initial.a", "", "flow.schema.json", in("next", "repeat"),
				map[string]any{"next": to("continuation.a")}, map[string]any{"gate": map[string]any{"handoffFields": []any{"summary"}}}),
			"continuation.a": flowStepDef("continuation.a", "", "flow.schema.json", in("next", "handoff"),
				map[string]any{"next": to("continuation.a"), "handoff": to("closure.a")},
				map[string]any{"uvVariables": []any{"initial_a_summary"},
					"inputs": map[string]any{"plan": map[string]any{"from": "initial.a.summary"}}}),
			"closure.a": flowStepDef("closure.a", "", "flow.schema.json", in("closing", "repeat"), map[string]any{"closing": to(nil)}, nil),
		},
	}
	schemas := map[string]any{
		"initial.a":      stepSchema(in("next", "repeat"), nil),
		"continuation.a": stepSchema(in("next", "handoff"), nil),
		"closure.a":      stepSchema(in("closing", "repeat"), nil),
	}
	prompts := map[string]string{"prompts/steps/continuation/a/f_default.md": "The plan: {uv-initial_a_summary}"}
	script := `turns:
  - structured: {summary: "rename the flag", next_action: {action: next}}
  - expect: {prompt_contains: ["The plan: rename the flag"]}
    structured: {next_action: {action: next}}
  - expect: {prompt_contains: ["The plan: rename the flag"]}
    structured: {next_action: {action: handoff}}
  - structured: {next_action: {action: closing}}
`
	def, wd := load(t, routedAgent(t, reg, schemas, prompts, script)), t.TempDir()
	first := runToEnd(t, def, BuildOptions{WorkDir: wd, MaxIterations: 2})
	if first.Success || first.StepID != "continuation.a" {
		t.Fatalf("%+v", first)
	}
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	res := runToEnd(t, def, BuildOptions{WorkDir: wd, Resume: rec})
	if !res.Success || res.Iterations != 4 || res.StepID != "closure.a" {
		t.Fatalf("resumed %+v %+v", res, res.Error)
	}
}
