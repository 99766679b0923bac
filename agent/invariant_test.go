package agent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/testenv"
)

// checkResultInvariant: success implies no error; a run that did not
// succeed says why with a coded error.
func checkResultInvariant(t *testing.T, name string, res *event.RunResult) {
	t.Helper()
	if res.Success && res.Error != nil {
		t.Errorf("%s: success with error %+v", name, res.Error)
	}
	if !res.Success && (res.Error == nil || res.Error.Code == "") {
		t.Errorf("%s: not completed (%s) without a coded error", name, res.CompletionReason)
	}
}

// Every way a run can end keeps the invariant.
func TestSuccessImpliesNoErrorOnEveryEnding(t *testing.T) {
	endings := map[string]struct {
		script string
		opts   BuildOptions
		ctx    func() (context.Context, context.CancelFunc)
	}{
		"completed":        {script: "turns:\n  - text: ALL_DONE\n"},
		"max iterations":   {script: "turns:\n  - text: one\n  - text: two\n", opts: BuildOptions{MaxIterations: 1}},
		"provider error":   {script: "turns:\n  - error: {type: rate_limit, retry_after_seconds: 1}\n"},
		"auth error":       {script: "turns:\n  - error: {type: auth}\n"},
		"script exhausted": {script: "turns:\n  - text: one\n"},
		"canceled": {script: "turns:\n  - text: one\n", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}},
		"time budget": {script: "turns:\n  - text: one\n", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Nanosecond)
		}},
	}
	for name, e := range endings {
		dir := basicAgent(t, e.script, "")
		opts := e.opts
		opts.WorkDir = t.TempDir()
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if e.ctx != nil {
			ctx, cancel = e.ctx()
		}
		a, err := Build(context.Background(), load(t, dir), opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.Run(ctx)
		cancel()
		res := a.Stop()
		checkResultInvariant(t, name, res)
		if name == "completed" && !res.Success {
			t.Errorf("completed: %+v", res)
		}
	}
	// Stopped before running.
	a, err := Build(context.Background(), load(t, basicAgent(t, "turns:\n  - text: x\n", "")), BuildOptions{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	checkResultInvariant(t, "stopped before running", a.Stop())
}

// An MCP server that crashes mid-run is restarted once; the run still
// completes, with no error, and its result says what happened.
func TestCrashedMCPServerIsRestartedAndTheResultSaysSo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "stdioserver")
	if out, err := testenv.GoCommand("build", "-o", bin, "../tool/mcp/testdata/stdioserver").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "crash", "description": "its MCP server crashes",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "DONE"},
    "mcpServers": {"s": {"command": "` + bin + `", "env": {"GREETING": "Hi"}}},
    "boundaries": {"allowedTools": ["mcp__s__die", "mcp__s__greet"]}}}`,
		"steps_registry.json":            `{"agentId": "crash", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "w", "c3": "s"}}}`,
		"prompts/steps/w/s/f_default.md": "Greet Ada.",
		"script.yaml": `turns:
  - tool_calls: [{name: mcp__s__die, input: {}}]
  - tool_calls: [{name: mcp__s__greet, input: {name: Ada}}]
  - text: "DONE"
`,
	})
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	checkResultInvariant(t, "mcp crash", res)
	if !res.Success || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "MCP server s stopped during the run") || !strings.Contains(res.Warnings[0], "restarted once") {
		t.Fatalf("%+v warnings %q", res, res.Warnings)
	}
	used := toolCalls(t, res.Journal)
	if len(used) != 2 || !used[0].IsError || !strings.Contains(used[0].Output, "was restarted") || used[1].IsError || !strings.HasPrefix(used[1].Output, "Hi, Ada") {
		t.Fatalf("tool calls %+v", used)
	}
}
