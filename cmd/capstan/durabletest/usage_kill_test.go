package durabletest

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/internal/fakellm"
)

// TestUsageOfAResponseReadBeforeAKillCounts: the model API (a fake on
// loopback) finishes a response whose Bash call the run is killed in
// (SIGKILL, the call's command with it). The response's usage was read
// from the wire before its tool call ran, so it is in the journal: the
// resumed run's usage is what the server billed in all, each response
// once, and the server answered each model turn once.
func TestUsageOfAResponseReadBeforeAKillCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a run: skipped with -short")
	}
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		if r.ToolResults == 0 {
			return fakellm.Reply{Usage: fakellm.Usage{InputTokens: 1000, OutputTokens: 100},
				ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: json.RawMessage(`{"command":"echo start >> starts.txt; sleep 60"}`)}}}
		}
		return fakellm.Reply{Usage: fakellm.Usage{InputTokens: 200, OutputTokens: 20}, Text: "told; ALL_DONE"}
	}})
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "billed", "description": "one Bash call the run is killed in",
  "runner": {"model": "anthropic:claude-sonnet-4-5", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json":                  `{"agentId": "billed", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Run the command.",
	})
	wd := t.TempDir()
	run := cliCommand("run", dir, "--workdir", wd, "--base-url", srv.URL, "--quiet")
	run.Env = append(run.Env, "ANTHROPIC_API_KEY="+clitest.FakeKey)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	waitForLine(t, filepath.Join(wd, "starts.txt"), done)
	// The machine dies: the run and the command it started.
	_ = syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
	<-done
	list, err := testStore(t).List(wd)
	if err != nil || len(list) != 1 {
		t.Fatalf("runs of %s: %v %v", wd, list, err)
	}
	resume := cliCommand("resume", list[0].ID, "--json")
	resume.Env = append(resume.Env, "ANTHROPIC_API_KEY="+clitest.FakeKey)
	var stdout, stderr bytes.Buffer
	resume.Stdout, resume.Stderr = &stdout, &stderr
	if err := resume.Run(); err != nil {
		t.Fatalf("resume: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var res agent.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || !res.Success {
		t.Fatalf("the resumed run did not complete: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	answered := map[int]int{}
	for _, r := range srv.Requests() {
		if r.Status == 200 {
			answered[r.Request.ToolResults]++
		}
	}
	if answered[0] != 1 || answered[1] != 1 || len(answered) != 2 {
		t.Fatalf("model turns answered (by tool results in the request): %v, want 0 and 1 once each", answered)
	}
	if got := res.Usage; got.Input() != 1200 || got.OutputTokens != 120 {
		t.Errorf("resumed run's usage %+v (input %d), want what the server billed: 1200 input, 120 output tokens", got, got.Input())
	}
	if n := clitest.CountLines(t, filepath.Join(wd, "starts.txt")); n != 1 {
		t.Errorf("the cut Bash call started %d times, want once", n)
	}
}
