package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// resumeOnce resumes the run res from its journal.
func resumeOnce(t *testing.T, dir string, res *event.RunResult, opts BuildOptions) *event.RunResult {
	t.Helper()
	rec, err := LoadRun(res.RunID, res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	opts.Resume = rec
	return runToEnd(t, load(t, dir), opts)
}

// Turns that completed inside an iteration whose query then failed were
// billed: they count in the iteration's summary, the result and the
// budgets. The provider outage makes the iteration a redo (not counted):
// resume continues it from the tool-effect ledger.
func TestUsageOfAFailedIterationCounts(t *testing.T) {
	dir := basicAgent(t, `turns:
  - tool_calls: [{name: Write, input: {file_path: a.txt, content: "a"}}]
    usage: {input_tokens: 100, output_tokens: 20}
  - error: {type: connection, message: "stream dropped"}
`, "")
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	if res.Success || res.Error == nil || res.Error.Code != agenterr.CodeSdkConnection || !res.Error.Recoverable {
		t.Fatalf("%+v", res)
	}
	if res.Usage.InputTokens != 100 || res.Usage.OutputTokens != 20 || res.Iterations != 0 {
		t.Fatalf("result usage %+v over %d iterations, want 100/20 over 0 (a redo)", res.Usage, res.Iterations)
	}
	rec, err := LoadRun(res.RunID, res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if s := rec.Iterations[0].Summary; s == nil || s.Usage.InputTokens != 100 || len(s.ToolsUsed) != 1 {
		t.Fatalf("summary %+v", s)
	}
}

// An iteration whose query failed before any model turn (the provider
// was down) does not use the iteration budget: resuming while the
// provider is still down fails the same way every time, never with
// BUDGET_EXCEEDED, and once it is back the run finishes within the
// budget.
func TestIterationThatNeverReachedTheModelIsNotCounted(t *testing.T) {
	dir := basicAgent(t, "turns:\n  - error: {type: overloaded, message: \"down\"}\n", "")
	os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte("turns:\n  - text: \"ALL_DONE\"\n"), 0o644)
	wd := t.TempDir()
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: wd, MaxIterations: 1})
	for attempt := 0; attempt < 3; attempt++ {
		if res.Error == nil || res.Error.Code != agenterr.CodeSdkConnection || res.Iterations != 0 {
			t.Fatalf("attempt %d: %+v %+v", attempt, res, res.Error)
		}
		res = resumeOnce(t, dir, res, BuildOptions{WorkDir: wd, MaxIterations: 1})
	}
	res = resumeOnce(t, dir, res, BuildOptions{WorkDir: wd, MaxIterations: 1, Model: "script:ok.yaml"})
	if !res.Success || res.Iterations != 1 || res.Error != nil {
		t.Fatalf("after the provider came back: %+v %+v", res, res.Error)
	}
}

// Model turns of an iteration the run was killed in, and the summary
// requests that compacted its transcript, are in no summary; the resumed
// run still counts them.
func TestUsageOfAKilledIterationCountsAfterResume(t *testing.T) {
	dir, wd, first, w := killedInIterationTwo(t)
	// What a kill inside iteration 2 leaves: its start and a billed turn.
	w.Append(journal.IterationStart, nil)
	w.Append(journal.ModelTurn, event.ModelTurnEvent{Turn: 1, Usage: event.Usage{InputTokens: 500, OutputTokens: 50}})
	// The summary request that compacted the transcript before turn 2
	// was billed too.
	w.Append(journal.ContextCompacted, &event.CompactionEvent{Window: 1000, SummarizedMessages: 3,
		Usage: event.Usage{InputTokens: 300, OutputTokens: 30, CacheReadTokens: 7}})
	w.Close()
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if want := (event.Usage{InputTokens: 800, OutputTokens: 80, CacheReadTokens: 7}); rec.UnrecordedUsage != want {
		t.Fatalf("unrecorded %+v, want %+v", rec.UnrecordedUsage, want)
	}
	res := resumeOnce(t, dir, first, BuildOptions{WorkDir: wd, MaxIterations: 2})
	if !res.Success || res.Usage.InputTokens != 820 || res.Usage.OutputTokens != 82 || res.Usage.CacheReadTokens != 7 {
		t.Fatalf("resumed usage %+v, want 820/82/7 cache-read: %+v", res.Usage, res)
	}
}

// A state directory inside the work dir (capstan run in $HOME) is within
// the reach of the agent's file tools: the run says so.
func TestStateDirInsideTheWorkDirIsWarned(t *testing.T) {
	wd := t.TempDir()
	res := runToEnd(t, load(t, basicAgent(t, "turns:\n  - text: ALL_DONE\n", "")),
		BuildOptions{WorkDir: wd, Store: journal.Store{Dir: filepath.Join(wd, ".local", "state", "capstan")}})
	if !res.Success || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "inside the work dir") {
		t.Fatalf("%+v", res.Warnings)
	}
	if res := runToEnd(t, load(t, basicAgent(t, "turns:\n  - text: ALL_DONE\n", "")), BuildOptions{WorkDir: t.TempDir()}); len(res.Warnings) != 0 {
		t.Fatalf("warned with the state dir elsewhere: %q", res.Warnings)
	}
}

// A response's usage journaled as it began to stream (model.usage) counts
// once when the kill cut the response, in the attempt's unrecorded usage,
// even when a second kill came before the iteration ran again to its end;
// a turn that finished carries it in its own usage, so it is not counted
// twice.
func TestUsageOfAResponseInFlightCountsOnce(t *testing.T) {
	_, _, first, w := killedInIterationTwo(t)
	// Iteration 2: a turn that finished (its usage includes what its
	// start reported), then a response the kill cut while it streamed.
	w.Append(journal.IterationStart, nil)
	w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 1, Usage: event.Usage{InputTokens: 400, OutputTokens: 1}})
	w.Append(journal.ModelTurn, event.ModelTurnEvent{Turn: 1, Usage: event.Usage{InputTokens: 400, OutputTokens: 40}})
	w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 2, Usage: event.Usage{InputTokens: 500, OutputTokens: 1}})
	// A resume that was killed too, while its first response streamed.
	w.Append(journal.RunStart, RunStartEvent{Resumed: true, Iteration: 1})
	w.Append(journal.IterationStart, nil)
	w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 1, Usage: event.Usage{InputTokens: 600, OutputTokens: 2}})
	w.Close()
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if want := (event.Usage{InputTokens: 1500, OutputTokens: 43}); rec.UnrecordedUsage != want {
		t.Fatalf("unrecorded %+v, want %+v", rec.UnrecordedUsage, want)
	}
}

// A response that began to stream before its provider reported its usage
// (model.usage unreported: OpenAI-compatible servers report it in the
// last chunk) and that a kill cut is counted as unreported, once per
// response: the usage figures miss it, and the record says how many
// responses they miss. A response whose usage the stream then reported,
// or whose turn finished, is not.
func TestUsageOfAResponseCutBeforeItsUsageIsCountedUnreported(t *testing.T) {
	_, _, first, w := killedInIterationTwo(t)
	w.Append(journal.IterationStart, nil)
	// Reported in its last chunk, then its turn: counted in the turn.
	w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 1, Unreported: true})
	w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 1, Usage: event.Usage{InputTokens: 400, OutputTokens: 40}})
	w.Append(journal.ModelTurn, event.ModelTurnEvent{Turn: 1, Usage: event.Usage{InputTokens: 400, OutputTokens: 40}})
	// Reported in its last chunk, then the kill: counted exactly.
	w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 2, Unreported: true})
	w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 2, Usage: event.Usage{InputTokens: 500, OutputTokens: 50}})
	// A resume killed while its first response streamed, unreported.
	w.Append(journal.RunStart, RunStartEvent{Resumed: true, Iteration: 1})
	w.Append(journal.IterationStart, nil)
	w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 1, Unreported: true})
	// And another.
	w.Append(journal.RunStart, RunStartEvent{Resumed: true, Iteration: 1})
	w.Append(journal.IterationStart, nil)
	w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 1, Unreported: true})
	w.Close()
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if want := (event.Usage{InputTokens: 900, OutputTokens: 90}); rec.UnrecordedUsage != want || rec.UnreportedResponses != 2 {
		t.Fatalf("unrecorded %+v, unreported responses %d; want %+v and 2", rec.UnrecordedUsage, rec.UnreportedResponses, want)
	}
}

// killedInIterationTwo runs a two-turn agent's first iteration to its end
// (in the work dir wd) and returns its journal opened for appending what
// a kill in iteration 2 leaves, positioned there.
func killedInIterationTwo(t *testing.T) (dir, wd string, first *event.RunResult, w *journal.Writer) {
	t.Helper()
	dir = basicAgent(t, `turns:
  - text: "one"
    usage: {input_tokens: 10, output_tokens: 1}
  - text: "two ALL_DONE"
    usage: {input_tokens: 10, output_tokens: 1}
`, "")
	wd = t.TempDir()
	first = runToEnd(t, load(t, dir), BuildOptions{WorkDir: wd, MaxIterations: 1})
	w, err := journal.Append(first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	w.SetPosition(2, "initial.work")
	return dir, wd, first, w
}

// A step with a model of its own is priced at that model's price, also
// for what a kill left unrecorded: the response the kill cut while it
// streamed (model.usage after the step's query.start) counts at the
// step's price when the run is resumed, not the run's model's. A step
// model with no known price costs 0, never the run's model's price.
func TestUsageOfAKilledStepIsPricedAtTheStepsModel(t *testing.T) {
	for _, c := range []struct {
		name      string
		stepPrice string // runner.pricing entry of the step's model
		want      float64
	}{
		// $1 a token: iteration 1 (1 token), the cut response (5), iteration 2 (1).
		{"priced", `, "step.yaml": {"input": 1000000, "output": 0}`, 7},
		{"unpriced", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeAgent(t, map[string]string{
				"agent.json": `{"version": "1.0.0", "name": "step-model", "description": "a step with its own model",
  "runner": {"model": "script:run.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "pricing": {"run.yaml": {"input": 1, "output": 0}` + c.stepPrice + `}}}`,
				"steps_registry.json": `{"agentId": "step-model", "entryStep": "initial.work", "steps": {
    "initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work", "model": "script:step.yaml"}}}`,
				"prompts/steps/initial/work/f_default.md": "Work.",
				"run.yaml": "turns:\n  - text: ALL_DONE\n",
				"step.yaml": `turns:
  - text: "one"
    usage: {input_tokens: 1, output_tokens: 0}
  - text: "two ALL_DONE"
    usage: {input_tokens: 1, output_tokens: 0}
`,
			})
			wd := t.TempDir()
			first := runToEnd(t, load(t, dir), BuildOptions{WorkDir: wd, MaxIterations: 1})
			if first.CostUSD != c.want/7 {
				t.Fatalf("iteration 1 cost %v, want %v (the step's price)", first.CostUSD, c.want/7)
			}
			w, err := journal.Append(first.Journal)
			if err != nil {
				t.Fatal(err)
			}
			w.SetPosition(2, "initial.work")
			w.Append(journal.IterationStart, nil)
			w.Append(journal.QueryStart, event.QueryStartEvent{Model: "script:step.yaml"})
			w.Append(journal.ModelUsage, event.ModelUsageEvent{Turn: 1, Usage: event.Usage{InputTokens: 5}})
			w.Close()
			res := resumeOnce(t, dir, first, BuildOptions{WorkDir: wd, MaxIterations: 2})
			if !res.Success || res.Usage.InputTokens != 7 || res.CostUSD != c.want {
				t.Fatalf("resumed: success %v, %d input tokens, cost %v; want 7 tokens and %v: %+v", res.Success, res.Usage.InputTokens, res.CostUSD, c.want, res.Error)
			}
		})
	}
}
