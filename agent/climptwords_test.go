package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

func warningOf(t *testing.T, def *agentdir.Agent, code string) string {
	t.Helper()
	for _, w := range def.Warnings() {
		if w.Code == code {
			return w.Message
		}
	}
	t.Fatalf("no %s among %v", code, def.Warnings())
	return ""
}

// keywordAgent is a one-step agent completing on ALL_DONE.
func keywordAgent(t *testing.T, maxIterations int, tools, script string) string {
	return writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "kw", "description": "test agent",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ` + tools + `, "permissionMode": "acceptEdits"},
    "budgets": {"maxIterations": ` + fmt.Sprint(maxIterations) + `}}}`,
		"steps_registry.json": `{"agentId": "kw", "c1": "steps", "entryStep": "initial.work",
  "steps": {"initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work"}}}`,
		"prompts/steps/initial/work/f_default.md": "Work.",
		"script.yaml": script,
	})
}

// AC-BUDGET-HARD-LIMIT says what a run does: with maxIterations 150 a run
// that has not completed stops at iteration 100 with emergency_stop.
func TestHardLimitWarningSaysWhatTheRunDoes(t *testing.T) {
	def := load(t, keywordAgent(t, 150, `["Read"]`, "turns:\n"+strings.Repeat("  - text: \"still working\"\n", 101)))
	msg := warningOf(t, def, "AC-BUDGET-HARD-LIMIT")
	res := runToEnd(t, def, BuildOptions{WorkDir: t.TempDir()})
	if res.Iterations != 100 || res.CompletionReason != ReasonEmergencyStop || !strings.Contains(msg, res.CompletionReason) || !strings.Contains(msg, "100") {
		t.Fatalf("run %s after %d iterations; warning %q", res.CompletionReason, res.Iterations, msg)
	}
}

// SR-INERT-FIELD for fallbackIntent under failFast says what happens
// instead: format retries, then STEP_INTENT.
func TestFallbackIntentWarningSaysWhatTheRunDoes(t *testing.T) {
	reg, schemas := oneStepFlow(map[string]any{"fallbackIntent": "handoff"})
	script := "turns:\n  - structured: {status: working}\n  - structured: {status: working}\n  - structured: {status: working}\n"
	def := load(t, routedAgent(t, reg, schemas, nil, script))
	msg := warningOf(t, def, "SR-INERT-FIELD")
	res := runToEnd(t, def, BuildOptions{WorkDir: t.TempDir()})
	if res.Error == nil || res.Error.Code != agenterr.CodeStepIntent || !strings.Contains(msg, agenterr.CodeStepIntent) ||
		!strings.Contains(msg, "format retry") || !strings.Contains(msg, "default 3") || res.Iterations != 3 {
		t.Fatalf("run %+v; warning %q", res.Error, msg)
	}
}

// Claude-Code-only tools in allowedTools are reported for a backend whose
// tool loop is capstan's (script, API models), and not for claude-code.
func TestClaudeCodeOnlyToolsAreReported(t *testing.T) {
	dir := keywordAgent(t, 3, `["Read", "Task", "WebFetch(domain:example.com)"]`, "turns:\n  - text: \"ALL_DONE\"\n")
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	found := false
	for _, w := range res.Warnings {
		found = found || strings.Contains(w, "allowedTools names Task, WebFetch, which only the Claude Code backend")
	}
	if !res.Success || !found {
		t.Fatalf("%+v warnings %q", res.Error, res.Warnings)
	}
	if got := claudeCodeOnlyTools([]string{"Read", "Bash(go test:*)", "mcp__github__x"}); len(got) != 0 {
		t.Fatalf("%v", got)
	}
	if runsOwnToolLoop("script:x.yaml") || !runsOwnToolLoop("claude-code:sonnet") {
		t.Fatal("backend classification")
	}
}
