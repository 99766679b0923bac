package main

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// A pipeline stage of kind agent runs a real capstan agent; its structured
// result fills the stage's postconditions.
func TestPipelineAgentStageRunsACapstanAgent(t *testing.T) {
	dir := writeFiles(t, withWriterAgent("kites", "Kites fly higher than ever", map[string]string{
		"p.yaml": `version: 1
inputs: [request]
stages:
  - id: writer
    kind: agent
    dir: agents/writer
    params: {topic: "{{input.request}}"}
    preconditions: [input.request]
    postconditions: [custom.headline]
`,
	}))
	t.Chdir(dir) // agent stages act and journal in the current directory
	if out, err := exec.Command("git", "init", "-q").CombinedOutput(); err != nil {
		t.Skipf("git init: %v %s", err, out) // pipeline run reads --repo (default .)
	}
	code, out, errOut := captureConfigCLI(t, "pipeline", "run", "--file", "p.yaml", "--json", "kites")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var ctx map[string]any
	if err := json.Unmarshal([]byte(out), &ctx); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "Kites fly higher than ever") {
		t.Fatalf("the agent's structured result did not fill custom.headline:\n%s", out)
	}
	// The agent's own run is journaled and readable.
	code, out, _ = captureConfigCLI(t, "runs", "--json")
	if code != 0 || !strings.Contains(out, `"agent": "writer"`) || !strings.Contains(out, `"status": "completed"`) {
		t.Fatalf("runs:\n%s", out)
	}
	// It ran with its definition pinned, as `capstan run` does.
	var runs []struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v\n%s", err, out)
	}
	if code, out, _ = captureConfigCLI(t, "show", runs[0].RunID); code != 0 || !strings.Contains(out, "definition sha256:") {
		t.Fatalf("show:\n%s", out)
	}
}

// withWriterAgent adds to files the "writer" agent under agents/writer: one
// step that asks for a headline about its topic parameter and is answered,
// by the script provider, with the given headline as structured output
// (checked against the step's schema). The script expects the prompt to
// name topic.
func withWriterAgent(topic, headline string, files map[string]string) map[string]string {
	files["agents/writer/agent.json"] = `{"version": "1.0.0", "name": "writer", "description": "writes a headline",
  "parameters": {"topic": {"type": "string", "description": "topic", "required": true}},
  "runner": {"model": "script:script.yaml", "completion": {"type": "iterationBudget", "maxIterations": 1}}}`
	files["agents/writer/steps_registry.json"] = `{"agentId": "writer", "entryStep": "w", "steps": {"w": {"stepId": "w", "c2": "work", "c3": "w",
  "uvVariables": ["topic"], "outputSchemaRef": {"file": "out.schema.json", "schema": "headline"}}}}`
	files["agents/writer/schemas/out.schema.json"] = `{"headline": {"type": "object", "properties": {"headline": {"type": "string"}}, "required": ["headline"]}}`
	files["agents/writer/prompts/steps/work/w/f_default.md"] = "Write a headline about {uv-topic}."
	files["agents/writer/script.yaml"] = "turns:\n  - expect: {prompt_contains: [\"Write a headline about " + topic + ".\"]}\n" +
		"    structured: {headline: \"" + headline + "\"}\n"
	return files
}

// capstan show and capstan report of a pipeline run journaled with
// --journal-dir name the pipeline, its model and each stage's outcome,
// the failed agent stage's run included.
func TestShowOfAPipelineRun(t *testing.T) {
	dir := writeFiles(t, withWriterAgent("kites", "Kites", map[string]string{
		"p.yaml": `version: 1
inputs: [request]
stages:
  - id: writer
    kind: agent
    dir: agents/writer
    params: {topic: "{{input.request}}"}
    preconditions: [input.request]
    postconditions: [custom.headline]
`,
	}))
	sh := pasteShell(t, dir)
	code, out := sh("git init -q && capstan pipeline run --file p.yaml --journal-dir j not-kites")
	if code == 0 {
		t.Fatalf("a stage whose agent fails: exit 0\n%s", out)
	}
	_, rest, ok := strings.Cut(out, "journal: j/.capstan/runs/")
	if !ok {
		t.Fatalf("no journal printed:\n%s", out)
	}
	id, _, _ := strings.Cut(rest, "/")
	// The journal line ends with the show command, which works pasted
	// from any directory; `capstan runs` lists the run as a pipeline's.
	show := pastedCommand(t, out, "events.jsonl  (")
	if code, sout := pasteShell(t, t.TempDir())(show); code != 0 || !strings.Contains(sout, "pipeline p.yaml") {
		t.Fatalf("%s: exit %d\n%s", show, code, sout)
	}
	if code, rout := sh("capstan runs --workdir j"); code != 0 || !regexp.MustCompile(id+` +pipeline +not completed`).MatchString(rout) {
		t.Fatalf("runs: exit %d\n%s", code, rout)
	}
	code, out = sh("capstan show " + id + " --workdir j")
	if code != 0 {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	for _, want := range []string{"pipeline p.yaml  model none", `request "not-kites"`, "✗ writer  failed", "agent ", "not completed", "NOT COMPLETED"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if code, out = sh("capstan report " + id + " --workdir j --format markdown -o -"); code != 0 || !strings.Contains(out, "pipeline p.yaml: NOT COMPLETED") || !strings.Contains(out, "`writer` failed") {
		t.Errorf("report: exit %d\n%s", code, out)
	}
}
