package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

// TestCompletionHandlerAsAGoValue: an agent's completion handler can be a
// Go value (Config.Completion) used by runner.completion {"type":
// "custom"}; the runner's validators still verify what it reports.
// Giving one that runner.completion does not use is an error.
func TestCompletionHandlerAsAGoValue(t *testing.T) {
	dir := verdictAgent(t, `{"type": "custom", "validators": ["out-exists"]}`, `"onFailure": {"action": "retry", "maxAttempts": 3}`,
		"turns:\n  - text: \"DONE\"\n"+strings.TrimPrefix(honestScript, "turns:\n"))
	cfg := goValues(nil)
	cfg.Completion = &verdict.Keyword{Keyword: "DONE"}
	cfg, err := Load(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir = t.TempDir()
	res := runToEnd(t, cfg.Agent, cfg)
	if !res.Success || res.Iterations != 2 || !strings.Contains(res.Reason, "verified by out-exists") {
		t.Fatalf("%s %q after %d iterations: %v", res.CompletionReason, res.Reason, res.Iterations, res.Err())
	}

	// Without the value, the same definition is invalid: custom needs a handler.
	if _, err := Load(dir, goValues(nil)); err == nil || !strings.Contains(err.Error(), "AC-COMPLETION-HANDLER") {
		t.Fatalf("custom without handler or value: %v", err)
	}
	// A value that runner.completion does not use is refused, not ignored.
	unused := goValues(nil)
	unused.Completion = &verdict.Keyword{Keyword: "DONE"}
	_, err = Load(verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", liarScript), unused)
	if agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation || !strings.Contains(err.Error(), "agent.Config.Completion") {
		t.Fatalf("unused Config.Completion: %v", err)
	}
	// A handler name and a value at once is ambiguous.
	both := goValues(nil)
	both.Completion = &verdict.Keyword{Keyword: "DONE"}
	_, err = Load(verdictAgent(t, `{"type": "custom", "handler": "done", "validators": ["out-exists"]}`, "", liarScript), both)
	if err == nil || !strings.Contains(err.Error(), "AC-COMPLETION-HANDLER") {
		t.Fatalf("handler name and value: %v", err)
	}
}

// namedValidator passes when want is "pass".
type namedValidator struct{ want string }

func (v namedValidator) Validate(_ context.Context, req verify.CustomRequest) (verify.CustomResult, error) {
	return verify.CustomResult{Valid: v.want == "pass"}, nil
}

// TestPerAgentValuesShareNames: two agents of one process give the same
// validator and handler names different Go values; each runs its own.
func TestPerAgentValuesShareNames(t *testing.T) {
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "shared", "description": "d",
  "runner": {"model": "script:script.yaml", "completion": {"type": "custom", "handler": "shared-handler-test", "validators": ["v"]},
    "budgets": {"maxIterations": 1}}}`,
		"steps_registry.json": `{"agentId": "shared", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "s", "c3": "main"}},
  "validators": {"v": {"type": "custom", "handler": "shared-name-test", "failurePattern": "file-not-exists"}}}`,
		"prompts/steps/s/main/f_default.md": "Say DONE.",
		"script.yaml":                       "turns:\n  - text: DONE\n",
	})
	run := func(want string) *event.RunResult {
		cfg, err := Load(dir, Config{
			Validators: map[string]verify.CustomValidator{"shared-name-test": namedValidator{want: want}},
			CompletionHandlers: map[string]verdict.HandlerFactory{"shared-handler-test": func(agentdir.Completion, verdict.HandlerDeps) (verdict.CompletionHandler, error) {
				return &verdict.Keyword{Keyword: "DONE"}, nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg.WorkDir = t.TempDir()
		return runToEnd(t, cfg.Agent, cfg)
	}
	if pass, fail := run("pass"), run("fail"); !pass.Success || fail.Success {
		t.Fatalf("pass: %s %q; fail: %s %q", pass.CompletionReason, pass.Reason, fail.CompletionReason, fail.Reason)
	}
}
