package clitest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// ClosureAgent writes an agent folder whose one closure step answers
// from script (YAML turns); withIssue declares the issue parameter and
// puts {uv-issue} in the prompt.
func ClosureAgent(t testing.TB, agentsDir, name string, withIssue bool, handoff []string, script string) {
	t.Helper()
	dir := filepath.Join(agentsDir, name)
	params, prompt, uv := "", "Work on the task.", "[]"
	if withIssue {
		params = `"parameters": {"issue": {"type": "number", "required": true, "cli": "--issue", "description": "the issue"}},`
		prompt, uv = "Work on issue #{uv-issue}.", `["issue"]`
	}
	hf, _ := json.Marshal(handoff)
	files := map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "` + name + `", "description": "a workflow agent", ` + params + `
  "runner": {"model": "script:script.yaml", "completion": {"type": "stepFlow"},
    "boundaries": {"allowedTools": ["Read"], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json": `{"agentId": "` + name + `", "version": "1.0.0", "c1": "steps", "entryStep": "closure.work",
  "steps": {"closure.work": {"stepId": "closure.work", "name": "work", "c2": "closure", "c3": "work", "stepKind": "closure",
    "uvVariables": ` + uv + `, "outputSchemaRef": {"file": "flow.schema.json", "schema": "closure.work"},
    "structuredGate": {"allowedIntents": ["closing", "repeat"], "intentField": "next_action.action",
      "intentSchemaRef": "#/properties/next_action/properties/action", "handoffFields": ` + string(hf) + `},
    "transitions": {"closing": {"target": null}, "repeat": {"target": "closure.work"}}}}}`,
		"schemas/flow.schema.json": `{"closure.work": {"type": "object", "required": ["next_action"], "properties": {
  "next_action": {"type": "object", "required": ["action"], "properties": {"action": {"type": "string", "enum": ["closing", "repeat"]}}},
  "verdict": {"type": "string"}, "final_summary": {"type": "string"}, "detail_summary": {"type": "string"}}}}`,
		"prompts/steps/closure/work/f_default.md": prompt,
		"script.yaml": script,
	}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// WorkflowProject is a work dir holding .agent/workflow.json (the test
// workflow in climpt's format, with the comment template keys spelled
// as a move looks them up) and three scripted agents.
func WorkflowProject(t testing.TB, repoRoot string) string {
	t.Helper()
	wd := t.TempDir()
	agents := filepath.Join(wd, ".agent")
	raw, err := os.ReadFile(filepath.Join(repoRoot, "workflow", "testdata", "issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agents, "workflow.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ClosureAgent(t, agents, "considerer", true, []string{"verdict", "final_summary"}, `turns:
  - expect: {prompt_contains: ["issue #7"]}
    structured: {next_action: {action: closing}, verdict: handoff-detail, final_summary: "Needs a spec first."}
`)
	ClosureAgent(t, agents, "detailer", true, []string{"detail_summary"}, `turns:
  - expect: {prompt_contains: ["issue #7"]}
    structured: {next_action: {action: closing}, verdict: handoff-impl, detail_summary: "Add the flag, then test it."}
`)
	// The iterator declares no issue parameter: the orchestrator's issue
	// must not become a flag error.
	ClosureAgent(t, agents, "iterator", false, []string{}, `turns:
  - structured: {next_action: {action: closing}}
`)
	return wd
}

// Issue7Moves are the gh writes of issue 7's three moves through the
// test workflow (see TestWorkflowRunDrivesAnIssueThroughScriptedAgents in
// cmd/capstan).
var Issue7Moves = []string{
	"issue edit 7 --add-label kind:detail --repo acme/app",
	"issue edit 7 --remove-label kind:consider --repo acme/app",
	"issue comment 7 --body ## Specification Requested\n\nNeeds a spec first. --repo acme/app",
	"issue edit 7 --add-label kind:impl --repo acme/app",
	"issue edit 7 --remove-label kind:detail --repo acme/app",
	"issue comment 7 --body ## Implementation Spec\n\nAdd the flag, then test it. --repo acme/app",
	"issue edit 7 --add-label done --repo acme/app",
	"issue edit 7 --remove-label order:1 --remove-label kind:impl --repo acme/app",
	"issue close 7 --repo acme/app",
}

// WorkflowResult is what `capstan workflow run --json` prints, as far as
// the tests read it.
type WorkflowResult struct {
	RunID  string
	Status string
	Issues []struct {
		Status, FinalPhase string
		Closed             bool
		History            []struct{ From, To, Agent, Outcome, RunID string }
	}
}

// WriteLocalIssue writes issue n with labels (a JSON array) into a local
// issue store.
func WriteLocalIssue(t testing.TB, store string, n int, labels string) {
	t.Helper()
	dir := filepath.Join(store, fmt.Sprint(n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := fmt.Sprintf(`{"number": %d, "title": "t", "labels": %s, "state": "open", "assignees": [], "milestone": null}`, n, labels)
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
}
