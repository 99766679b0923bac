package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/sandbox"
)

// mergeScript is a merger-like command: it reads the verdict file, prints
// a decision as JSON on stdout and a note on stderr, and exits with the
// status the verdict file asks for. MERGE_SECRET_TOKEN shows the
// environment rules: capstan's secrets do not reach it.
const mergeScript = `#!/bin/sh
[ "$1" = "--pr" ] && [ "$3" = "--verdict" ] || { echo "usage: merge.sh --pr N --verdict FILE" >&2; exit 64; }
verdict=$(cat "$4")
echo "merging #$2" >&2
printf '{"pr": %s, "verdict": "%s", "token": "%s", "outcome": "merged"}\n' "$2" "$verdict" "$MERGE_SECRET_TOKEN"
[ "$verdict" = "approved" ] || exit 3
`

// mergerAgent is a climpt merger-style agent: one closure step that runs
// merge.sh with the run's parameters and no model at all.
func mergerAgent(t *testing.T) string {
	return writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "merger", "description": "merges a reviewed PR",
  "parameters": {"pr": {"type": "number", "required": true}, "verdict_path": {"type": "string", "required": true}},
  "runner": {"completion": {"type": "iterationBudget", "maxIterations": 1}}}`,
		"steps_registry.json": `{"agentId": "merger", "entryStep": "merge",
  "steps": {"merge": {"stepId": "merge", "stepKind": "closure", "c2": "closure", "c3": "merge",
    "runner": {"command": "sh", "args": ["merge.sh", "--pr", "${context.pr}", "--verdict", "${context.verdict_path}"], "timeout": 10000}}}}`,
		"prompts/.keep": "",
	})
}

func runMerger(t *testing.T, verdict string) (*event.RunResult, []journal.Event) {
	t.Helper()
	t.Setenv("MERGE_SECRET_TOKEN", "s3cret-value")
	work := writeAgent(t, map[string]string{"merge.sh": mergeScript, "verdict.txt": verdict})
	res := runToEnd(t, load(t, mergerAgent(t)), BuildOptions{WorkDir: work,
		Params: map[string]string{"pr": "42", "verdict_path": "verdict.txt"}})
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

// A subprocess step runs its command instead of a model: exit 0 with JSON
// on stdout completes the merger, the JSON is the iteration's structured
// output, the command line and its output are journaled, and secrets stay
// out of its environment.
func TestSubprocessStepCompletes(t *testing.T) {
	res, events := runMerger(t, "approved")
	if !res.Success || res.Iterations != 1 || res.Model != SubprocessTool || res.Usage != (event.Usage{}) {
		t.Fatalf("result: success=%v iterations=%d model=%q usage=%+v err=%+v", res.Success, res.Iterations, res.Model, res.Usage, res.Error)
	}
	var prompt, start string
	var end *event.IterationEvent
	for _, ev := range events {
		switch ev.Type {
		case journal.PromptResolved:
			var p event.PromptEvent
			_ = json.Unmarshal(ev.Data, &p)
			prompt = p.Text
		case journal.QueryStart:
			start = string(ev.Data)
		case journal.IterationEnd:
			end = &event.IterationEvent{}
			_ = json.Unmarshal(ev.Data, end)
		}
	}
	if prompt != "$ sh merge.sh --pr 42 --verdict verdict.txt" || !strings.Contains(start, `"model":"subprocess"`) {
		t.Fatalf("prompt %q, query.start %s", prompt, start)
	}
	s := end.Summary
	var so map[string]any
	if err := json.Unmarshal(s.StructuredOutput, &so); err != nil || so["pr"] != float64(42) || so["verdict"] != "approved" || so["outcome"] != "merged" {
		t.Fatalf("structured output %s (%v)", s.StructuredOutput, err)
	}
	if so["token"] != "" {
		t.Fatalf("the command saw capstan's secret: %v", so["token"])
	}
	if len(s.ActionResults) != 1 || s.ActionResults[0].Action != SubprocessTool || !s.ActionResults[0].Success ||
		!strings.Contains(s.ActionResults[0].Output, "merging #42") || !strings.HasSuffix(s.ActionResults[0].Output, "[exit status 0]") {
		t.Fatalf("action results %+v", s.ActionResults)
	}
}

// A failing command never completes the run, even when the completion
// handler would (iterationBudget 1): the run stops with STEP_SUBPROCESS.
func TestSubprocessStepFailureStopsTheRun(t *testing.T) {
	res, _ := runMerger(t, "rejected")
	if res.Success || res.Error == nil || res.Error.Code != agenterr.CodeStepSubprocess || !res.Error.Recoverable ||
		!strings.Contains(res.Error.Message, "[exit status 3]") || !strings.Contains(res.Error.Hint, "capstan show "+res.RunID) {
		t.Fatalf("result %+v / %+v", res, res.Error)
	}
}

// A parameter a subprocess step needs but the run lacks is a located
// configuration error before anything runs.
func TestSubprocessStepMissingContext(t *testing.T) {
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "m", "description": "d",
  "parameters": {"branch": {"type": "string"}},
  "runner": {"completion": {"type": "iterationBudget", "maxIterations": 1}}}`,
		"steps_registry.json": `{"agentId": "m", "entryStep": "push",
  "steps": {"push": {"stepId": "push", "runner": {"command": "git", "args": ["push", "origin", "${context.branch}"]}}}}`,
		"prompts/.keep": "",
	})
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	e := res.Error
	if res.Success || e == nil || e.Code != agenterr.CodeConfigurationValidation || !strings.Contains(e.Message, "${context.branch} has no value") ||
		!strings.Contains(e.Hint, "pass --branch") {
		t.Fatalf("result %+v / %+v", res, e)
	}
}

// With a model: a review step (script model) hands over to a subprocess
// step whose action check routes on the command's exit status, like a
// model step's tool calls.
func TestSubprocessStepAfterModelStep(t *testing.T) {
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "reviewer", "description": "reviews then merges",
  "parameters": {"pr": {"type": "number", "required": true}},
  "runner": {"model": "script:script.yaml", "completion": {"type": "stepFlow"}, "budgets": {"maxIterations": 3},
    "boundaries": {"allowedTools": ["Write"], "permissionMode": "acceptEdits"}}}`,
		"steps_registry.json": `{"agentId": "reviewer", "entryStep": "review",
  "steps": {
    "review": {"stepId": "review", "stepKind": "verification", "c2": "initial", "c3": "review", "uvVariables": ["pr"],
      "check": {"type": "keyword", "keywords": ["APPROVED"], "onPass": {"next": "merge"}, "onFail": {"retry": true}}},
    "merge": {"stepId": "merge", "stepKind": "closure", "runner": {"command": "sh", "args": ["merge.sh", "--pr", "${context.pr}", "--verdict", "verdict.txt"]},
      "check": {"type": "action", "actions": ["subprocess"], "onPass": {"complete": true}, "onFail": {"next": "review"}}}
  }}`,
		"prompts/steps/initial/review/f_default.md": "Review PR {uv-pr}.",
		"script.yaml": `turns:
  - expect: {prompt_contains: ["Review PR 9."]}
    tool_calls:
      - name: Write
        input: {file_path: verdict.txt, content: "approved"}
  - text: APPROVED
`,
	})
	work := writeAgent(t, map[string]string{"merge.sh": mergeScript})
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: work, Params: map[string]string{"pr": "9"}})
	if !res.Success || res.Iterations != 2 || res.StepID != "merge" {
		t.Fatalf("result: success=%v iterations=%d step=%s err=%+v", res.Success, res.Iterations, res.StepID, res.Error)
	}
}

// With runner.boundaries.sandbox enabled the command runs in the sandbox:
// it may write the work dir but not outside it, and its stdout stays
// apart from stderr.
func TestSubprocessStepSandboxed(t *testing.T) {
	if c := sandbox.New(context.Background(), sandbox.Config{}).Capabilities(); c.Unavailable() != nil {
		t.Skipf("sandbox unavailable here: %s", c.Reason)
	}
	outside := t.TempDir()
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "boxed", "description": "sandboxed command",
  "runner": {"completion": {"type": "iterationBudget", "maxIterations": 1},
    "boundaries": {"sandbox": {"enabled": true}}}}`,
		"steps_registry.json": `{"agentId": "boxed", "entryStep": "run",
  "steps": {"run": {"stepId": "run", "runner": {"command": "sh", "args": ["-c",
    "touch inside.txt; touch ` + outside + `/escaped.txt 2>/dev/null && w=yes || w=no; echo note >&2; echo \"{\\\"outsideWrite\\\": \\\"$w\\\"}\""]}}}}`,
	})
	work := t.TempDir()
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: work})
	if !res.Success {
		t.Fatalf("run: %+v", res.Error)
	}
	events, _ := journal.ReadFile(res.Journal)
	for _, ev := range events {
		if ev.Type == journal.IterationEnd {
			var end event.IterationEvent
			_ = json.Unmarshal(ev.Data, &end)
			var so map[string]string
			if json.Unmarshal(end.Summary.StructuredOutput, &so) != nil || so["outsideWrite"] != "no" {
				t.Fatalf("structured output %s", end.Summary.StructuredOutput)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(work, "inside.txt")); err != nil {
		t.Fatal("the command could not write its work dir:", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped.txt")); err == nil {
		t.Fatal("the command wrote outside the work dir")
	}
}
