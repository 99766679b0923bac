package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Init()         // sandboxed commands re-execute the test binary as their helper
	code := testenv.Run(m) // run journals go to a temporary state dir
	removeSharedCache()
	os.Exit(code)
}

func toolCalls(t *testing.T, path string) []event.ToolUse {
	t.Helper()
	events, err := journal.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.ToolUse
	for _, ev := range events {
		if ev.Type == journal.ToolCall || ev.Type == journal.ToolDenied {
			var u event.ToolUse
			_ = json.Unmarshal(ev.Data, &u)
			out = append(out, u)
		}
	}
	return out
}

// An agent that declares runner.skills sees their L1 entries in its system
// prompt and can activate a skill (L2) and read its files (L3).
func TestAgentUsesDeclaredSkills(t *testing.T) {
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "skilled", "description": "uses a skill",
  "runner": {"model": "script:script.yaml", "skills": ["skills"],
    "completion": {"type": "keyword", "keyword": "DONE"}, "boundaries": {"permissionMode": "plan"}}}`,
		"steps_registry.json":            `{"agentId": "skilled", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "w", "c3": "s"}}}`,
		"prompts/steps/w/s/f_default.md": "Write a haiku the way the team likes it.",
		"skills/haiku/SKILL.md":          "---\nname: haiku\ndescription: House rules for haiku. Use when asked for a haiku.\n---\nCount syllables 5-7-5. See [style](style.md).\n",
		"skills/haiku/style.md":          "Always mention the sea.\n",
		"script.yaml": `turns:
  - tool_calls: [{name: activate_skill, input: {name: haiku}}]
  - tool_calls: [{name: read_skill_file, input: {skill: haiku, path: style.md}}]
  - text: "waves fold into foam / ... DONE"
`,
	})
	ctx := context.Background()
	a, err := Build(ctx, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.flow.system, "<name>haiku</name>") || !strings.Contains(a.flow.system, "House rules for haiku") {
		t.Fatalf("L1 entries missing from the system prompt:\n%s", a.flow.system)
	}
	if strings.Contains(a.flow.system, "5-7-5") {
		t.Fatal("the SKILL.md body (L2) was disclosed before activation")
	}
	a.Run(ctx)
	res := a.Stop()
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	calls := toolCalls(t, res.Journal)
	if len(calls) != 2 || calls[0].IsError || !strings.Contains(calls[0].Output, "5-7-5") ||
		calls[1].IsError || !strings.Contains(calls[1].Output, "Always mention the sea.") {
		t.Fatalf("skill tools: %+v", calls)
	}
}

// runner.boundaries.sandbox puts the Bash tool in the sandbox: writes
// outside the work dir fail, inside they work.
func TestSandboxedBash(t *testing.T) {
	if err := sandbox.Probe(context.Background()).Unavailable(); err != nil {
		t.Skipf("no sandbox on this machine: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "escaped.txt")
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "boxed", "description": "sandboxed bash",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "default", "sandbox": {"enabled": true}}}}`,
		"steps_registry.json":            `{"agentId": "boxed", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "w", "c3": "s"}}}`,
		"prompts/steps/w/s/f_default.md": "Try it.",
		"script.yaml": `turns:
  - tool_calls: [{name: Bash, input: {command: "echo in > inside.txt && cat inside.txt"}}]
  - tool_calls: [{name: Bash, input: {command: "echo out > ` + outside + `"}}]
  - text: DONE
`,
	})
	wd := t.TempDir()
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: wd})
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	calls := toolCalls(t, res.Journal)
	if len(calls) != 2 || calls[0].IsError || !strings.Contains(calls[0].Output, "in") {
		t.Fatalf("inside write: %+v", calls)
	}
	if !calls[1].IsError {
		t.Fatalf("write outside the work dir succeeded in the sandbox: %+v", calls[1])
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("file outside the work dir exists: %v", err)
	}
}
