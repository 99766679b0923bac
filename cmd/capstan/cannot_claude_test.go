package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/llm/claudecode"
)

// The honest way out over the real Claude Code CLI, pointed at a loopback
// fake of the Anthropic API: the model declares completion, the check
// fails, it declares again, the same failure's retry prompt offers the
// way out, and the model takes it. The run ends cannot_complete with exit
// code 4, its explanation in the Result and in show.
func TestRunExitsFourOverTheClaudeCLI(t *testing.T) {
	bin := testenv.ClaudeCLI(t)
	var offered atomic.Bool
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		switch {
		case strings.Contains(r.LastUserText, "### If the task cannot be done as specified"):
			offered.Store(true)
			return fakellm.Reply{Text: "Then I say so.\nCANNOT_COMPLETE: the task forbids new files but the check wants done.txt\nthe prompt: do not create files"}
		case strings.Contains(r.LastUserText, "done.txt"), strings.Contains(r.LastUserText, "Write nothing; say TASK_DONE."):
			return fakellm.Reply{Text: "Nothing to write. TASK_DONE"}
		}
		return fakellm.Reply{Text: "ok"} // the CLI's side requests
	}})
	home := t.TempDir()
	for k, v := range map[string]string{
		claudecode.EnvBinary: bin, "ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": "test-key",
		"CLAUDE_CONFIG_DIR": home, "HOME": home,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
	} {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "way-out", "description": "a check the task forbids passing",
  "runner": {"model": "claude-code:claude-sonnet-5",
    "completion": {"type": "keyword", "keyword": "TASK_DONE", "validators": ["done"]},
    "boundaries": {"allowedTools": ["Read"], "permissionMode": "default"},
    "budgets": {"maxIterations": 4}}}`,
		"steps_registry.json": `{"agentId": "way-out", "c1": "steps", "entryStep": "initial.main",
  "validators": {"done": {"type": "file", "path": "done.txt", "failurePattern": "file-not-exists"}},
  "steps": {"initial.main": {"stepId": "initial.main", "c2": "initial", "c3": "main", "onFailure": {"action": "retry", "maxAttempts": 4}}}}`,
		"prompts/steps/initial/main/f_default.md": "Write nothing; say TASK_DONE.",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wd := t.TempDir()
	code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd, "--json", "--quiet")
	if code != exitCannotComplete {
		for i, r := range srv.Requests() {
			t.Logf("request %d: %s %s -> %d\n%.1500s", i, r.Method, r.Path, r.Status, r.Body)
		}
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	// capstan run starts the CLI in the sandbox by default.
	if j, err := os.ReadFile(runJournals(t, wd)[0]); err != nil || !strings.Contains(string(j), `"confinement":"sandboxed: `) {
		t.Errorf("the claude CLI did not run in the sandbox (%v)", err)
	}
	d := res.CannotComplete
	if !offered.Load() || res.CompletionReason != "cannot_complete" || res.Iterations != 3 || d == nil || d.Iteration != 3 ||
		d.Reason != "the task forbids new files but the check wants done.txt" || d.Evidence != "the prompt: do not create files" {
		t.Fatalf("offered=%v result %+v", offered.Load(), res)
	}
	code, out, errOut = captureConfigCLI(t, "show", res.RunID, "--workdir", wd)
	if code != 0 || !strings.Contains(out, "NOT COMPLETED  cannot_complete") ||
		!strings.Contains(out, "the model declared in iteration 3 that the task cannot be done as specified:\n   the task forbids new files") ||
		!strings.Contains(out, "evidence:\n   the prompt: do not create files") {
		t.Fatalf("show: exit %d\n%s\n%s", code, out, errOut)
	}
}
