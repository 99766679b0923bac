package agent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
)

// systemRecorder records the system prompt of every request.
type systemRecorder struct {
	llm.Bridge
	systems []string
}

func (b *systemRecorder) Query(ctx context.Context, prompt string, opts llm.QueryOptions) (*event.QueryResult, error) {
	b.systems = append(b.systems, opts.SystemPrompt)
	return b.Bridge.Query(ctx, prompt, opts)
}

// TestClimptFormatAgentRuns: an agent folder in climpt's format
// (runner.flow, runner.verdict, entryStepMapping, failurePatterns, camelCase
// parameters, step type "prompt", a retired step no entry reaches)
// runs: the system prompt named by runner.flow.systemPromptPath reaches
// every request, count:iteration ends the run after maxIterations, the
// registry comes from runner.flow.prompts.registry, schemas from
// runner.flow.schemas.base, and the runtime variables climpt prompts use
// (completed_iterations, remaining, previous_summary) are supplied (the
// script asserts the prompt text of each turn).
func TestClimptFormatAgentRuns(t *testing.T) {
	dir := filepath.Join("testdata", "climpt-work")
	cfg, inner := loadScripted(t, dir, Config{Params: map[string]string{"issueNumber": "42"}})
	rec := &systemRecorder{Bridge: inner}
	cfg.Bridge = rec
	res := runToEnd(t, cfg.Agent, cfg)
	if !res.Success || res.Iterations != 2 {
		t.Fatalf("result %+v (error %v)", res, res.Err())
	}
	if len(rec.systems) != 2 {
		t.Fatalf("%d requests, want 2", len(rec.systems))
	}
	for i, s := range rec.systems {
		if !strings.Contains(s, "SYSTEM-MARKER-7Q: you are climpt-work, a careful maintainer.") {
			t.Errorf("request %d: system prompt %q lacks runner.flow.systemPromptPath's text", i+1, s)
		}
	}
	spec := cfg.Agent.Definition()
	if spec.Runner.Completion.Type != "iterationBudget" || spec.Runner.Completion.MaxIterations != 2 {
		t.Errorf("verdict count:iteration became %+v", spec.Runner.Completion)
	}
}

// TestClimptMissingParamNamesStep: an optional parameter without default
// that a reachable step needs must be given; the run says which step — the
// entry step when it needs it, not the first such step by name.
func TestClimptMissingParamNamesStep(t *testing.T) {
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "p", "description": "d",
  "parameters": {"projectId": {"type": "number", "description": "project", "cli": "--project-id"}},
  "runner": {"model": "script:script.yaml", "flow": {"prompts": {"registry": "steps_registry.json"}},
    "verdict": {"type": "count:iteration", "config": {"maxIterations": 1}}}}`,
		"steps_registry.json": `{"agentId": "p", "c1": "steps", "entryStepMapping": {"count:iteration": "initial.p"},
  "steps": {"initial.p": {"stepId": "initial.p", "c2": "initial", "c3": "p", "uvVariables": ["projectId"],
      "check": {"type": "keyword", "keywords": ["PLANNED"], "onPass": {"next": "continuation.p"}, "onFail": {"retry": true}}},
    "continuation.p": {"stepId": "continuation.p", "c2": "continuation", "c3": "p", "uvVariables": ["projectId"]}}}`,
		"prompts/steps/initial/p/f_default.md":      "Project {uv-projectId}.",
		"prompts/steps/continuation/p/f_default.md": "Still project {uv-projectId}.",
		"script.yaml": "turns:\n  - text: ok\n",
	})
	cfg, err := Load(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir = t.TempDir()
	_, err = New(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "--project-id (step initial.p uses {uv-projectId})") {
		t.Fatalf("want PARAM_MISSING naming --project-id and the step, got %v", err)
	}
	cfg.Params = map[string]string{"projectId": "7"}
	res := runToEnd(t, cfg.Agent, cfg)
	if !res.Success {
		t.Fatalf("with --project-id: %+v (%v)", res, res.Err())
	}
}

// TestSignalCompletionIsVerified: climpt's detect:structured (completion
// type signal) ends the run on the signal block, and the run's validators
// still decide: a model that only signals is refuted, one that does the
// work completes, verified.
func TestSignalCompletionIsVerified(t *testing.T) {
	js := `{"type": "signal", "options": {"signalType": "task_done", "requiredFields": ["summary"]}, "validators": ["out-exists"]}`
	signal := `"DONE\n` + "```task_done\\n{\\\"summary\\\": \\\"wrote out.txt\\\"}\\n```" + `\n"`
	liar := "turns:\n  - text: " + signal + "\n  - text: " + signal + "\n  - text: " + signal + "\n"
	honest := "turns:\n  - text: \"writing\"\n    tool_calls:\n      - name: Write\n        input: {file_path: out.txt, content: \"x\\n\"}\n  - text: " + signal + "\n"
	onFailure := `"onFailure": {"action": "retry", "maxAttempts": 2}`
	res, _ := runVerdict(t, verdictAgent(t, js, onFailure, liar), nil)
	if res.Success || res.CompletionReason != ReasonValidationExhausted {
		t.Fatalf("liar: %+v", res)
	}
	res, _ = runVerdict(t, verdictAgent(t, js, onFailure, honest), nil)
	if !res.Success || !strings.Contains(res.Reason, "verified by out-exists") {
		t.Fatalf("honest: %+v", res)
	}
}

// TestClimptSchemaConditionalFires: the output schema's if/then (two
// conditionals in one allOf) is enforced at run time: an answer with status
// "blocked" but no reason is rejected, and the retry prompt names the
// missing property (the script's second turn expects it).
func TestClimptSchemaConditionalFires(t *testing.T) {
	dir := filepath.Join("testdata", "climpt-work")
	cfg, err := Load(dir, Config{Model: "script:script-blocked.yaml", Params: map[string]string{"issueNumber": "42"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir = t.TempDir()
	res := runToEnd(t, cfg.Agent, cfg)
	if !res.Success || res.Iterations != 2 {
		t.Fatalf("result %+v (error %v)", res, res.Err())
	}
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events {
		if strings.Contains(string(e.Data), `missing required property \"reason\"`) { // JSON-escaped in the event
			found = true
		}
	}
	if !found {
		t.Fatal("no journal event reports the broken then (missing required property reason)")
	}
}

// denoCheck is a type check that prints deno check's diagnostics and fails
// the first time, and passes once "fixed" exists.
const denoCheck = `if [ -f fixed ]; then echo "Check file:///repo/src/app.ts"; exit 0; fi
: > fixed
echo "Check file:///repo/src/app.ts"
cat >&2 <<'OUT'
TS2551 [ERROR]: Property 'nme' does not exist on type 'User'.
  return user.nme;
              ~~~
    at file:///repo/src/app.ts:4:9

TS2304 [ERROR]: Cannot find name 'conn'.
  conn.close();
  ~~~~
    at file:///repo/src/db.ts:12:3

Found 2 errors.

error: Type checking failed.
OUT
exit 1
`

// TestClimptTypeCheckRetryListsDenoErrors: a climpt-format closure step
// verified by a deno type check (validationSteps, failurePatterns,
// parseTypeErrors) is refused on the first closing; the retry prompt from
// the folder lists every deno diagnostic with its file, line, column and
// code (the script asserts it), and the second closing completes.
func TestClimptTypeCheckRetryListsDenoErrors(t *testing.T) {
	dir := filepath.Join("testdata", "climpt-typecheck")
	work := writeAgent(t, map[string]string{"typecheck.sh": denoCheck})
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: work, Params: map[string]string{"issue": "5"}})
	if !res.Success || res.Iterations != 2 {
		t.Fatalf("result %+v (error %v)", res, res.Err())
	}
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	retries := 0
	for _, ev := range events {
		if ev.Type == journal.RetryPrompt {
			retries++
			if !strings.Contains(string(ev.Data), `"pattern":"type-error"`) {
				t.Errorf("retry prompt: %s", ev.Data)
			}
		}
	}
	if retries != 1 {
		t.Fatalf("%d retry prompts, want 1", retries)
	}
}
