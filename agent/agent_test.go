package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/journal"
	_ "github.com/capstan-dev/capstan/llm/script"
)

// writeAgent creates an agent folder from files (path → content) and
// returns its directory.
func writeAgent(t testing.TB, files map[string]string) string { return clitest.WriteFiles(t, files) }

// basicAgent is a one-step agent completing on a keyword; script is the
// script.yaml content.
func basicAgent(t testing.TB, script string, extraParams string) string {
	t.Helper()
	params := `"topic": {"type": "string", "description": "what to write about", "default": "boats"}`
	if extraParams != "" {
		params += "," + extraParams
	}
	return writeAgent(t, map[string]string{
		"agent.json": `{
  "version": "1.0.0", "name": "basic", "description": "test agent",
  "parameters": {` + params + `},
  "runner": {
    "model": "script:script.yaml",
    "systemPromptPath": "prompts/system.md",
    "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Read", "Write"], "permissionMode": "acceptEdits"},
    "budgets": {"maxIterations": 5}
  }
}`,
		"steps_registry.json": `{"agentId": "basic", "c1": "steps", "entryStep": "initial.work",
  "steps": {"initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work", "uvVariables": ["topic"]}}}`,
		"prompts/system.md":                       "You work in {uv-workdir}.",
		"prompts/steps/initial/work/f_default.md": "---\nstepId: initial.work\n---\nIteration {uv-iteration}: write notes about {uv-topic}. {uv-undefined_thing}",
		"script.yaml":                             script,
	})
}

const twoIterationScript = `turns:
  - expect: {prompt_contains: ["Iteration 1: write notes about boats"]}
    text: "writing"
    tool_calls:
      - name: Write
        input: {file_path: notes.txt, content: "boats float\n"}
  - text: "wrote notes.txt"
  - expect: {prompt_contains: ["Iteration 2"]}
    text: "checked, ALL_DONE"
`

// runToEnd builds, starts, runs and stops an agent and returns its result.
func runToEnd(t testing.TB, def *agentdir.Agent, opts BuildOptions) *event.RunResult {
	t.Helper()
	if opts.Store.Dir == "" && opts.Getenv != nil {
		// A test's own Getenv (API keys from a map) has no state dir and
		// would send the journal to the real ~/.local/state/capstan; keep
		// it in the test binary's temporary state dir (TestMain).
		opts.Store = journal.Store{Dir: os.Getenv(journal.EnvStateDir)}
	}
	ctx := context.Background()
	a, err := Build(ctx, def, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a.Run(ctx)
	res := a.Stop()
	assertSharedUnchanged(t, a.def)
	return res
}

// assertSharedUnchanged fails when a run changed the definition it shares
// with every other agent of def (agentdir.Agent.Shared is read-only).
func assertSharedUnchanged(t testing.TB, def *agentdir.Agent) {
	t.Helper()
	spec, reg := def.Shared()
	if !reflect.DeepEqual(spec, def.Definition()) {
		t.Error("the run changed the shared agent definition")
	}
	if !reflect.DeepEqual(reg, def.Registry()) {
		t.Error("the run changed the shared steps registry")
	}
}

func load(t testing.TB, dir string) *agentdir.Agent {
	t.Helper()
	def, err := agentdir.LoadAndValidate(dir, ValidateOptions())
	if err != nil {
		t.Fatal(err)
	}
	return def
}

func TestLifecycleIsOneWayAndBuildFollowsSeedOrder(t *testing.T) {
	ctx := context.Background()
	def := load(t, basicAgent(t, twoIterationScript, ""))
	a, err := Build(ctx, def, BuildOptions{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.BuildOrder(), []string{"logger", "promptResolver", "completionHandler", "sdkBridge", "actionSystem"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("build order %v, want %v", got, want)
	}
	if a.State() != Created {
		t.Fatalf("state %s", a.State())
	}
	if r := a.Run(ctx); r.Error == nil || r.Error.Code != agenterr.CodeNotStarted {
		t.Fatalf("Run before Start: %+v", r)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); !errors.Is(err, agenterr.ErrAlreadyStarted) {
		t.Fatalf("second Start: %v", err)
	}
	res := a.Run(ctx)
	if !res.Success || res.Iterations != 2 || res.CompletionReason != "completed" {
		t.Fatalf("result %+v", res)
	}
	stopped := a.Stop()
	if a.State() != Stopped || stopped != a.Stop() {
		t.Fatal("Stop is not idempotent")
	}
	if err := a.Start(ctx); !errors.Is(err, agenterr.ErrAlreadyStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
}

func TestRunMapsParametersAndJournalsEverything(t *testing.T) {
	script := strings.Replace(twoIterationScript, "about boats", "about kites", 1)
	def := load(t, basicAgent(t, script, ""))
	wd := t.TempDir()
	res := runToEnd(t, def, BuildOptions{WorkDir: wd, Params: map[string]string{"topic": "kites"}})
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	if b, err := os.ReadFile(filepath.Join(wd, "notes.txt")); err != nil || string(b) != "boats float\n" {
		t.Fatalf("tool did not act: %q %v", b, err)
	}
	rec, err := LoadRun(res.RunID, res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Ended || rec.Result == nil || !rec.Result.Success || len(rec.Iterations) != 2 {
		t.Fatalf("record %+v", rec)
	}
	it := rec.Iterations[0]
	if !strings.Contains(it.Prompt, "write notes about kites") || it.PromptSource != filepath.Join("prompts", "steps", "initial", "work", "f_default.md") {
		t.Fatalf("prompt %q from %q", it.Prompt, it.PromptSource)
	}
	if it.Query == nil || len(it.Query.ToolUses) != 1 || it.Query.ToolUses[0].Name != "Write" {
		t.Fatalf("query %+v", it.Query)
	}
	// The undefined variable stays as-is and is warned about, never silently.
	if !strings.Contains(it.Prompt, "{uv-undefined_thing}") || !strings.Contains(strings.Join(rec.Warnings, "\n"), "undefined_thing") {
		t.Fatalf("undefined variable handling: %q warnings=%v", it.Prompt, rec.Warnings)
	}
	if rec.Start.Params["topic"] != "kites" {
		t.Fatalf("params not journaled: %+v", rec.Start)
	}
	if len(rec.Sessions[res.SessionID]) == 0 {
		t.Fatal("session transcript not journaled")
	}
}

func TestMissingRequiredParameterIsAUsageError(t *testing.T) {
	def := load(t, basicAgent(t, twoIterationScript, `"issue": {"type": "number", "description": "issue", "required": true}`))
	_, err := Build(context.Background(), def, BuildOptions{WorkDir: t.TempDir()})
	if !errors.Is(err, agenterr.ErrParamMissing) || !strings.Contains(err.Error(), "--issue") {
		t.Fatalf("err = %v", err)
	}
}

func TestUnknownProviderListsKnownOnes(t *testing.T) {
	def := load(t, basicAgent(t, twoIterationScript, ""))
	_, err := Build(context.Background(), def, BuildOptions{WorkDir: t.TempDir(), Model: "nope:x"})
	if !errors.Is(err, agenterr.ErrUnknownProvider) || !strings.Contains(err.Error(), "script") {
		t.Fatalf("err = %v", err)
	}
}

func TestScriptRunningOutIsAProviderError(t *testing.T) {
	def := load(t, basicAgent(t, "turns:\n  - text: nothing useful\n", ""))
	res := runToEnd(t, def, BuildOptions{WorkDir: t.TempDir()})
	// Iteration 2's model call had no reply: it never reached the model
	// and does not count.
	if res.Success || res.Error == nil || res.Error.Code != agenterr.CodeScriptExhausted || res.Iterations != 1 {
		t.Fatalf("%+v %+v", res, res.Error)
	}
}

func TestBudgetStopsWithoutCompletion(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("turns:\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&sb, "  - text: \"still working %d\"\n", i)
	}
	def := load(t, basicAgent(t, sb.String(), ""))
	res := runToEnd(t, def, BuildOptions{WorkDir: t.TempDir(), MaxIterations: 3})
	if res.Success || res.CompletionReason != "max_iterations" || res.Iterations != 3 || res.Error == nil || res.Error.Code != "BUDGET_EXCEEDED" {
		t.Fatalf("%+v", res)
	}
	events, _ := journal.ReadFile(res.Journal)
	if events[len(events)-1].Type != journal.LifecycleChange {
		t.Fatalf("journal not closed by Stop: last event %s", events[len(events)-1].Type)
	}
}

func TestDisallowedToolsAreNeverExecuted(t *testing.T) {
	dir := basicAgent(t, `turns:
  - tool_calls: [{name: Write, input: {file_path: forbidden.txt, content: "x"}}]
  - text: "could not write; ALL_DONE"
`, "")
	// Everything is allowed except Write.
	b, _ := os.ReadFile(filepath.Join(dir, "agent.json"))
	s := strings.Replace(string(b), `"boundaries": {"allowedTools": ["Read", "Write"], "permissionMode": "acceptEdits"}`,
		`"boundaries": {"allowedTools": ["*"], "disallowedTools": ["Write"], "permissionMode": "bypassPermissions"}`, 1)
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(s), 0o644)
	wd := t.TempDir()
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: wd})
	if !res.Success {
		t.Fatalf("%+v", res)
	}
	if _, err := os.Stat(filepath.Join(wd, "forbidden.txt")); !os.IsNotExist(err) {
		t.Fatalf("a disallowed Write ran: %v", err)
	}
	rec, _ := LoadRun(res.RunID, res.Journal)
	if len(rec.Iterations[0].Denied) != 1 || !strings.Contains(rec.Iterations[0].Denied[0].Output, "disallowedTools") {
		t.Fatalf("denial not journaled: %+v", rec.Iterations[0].Denied)
	}
}

func TestResumeContinuesTheSessionAndTheScript(t *testing.T) {
	ctx := context.Background()
	dir := basicAgent(t, `turns:
  - text: "part one"
  - expect: {prompt_contains: ["Iteration 2"]}
    text: "part two, ALL_DONE"
`, "")
	def, wd := load(t, dir), t.TempDir()
	// The first run stops at its iteration budget.
	first := runToEnd(t, def, BuildOptions{WorkDir: wd, MaxIterations: 1})
	if first.Success || first.CompletionReason != "max_iterations" {
		t.Fatalf("%+v", first)
	}
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	// Resuming continues in the same session with the next scripted turn.
	res := runToEnd(t, def, BuildOptions{WorkDir: wd, Resume: rec})
	if !res.Success || res.Iterations != 2 || res.RunID != first.RunID || res.SessionID != first.SessionID {
		t.Fatalf("resumed %+v (first %+v)", res, first)
	}
	if res.Usage.OutputTokens <= first.Usage.OutputTokens {
		t.Fatalf("usage did not carry over: %+v vs %+v", res.Usage, first.Usage)
	}
	// A completed run is not resumed again, and its journal is untouched.
	before, _ := os.ReadFile(res.Journal)
	rec2, _ := LoadRun(res.RunID, res.Journal)
	if _, err := Build(ctx, def, BuildOptions{WorkDir: wd, Resume: rec2}); !errors.Is(err, agenterr.ErrAlreadyStopped) {
		t.Fatalf("resuming a completed run: %v", err)
	}
	if after, _ := os.ReadFile(res.Journal); string(after) != string(before) {
		t.Fatal("refusing to resume wrote to the completed run's journal")
	}
}

// A run whose journal was edited after it was written (its hash chain
// broken: here an iteration's usage lowered and its step state changed)
// is not resumed by agent.New either — not only by the CLI — so an
// embedder or a Temporal worker never continues from a forged record.
func TestResumeRefusesAnEditedJournal(t *testing.T) {
	dir := basicAgent(t, `turns:
  - text: "part one"
    usage: {input_tokens: 1000, output_tokens: 10}
  - text: "part two, ALL_DONE"
`, "")
	def, wd := load(t, dir), t.TempDir()
	first := runToEnd(t, def, BuildOptions{WorkDir: wd, MaxIterations: 1})
	if first.Success {
		t.Fatalf("%+v", first)
	}
	b, err := os.ReadFile(first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `"input_tokens":1000`, `"input_tokens":1`, 1)
	if edited == string(b) {
		t.Fatal("the journal has no usage to edit")
	}
	if err := os.WriteFile(first.Journal, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(context.Background(), def, BuildOptions{WorkDir: wd, Resume: rec})
	if !errors.Is(err, journal.ErrBrokenChain) || !strings.Contains(err.Error(), "is not resumed") {
		t.Fatalf("resuming an edited journal: %v", err)
	}
	if after, _ := os.ReadFile(first.Journal); string(after) != edited {
		t.Fatal("the refused resume wrote to the journal")
	}
}

func TestPricingAndCostBudget(t *testing.T) {
	dir := basicAgent(t, `turns:
  - text: "one"
    usage: {input_tokens: 1000, output_tokens: 10}
  - text: "two"
    usage: {input_tokens: 1000, output_tokens: 10}
`, "")
	b, _ := os.ReadFile(filepath.Join(dir, "agent.json"))
	s := strings.Replace(string(b), `"budgets": {"maxIterations": 5}`,
		`"budgets": {"maxIterations": 5, "maxCostUsd": 0.0015}, "pricing": {"script.yaml": {"input": 1.0, "output": 5.0}}`, 1)
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte(s), 0o644)
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	// 1000 input at $1/M + 10 output at $5/M = $0.00105 per iteration: the
	// second iteration crosses $0.0015 and the run stops before a third.
	if res.Success || res.CompletionReason != "cost_budget" || res.Iterations != 2 {
		t.Fatalf("%+v", res)
	}
	if res.CostUSD < 0.0020 || res.CostUSD > 0.0022 {
		t.Fatalf("cost %.6f, want 0.0021", res.CostUSD)
	}
}

func TestFailedBuildLeavesNoRunBehind(t *testing.T) {
	def := load(t, basicAgent(t, twoIterationScript, ""))
	wd := t.TempDir()
	// The script file is missing: the bridge cannot be built.
	os.Remove(filepath.Join(def.Dir(), "script.yaml"))
	if _, err := Build(context.Background(), def, BuildOptions{WorkDir: wd}); err == nil {
		t.Fatal("built without a script")
	}
	store := journal.Store{Dir: t.TempDir()}
	if _, err := Build(context.Background(), def, BuildOptions{WorkDir: wd, Store: store}); err == nil {
		t.Fatal("built without a script")
	}
	if runs, err := store.List(wd); err != nil || len(runs) != 0 {
		t.Fatalf("a failed build left runs behind: %+v %v", runs, err)
	}
}

// A driver that steps a run, loses its last iteration's work and rewinds
// the record redoes that iteration under its number: the session continues
// from the kept iterations, the journal counts the redone iteration once,
// and a later reader of the journal rewinds it the same way.
func TestStepAndRewind(t *testing.T) {
	ctx := context.Background()
	dir := basicAgent(t, `turns:
  - text: "part one"
  - expect: {prompt_contains: ["Iteration 2"]}
    text: "part two"
  - expect: {prompt_contains: ["Iteration 3"]}
    text: "part three, ALL_DONE"
`, "")
	def, wd := load(t, dir), t.TempDir()
	a, err := Build(ctx, def, BuildOptions{WorkDir: wd, RunID: "run-stepped"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if res := a.Step(ctx); res != nil {
			t.Fatalf("step %d ended the run: %+v", i, res)
		}
		if p := a.Progress(); p.Iteration != i || p.Summary == nil || p.Outcome.Complete {
			t.Fatalf("after step %d: %+v", i, p)
		}
	}
	journalPath := a.JournalPath()
	a.Abandon() // as if its process died; no run.end
	rec, err := LoadRun("run-stepped", journalPath)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Ended || rec.FinishedIterations() != 2 {
		t.Fatalf("abandoned run: ended %v, %d iterations", rec.Ended, rec.FinishedIterations())
	}
	// Iteration 2's work was lost: continue after iteration 1.
	rec.Rewind(1)
	res := runToEnd(t, def, BuildOptions{WorkDir: wd, Resume: rec})
	// The script replays from the session: iteration 2 is redone with its
	// turn, then iteration 3 completes.
	if !res.Success || res.Iterations != 3 {
		t.Fatalf("rewound run: %+v", res)
	}
	again, err := LoadRun("run-stepped", journalPath)
	if err != nil {
		t.Fatal(err)
	}
	if again.FinishedIterations() != 3 || len(again.Iterations) != 3 || !again.Result.Success {
		t.Fatalf("journal after the rewind: %d finished, %d iterations, result %+v", again.FinishedIterations(), len(again.Iterations), again.Result)
	}
	for i, it := range again.Iterations {
		if it.Iteration != i+1 {
			t.Fatalf("journal iteration %d is numbered %d", i+1, it.Iteration)
		}
	}
	// The session holds each kept iteration's messages once: the redone
	// iteration's first attempt is not in it.
	if got := again.Sessions[again.Iterations[2].Summary.SessionID]; len(got) != 6 {
		t.Fatalf("the session has %d messages, want 2 per iteration: %+v", len(got), got)
	}
	// The rewound iteration's model turn was billed: it counts as unrecorded.
	if again.UnrecordedUsage.OutputTokens == 0 {
		t.Fatal("the usage of the rewound iteration is lost")
	}
}
