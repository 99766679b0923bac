package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

// verdictAgent is a one-step agent whose runner.completion is completionJS
// and whose step s.main has the extra fields stepJS ("" = none). The
// registry declares the file validator out-exists (out.txt, pattern
// out-missing, with a retry prompt) and the Go validator counted (handler
// "counting", given per agent).
func verdictAgent(t *testing.T, completionJS, stepJS, script string) string {
	t.Helper()
	if stepJS != "" {
		stepJS = ", " + stepJS
	}
	return writeAgent(t, map[string]string{
		"agent.json": `{
  "version": "1.0.0", "name": "verdict", "description": "verdict test agent",
  "runner": {
    "model": "script:script.yaml",
    "completion": ` + completionJS + `,
    "boundaries": {"allowedTools": ["Write"], "permissionMode": "acceptEdits"},
    "budgets": {"maxIterations": 6}
  }
}`,
		"steps_registry.json": `{
  "agentId": "verdict", "version": "1.0.0", "c1": "steps", "entryStep": "s.main",
  "steps": {"s.main": {"stepId": "s.main", "name": "main", "c2": "s", "c3": "main", "edition": "default"` + stepJS + `}},
  "completionPatterns": {"out-missing": {"description": "out.txt missing", "edition": "failed", "adaptation": "out-missing"}},
  "validators": {
    "out-exists": {"type": "file", "path": "out.txt", "failurePattern": "out-missing"},
    "counted": {"type": "custom", "handler": "counting", "failurePattern": "out-missing"}
  }
}`,
		"prompts/steps/s/main/f_default.md":            "Write out.txt, then say DONE.\n",
		"prompts/steps/s/main/f_failed_out-missing.md": "out.txt is missing. Write it, then say DONE.\n",
		"script.yaml": script,
	})
}

// Scripts: a model that only claims to be done, and one that does the work.
const (
	liarScript   = "turns:\n  - text: \"DONE\"\n  - text: \"DONE\"\n  - text: \"DONE\"\n"
	honestScript = "turns:\n  - text: \"writing\"\n    tool_calls:\n      - name: Write\n        input: {file_path: out.txt, content: \"x\\n\"}\n  - text: \"DONE\"\n"
)

// fakeGH puts a gh on PATH that reports every issue CLOSED.
func fakeGH(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "gh"), []byte("#!/bin/sh\necho '{\"state\":\"CLOSED\"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("GH_REPO", "octo/repo")
}

// doneHandler is a per-agent custom completion handler: complete when the
// response says DONE.
func doneHandler(agentdir.Completion, verdict.HandlerDeps) (verdict.CompletionHandler, error) {
	return &verdict.Keyword{Keyword: "DONE"}, nil
}

// countingValidator is a per-agent Go validator that counts its runs and
// passes when out.txt exists.
type countingValidator struct{ runs atomic.Int32 }

func (v *countingValidator) Validate(_ context.Context, req verify.CustomRequest) (verify.CustomResult, error) {
	v.runs.Add(1)
	_, err := os.Stat(filepath.Join(req.WorkDir, "out.txt"))
	return verify.CustomResult{Valid: err == nil, Output: event.ValidatorOutput{Stderr: fmt.Sprint(err)}}, nil
}

// runVerdict validates, builds and runs the agent in dir, returning the
// result and the journal.
func runVerdict(t *testing.T, dir string, cv *countingValidator) (*event.RunResult, []journal.Event) {
	t.Helper()
	if cv == nil {
		cv = &countingValidator{}
	}
	cfg, err := Load(dir, goValues(cv))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir = t.TempDir()
	res := runToEnd(t, cfg.Agent, cfg)
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

// goValues are the per-agent Go values of the verdict agent.
func goValues(cv *countingValidator) Config {
	return Config{Validators: map[string]verify.CustomValidator{"counting": cv},
		CompletionHandlers: map[string]verdict.HandlerFactory{"done": doneHandler}}
}

// stepFlowCheck completes the step flow when the response says DONE.
const stepFlowCheck = `"check": {"type": "keyword", "keywords": ["DONE"], "onPass": {"complete": true}, "onFail": {"retry": true}}, "retry": {"maxRetries": 5}`

// completionTypes are one runner.completion per type, each claiming
// completion when the model says DONE (or, for iterationBudget and
// externalState, on every iteration), each with validators.
var completionTypes = []struct{ typ, js, step string }{
	{"keyword", `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, ""},
	{"iterationBudget", `{"type": "iterationBudget", "maxIterations": 1, "validators": ["out-exists"]}`, ""},
	{"stepFlow", `{"type": "stepFlow", "validators": ["out-exists"]}`, stepFlowCheck},
	{"structured", `{"type": "structured", "keyword": "DONE", "validators": ["out-exists"]}`, ""},
	{"composite", `{"type": "composite", "mode": "any", "conditions": [{"type": "keyword", "keyword": "DONE"}], "validators": ["out-exists"]}`, ""},
	{"externalState", `{"type": "externalState", "options": {"number": 7}, "validators": ["out-exists"]}`, ""},
	{"custom", `{"type": "custom", "handler": "done", "validators": ["out-exists"]}`, ""},
}

// TestValidatorsVerifyEveryCompletionType: whatever claims completion, the
// run's validators decide. A model that only claims ends
// validation_exhausted after onFailure's attempts, with the retry prompt
// between them; a model that does the work completes, verified.
func TestValidatorsVerifyEveryCompletionType(t *testing.T) {
	fakeGH(t)
	onFailure := `"onFailure": {"action": "retry", "maxAttempts": 2}`
	for _, ct := range completionTypes {
		t.Run(ct.typ, func(t *testing.T) {
			step := onFailure
			if ct.step != "" {
				step += ", " + ct.step
			}
			res, events := runVerdict(t, verdictAgent(t, ct.js, step, liarScript), nil)
			if res.Success || res.CompletionReason != ReasonValidationExhausted || !errors.Is(res.Err(), agenterr.ErrValidationExhausted) {
				t.Fatalf("liar: %+v", res)
			}
			retries := eventsOf[event.RetryPromptEvent](t, events, journal.RetryPrompt)
			if len(retries) != 1 || retries[0].Pattern != "out-missing" || retries[0].Attempt != 1 || retries[0].Max != 2 ||
				!strings.Contains(retries[0].Text, "out.txt is missing") {
				t.Fatalf("liar retry prompts: %+v", retries)
			}

			res, _ = runVerdict(t, verdictAgent(t, ct.js, step, honestScript), nil)
			if !res.Success || !strings.Contains(res.Reason, "verified by out-exists") {
				t.Fatalf("honest: %+v", res)
			}
		})
	}
}

// TestEveryCompletionFieldActsOrIsRejected walks every completion type ×
// every field of runner.completion. A field the type reads is shown acting
// by TestValidatorsVerifyEveryCompletionType (validators on every type,
// keyword on keyword and structured, maxIterations, mode and conditions,
// options of externalState, handler) or by the completion package's tests;
// every other combination is a located validate error.
func TestEveryCompletionFieldActsOrIsRejected(t *testing.T) {
	fields := map[string]string{
		"keyword":       `"K"`,
		"maxIterations": `2`,
		"mode":          `"any"`,
		"conditions":    `[{"type": "stepFlow"}]`,
		"handler":       `"done"`,
		"options":       `{"x": 1}`,
		"name":          `"n"`,
		"validators":    `["out-exists"]`,
	}
	reads := map[string][]string{
		"keyword":         {"keyword", "validators"},
		"iterationBudget": {"maxIterations", "validators"},
		"stepFlow":        {"validators"},
		"structured":      {"keyword", "options", "validators"},
		"composite":       {"mode", "conditions", "validators"},
		"externalState":   {"options", "validators"},
		"custom":          {"handler", "options", "validators"},
	}
	for _, ct := range completionTypes {
		var base map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ct.js), &base); err != nil {
			t.Fatal(err)
		}
		for field, val := range fields {
			if slices.Contains(reads[ct.typ], field) {
				continue
			}
			comp := map[string]json.RawMessage{}
			for k, v := range base {
				comp[k] = v
			}
			comp[field] = json.RawMessage(val)
			js, _ := json.Marshal(comp)
			dir := verdictAgent(t, string(js), ct.step, liarScript)
			res := agentdir.Check(dir, ValidateOptionsFor(goValues(nil)))
			ptr := "/runner/completion/" + field
			found := false
			for _, p := range res.Errors() {
				found = found || (p.File == agentdir.AgentFile && p.Pointer == ptr && p.Hint != "")
			}
			if !found {
				t.Errorf("%s with %s: no located error at %s; got %v", ct.typ, field, ptr, res.Problems())
			}
		}
	}
}

// TestStepCompletionSettings: a step's completionConditions and onFailure
// (action retry with maxAttempts, abort, skip) each change the outcome.
func TestStepCompletionSettings(t *testing.T) {
	kw := `{"type": "keyword", "keyword": "DONE"}`
	cases := []struct {
		name, step, script string
		success            bool
		reason             string
		retries            int
	}{
		{"no conditions: the claim completes", ``, liarScript, true, ReasonCompleted, 0},
		{"completionConditions verify", `"completionConditions": [{"validator": "out-exists"}]`, honestScript, true, ReasonCompleted, 0},
		{"completionConditions reject the claim", `"completionConditions": [{"validator": "out-exists"}]`, liarScript, false, ReasonValidationExhausted, 2},
		{"maxAttempts bounds the attempts", `"completionConditions": [{"validator": "out-exists"}], "onFailure": {"action": "retry", "maxAttempts": 1}`, liarScript, false, ReasonValidationExhausted, 0},
		{"abort ends at the first failure", `"completionConditions": [{"validator": "out-exists"}], "onFailure": {"action": "abort"}`, liarScript, false, "aborted", 0},
		{"skip accepts the failure", `"completionConditions": [{"validator": "out-exists"}], "onFailure": {"action": "skip"}`, liarScript, true, ReasonCompleted, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, events := runVerdict(t, verdictAgent(t, kw, c.step, c.script), nil)
			if res.Success != c.success || res.CompletionReason != c.reason {
				t.Fatalf("%+v", res)
			}
			if n := len(eventsOf[event.RetryPromptEvent](t, events, journal.RetryPrompt)); n != c.retries {
				t.Fatalf("%d retry prompts, want %d", n, c.retries)
			}
		})
	}
}

// TestValidatorRunsOncePerIteration: a validator named by
// runner.completion.validators and by the step's completionConditions runs
// once per iteration.
func TestValidatorRunsOncePerIteration(t *testing.T) {
	cv := &countingValidator{}
	res, events := runVerdict(t, verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["counted", "out-exists"]}`,
		`"completionConditions": [{"validator": "counted"}, {"validator": "out-exists"}, {"validator": "counted"}]`, honestScript), cv)
	if !res.Success || res.Iterations != 1 {
		t.Fatalf("%+v", res)
	}
	if n := cv.runs.Load(); n != 1 {
		t.Fatalf("counted ran %d times in one iteration", n)
	}
	var ran []string
	for _, ev := range eventsOf[event.ValidatorEvent](t, events, journal.ValidatorResult) {
		ran = append(ran, ev.Validator)
	}
	if strings.Join(ran, ",") != "counted,out-exists" {
		t.Fatalf("validator runs %v", ran)
	}
}

// TestVerdictFactsAgree: the completion.check event, the retry prompt, the
// iteration's outcome and the Result tell the same story, attempt numbers
// included; the journal never claims "no verification" while validators ran.
func TestVerdictFactsAgree(t *testing.T) {
	res, events := runVerdict(t, verdictAgent(t, `{"type": "structured", "keyword": "DONE", "validators": ["out-exists"]}`,
		`"onFailure": {"action": "retry", "maxAttempts": 3}`, liarScript), nil)
	if res.CompletionReason != ReasonValidationExhausted {
		t.Fatalf("%+v", res)
	}
	checks := eventsOf[struct {
		Complete bool     `json:"complete"`
		Reason   string   `json:"reason"`
		Verdict  string   `json:"verdict"`
		Verified []string `json:"verified"`
	}](t, events, journal.CompletionCheck)
	retries := eventsOf[event.RetryPromptEvent](t, events, journal.RetryPrompt)
	if len(checks) != 3 || len(retries) != 2 {
		t.Fatalf("%d checks, %d retries", len(checks), len(retries))
	}
	var outcomes []string
	for _, ev := range events {
		if ev.Type == journal.IterationEnd {
			var it struct {
				Outcome struct{ Reason string } `json:"outcome"`
			}
			_ = json.Unmarshal(ev.Data, &it)
			outcomes = append(outcomes, it.Outcome.Reason)
		}
	}
	for i, c := range checks {
		if c.Complete || !slices.Equal(c.Verified, []string{"out-exists"}) || strings.Contains(c.Reason, "no verification") {
			t.Errorf("check %d: %+v", i, c)
		}
		if c.Reason != outcomes[i] {
			t.Errorf("check %d says %q, iteration outcome %q", i, c.Reason, outcomes[i])
		}
		if i < 2 {
			want := fmt.Sprintf("attempt %d of 3 failed", i+1)
			if c.Verdict != "retry" || !strings.Contains(c.Reason, want) || retries[i].Attempt != i+1 || retries[i].Max != 3 {
				t.Errorf("attempt %d: check %+v, retry attempt %d/%d", i+1, c, retries[i].Attempt, retries[i].Max)
			}
		}
	}
	if checks[2].Verdict != "stop" || !strings.Contains(res.Error.Message, "after 3 attempts") {
		t.Errorf("last check %+v, result %+v", checks[2], res.Error)
	}
}

// TestStepTransitionWaitsForTheVerdict: a step whose check completes the
// step flow stays where it was when verification fails (nothing is
// committed, so nothing is rolled back), and moves once the world agrees.
func TestStepTransitionWaitsForTheVerdict(t *testing.T) {
	res, events := runVerdict(t, verdictAgent(t, `{"type": "stepFlow", "validators": ["out-exists"]}`, stepFlowCheck,
		"turns:\n  - text: \"DONE\"\n  - text: \"writing\"\n    tool_calls:\n      - name: Write\n        input: {file_path: out.txt, content: \"x\"}\n  - text: \"DONE\"\n"), nil)
	if !res.Success || res.Iterations != 2 {
		t.Fatalf("%+v", res)
	}
	var moves []journal.Event
	for _, ev := range events {
		if ev.Type == journal.StepTransition {
			moves = append(moves, ev)
		}
	}
	// Iteration 1's completing move was never committed; iteration 2's is.
	if len(moves) != 1 || moves[0].Iteration != 2 {
		t.Fatalf("step transitions %+v", moves)
	}
}

func eventsOf[T any](t *testing.T, events []journal.Event, typ string) []T {
	t.Helper()
	var out []T
	for _, ev := range events {
		if ev.Type != typ {
			continue
		}
		var v T
		if err := json.Unmarshal(ev.Data, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestRunValidatorsNeedTheirRetryPrompts: a runner.completion validator
// can fail in any step, so validate asks every step for its failure
// pattern's retry prompt, as it does for completionConditions.
func TestRunValidatorsNeedTheirRetryPrompts(t *testing.T) {
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", liarScript)
	if err := os.Remove(filepath.Join(dir, "prompts/steps/s/main/f_failed_out-missing.md")); err != nil {
		t.Fatal(err)
	}
	for _, p := range agentdir.Check(dir, ValidateOptionsFor(goValues(nil))).Errors() {
		if p.Code == CodeRetryPromptMissing && p.File == agentdir.AgentFile && p.Pointer == "/runner/completion/validators/0" &&
			strings.Contains(p.Message, "step s.main") {
			return
		}
	}
	t.Fatal("no SR-RETRY-PROMPT-MISSING for the run's validator")
}

// TestValidateReportsOneCauseOnce: the builder run by validate finds what
// the configuration rules found too; the problem is reported once, with
// the rule's specific code.
func TestValidateReportsOneCauseOnce(t *testing.T) {
	dir := verdictAgent(t, `{"type": "composite", "conditions": [{"type": "stepFlow"}]}`, "", liarScript)
	var at []string
	for _, p := range agentdir.Check(dir, ValidateOptionsFor(goValues(nil))).Errors() {
		if strings.HasPrefix(p.Pointer, "/runner/completion") {
			at = append(at, p.Code+" "+p.Pointer)
		}
	}
	if len(at) != 1 || at[0] != "AC-COMPLETION-MODE /runner/completion/mode" {
		t.Fatalf("problems %v", at)
	}
}
