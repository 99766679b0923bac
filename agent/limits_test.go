package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/tool"
)

// limitsAgent is a one-step agent that never says its keyword. budgets is
// the JSON of runner.budgets, extraRunner more runner members, registry
// more members of steps_registry.json and check the step's check.
func limitsAgent(t *testing.T, script, budgets, extraRunner, registry, check string) string {
	t.Helper()
	if extraRunner != "" {
		extraRunner = ", " + extraRunner
	}
	if registry != "" {
		registry = ", " + registry
	}
	if check != "" {
		check = `, "check": ` + check
	}
	return writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "limits", "description": "test agent",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "NEVER_SAID"},
    "boundaries": {"allowedTools": ["Read", "Write", "wait"], "permissionMode": "acceptEdits"},
    "budgets": ` + budgets + `,
    "pricing": {"script.yaml": {"input": 1.0, "output": 5.0}}` + extraRunner + `}}`,
		"steps_registry.json": `{"agentId": "limits", "c1": "steps", "entryStep": "a"` + registry + `,
  "steps": {"a": {"stepId": "a", "c2": "s", "c3": "a"` + check + `}}}`,
		"prompts/steps/s/a/f_default.md": "Work.",
		"script.yaml":                    script,
	})
}

// waitTool takes 2 s, like a slow command, unless its context ends first.
var waitTool = tool.Func("wait", "Wait.", func(ctx context.Context, _ struct{}) (string, error) {
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(2 * time.Second):
		return "waited", nil
	}
})

// TestConfigLimitsActLikeTheFiles: every limit agent.Config can set acts
// exactly as the same limit in agent.json or steps_registry.json — the same
// ending, the same iterations, the same journal — and differs from the run
// without it.
func TestConfigLimitsActLikeTheFiles(t *testing.T) {
	many := "turns:\n" + strings.Repeat("  - text: working\n    usage: {input_tokens: 1000, output_tokens: 10}\n", 6)
	tools := "turns:\n" + strings.Repeat("  - tool_calls: [{name: Read, input: {file_path: x}}]\n", 4) + "  - text: read\n"
	cases := []struct {
		name string
		// script of the model; unlimited/limited are the files without and
		// with the limit; cfg sets the same limit in Go.
		script                                      string
		budgets, runner, registry, check            string
		limBudgets, limRunner, limRegistry, limChec string
		cfg                                         Config
		reason                                      string
	}{
		{name: "maxIterations", script: many, budgets: `{"maxIterations": 5}`, limBudgets: `{"maxIterations": 2}`,
			cfg: Config{MaxIterations: 2}, reason: "max_iterations"},
		{name: "maxTokens", script: many, budgets: `{"maxIterations": 5}`, limBudgets: `{"maxIterations": 5, "maxTokens": 2500}`,
			cfg: Config{MaxTokens: 2500}, reason: "token_budget"},
		{name: "maxCostUsd", script: many, budgets: `{"maxIterations": 5}`, limBudgets: `{"maxIterations": 5, "maxCostUsd": 0.0015}`,
			cfg: Config{MaxCostUSD: 0.0015}, reason: "cost_budget"},
		{name: "timeout", script: "turns:\n  - tool_calls: [{name: wait, input: {}}]\n  - text: waited\n",
			budgets: `{"maxIterations": 1}`, limBudgets: `{"maxIterations": 1, "timeoutSeconds": 1}`,
			cfg: Config{RunTimeout: time.Second}, reason: "time_budget"},
		{name: "maxTurns", script: tools, budgets: `{"maxIterations": 1}`, limBudgets: `{"maxIterations": 1}`,
			limRunner: `"boundaries": {"allowedTools": ["Read"], "permissionMode": "acceptEdits", "maxTurns": 2}`,
			runner:    `"boundaries": {"allowedTools": ["Read"], "permissionMode": "acceptEdits"}`,
			cfg:       Config{MaxTurns: 2}, reason: "error"},
		{name: "stepLoopLimit", script: many, budgets: `{"maxIterations": 5}`, limBudgets: `{"maxIterations": 5}`,
			check:    `{"type": "keyword", "keywords": ["working"], "onPass": {"next": "a"}, "onFail": {"next": "a"}}`,
			limChec:  `{"type": "keyword", "keywords": ["working"], "onPass": {"next": "a"}, "onFail": {"next": "a"}}`,
			registry: `"stepLoopLimit": 10`, limRegistry: `"stepLoopLimit": 2`,
			cfg: Config{StepLoopLimit: 2}, reason: "step_loop_limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// runner members replace boundaries when given: drop the
			// default boundaries then.
			agentDir := func(budgets, runner, registry, check string) string {
				dir := limitsAgent(t, tc.script, budgets, "", registry, check)
				if runner != "" {
					rewrite(t, dir, "agent.json", `"boundaries": {"allowedTools": ["Read", "Write", "wait"], "permissionMode": "acceptEdits"}`, runner)
				}
				return dir
			}
			run := func(dir string, cfg Config) (*event.RunResult, []string) {
				cfg.WorkDir = t.TempDir()
				cfg.Tools = []tool.Tool{waitTool}
				res := runToEnd(t, load(t, dir), cfg)
				events, err := journal.ReadFile(res.Journal)
				if err != nil {
					t.Fatal(err)
				}
				var types []string
				for _, e := range events {
					if e.Type != journal.RunStart && e.Type != journal.RunEnd {
						types = append(types, e.Type)
					}
				}
				return res, types
			}
			story := func(r *event.RunResult) string {
				return fmt.Sprintf("%s %q iterations=%d error=%s", r.CompletionReason, r.Reason, r.Iterations, agenterr.CodeOf(r.Err()))
			}
			base := agentDir(tc.budgets, tc.runner, tc.registry, tc.check)
			unlimited, _ := run(base, Config{})
			fromFile, fileEvents := run(agentDir(tc.limBudgets, tc.limRunner, tc.limRegistry, tc.limChec), Config{})
			fromGo, goEvents := run(base, tc.cfg)
			if fromFile.CompletionReason != tc.reason {
				t.Fatalf("the limit in the files ended the run with %s", story(fromFile))
			}
			if story(unlimited) == story(fromFile) {
				t.Fatalf("the limit changes nothing: %s", story(unlimited))
			}
			if story(fromGo) != story(fromFile) || strings.Join(goEvents, " ") != strings.Join(fileEvents, " ") {
				t.Fatalf("Config.%s acts differently from the files:\nfiles: %s\n%v\nGo:    %s\n%v", tc.name, story(fromFile), fileEvents, story(fromGo), goEvents)
			}
		})
	}
}

// TestConfigLimitsMustNotBeNegative: a negative limit is a configuration
// error naming the field.
func TestConfigLimitsMustNotBeNegative(t *testing.T) {
	def := load(t, limitsAgent(t, "turns:\n  - text: x\n", `{"maxIterations": 1}`, "", "", ""))
	_, err := New(context.Background(), Config{Agent: def, WorkDir: t.TempDir(), MaxTokens: -1, StepLoopLimit: -2})
	if agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation || !strings.Contains(err.Error(), "MaxTokens, StepLoopLimit") {
		t.Fatalf("err = %v", err)
	}
}

// rewrite replaces old by new in the agent file name of dir.
func rewrite(t *testing.T, dir, name, old, new string) {
	t.Helper()
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err != nil || !strings.Contains(string(b), old) {
		t.Fatalf("%s: %q not found (%v)", name, old, err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNoScriptedReplyForARetryIsTheVerdictsFailure: a scripted model that
// claimed completion and has no reply left for the retry prompt ends the
// run as a failed verification (exit 1), the script's error in the chain;
// a provider failure on the retry stays a provider failure.
func TestNoScriptedReplyForARetryIsTheVerdictsFailure(t *testing.T) {
	step := `"onFailure": {"action": "retry", "maxAttempts": 3}`
	completion := `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`
	res, _ := runVerdict(t, verdictAgent(t, completion, step, "turns:\n  - text: \"DONE\"\n"), nil)
	err := res.Err()
	if res.Success || res.CompletionReason != ReasonValidationExhausted || !errors.Is(err, agenterr.ErrValidationExhausted) ||
		!errors.Is(err, agenterr.ErrScriptExhausted) || !strings.Contains(res.Reason, "attempt 1 of 3") || res.Iterations != 1 {
		t.Fatalf("%s %q iterations %d: %v", res.CompletionReason, res.Reason, res.Iterations, err)
	}
	res, _ = runVerdict(t, verdictAgent(t, completion, step, "turns:\n  - text: \"DONE\"\n  - error: {type: auth, message: bad key}\n"), nil)
	if res.CompletionReason == ReasonValidationExhausted || errors.Is(res.Err(), agenterr.ErrValidationExhausted) {
		t.Fatalf("a provider failure became %s: %v", res.CompletionReason, res.Err())
	}
	// Without a pending retry, a script running out stays SCRIPT_EXHAUSTED.
	res, _ = runVerdict(t, verdictAgent(t, completion, step, "turns:\n  - text: \"working\"\n"), nil)
	if agenterr.CodeOf(res.Err()) != agenterr.CodeScriptExhausted {
		t.Fatalf("%s: %v", res.CompletionReason, res.Err())
	}
}

// TestAgentsWithTheSameLimitsShareOneCopy: agents of one definition whose
// Config sets the same limits read one copy of it with the limits written
// over, other limits another, and the definition every agent shares keeps
// its own limits.
func TestAgentsWithTheSameLimitsShareOneCopy(t *testing.T) {
	ctx := context.Background()
	def := load(t, limitsAgent(t, "turns:\n  - text: working\n", `{"maxIterations": 5}`, "", `"stepLoopLimit": 4`, ""))
	build := func(cfg BuildOptions) *Agent {
		t.Helper()
		cfg.WorkDir = t.TempDir()
		a, err := Build(ctx, def, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Stop() })
		return a
	}
	a1 := build(BuildOptions{MaxIterations: 2, StepLoopLimit: 3})
	a2 := build(BuildOptions{MaxIterations: 2, StepLoopLimit: 3})
	a3 := build(BuildOptions{MaxIterations: 2, MaxTurns: 7})
	plain := build(BuildOptions{})
	shared, sharedReg := def.Shared()
	if a1.spec != a2.spec || a1.reg != a2.reg {
		t.Error("two agents with the same limits read two copies of the definition")
	}
	if a3.spec == a1.spec || a1.spec == shared || plain.spec != shared || plain.reg != sharedReg {
		t.Error("an agent reads a definition with other limits than its own")
	}
	if b := a1.spec.Runner.Budgets; b.MaxIterations != 2 || a1.reg.StepLoopLimit != 3 || a1.spec.Runner.Boundaries.MaxTurns != 0 {
		t.Errorf("limits of the first agents: %+v, stepLoopLimit %d, maxTurns %d", b, a1.reg.StepLoopLimit, a1.spec.Runner.Boundaries.MaxTurns)
	}
	if a3.spec.Runner.Boundaries.MaxTurns != 7 || a3.reg.StepLoopLimit != 4 {
		t.Errorf("limits of the third agent: maxTurns %d, stepLoopLimit %d", a3.spec.Runner.Boundaries.MaxTurns, a3.reg.StepLoopLimit)
	}
	if shared.Runner.Budgets.MaxIterations != 5 || sharedReg.StepLoopLimit != 4 || shared.Runner.Boundaries.MaxTurns != 0 {
		t.Error("limits given in Go changed the shared definition")
	}
	// Agents built at once share the copy too.
	var wg sync.WaitGroup
	concurrent := make([]*Agent, 4)
	for i := range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := Build(ctx, def, BuildOptions{WorkDir: t.TempDir(), MaxIterations: 3})
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { a.Stop() })
			concurrent[i] = a
		}()
	}
	wg.Wait()
	for _, a := range concurrent {
		if a != nil && (a.spec != concurrent[0].spec || a.spec.Runner.Budgets.MaxIterations != 3) {
			t.Error("agents built at once with the same limits read different copies")
		}
	}
	assertSharedUnchanged(t, def)
	if _, err := Build(ctx, def, BuildOptions{WorkDir: t.TempDir(), MaxIterations: 2, MaxTurns: -1}); agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation {
		t.Errorf("a negative limit next to a positive one: %v", err)
	}
}
