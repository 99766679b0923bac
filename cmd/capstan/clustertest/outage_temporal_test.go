package clustertest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/internal/temporaltest"
	"github.com/capstan-dev/capstan/journal"
)

// TestTemporalRidesOutAnOutageMidIteration: the model API answers 529 and
// 500 for 30 s from the second model turn of an iteration on. capstan's
// own retries in the model client give up well before that; Temporal
// retries the iteration with backoff, and each attempt continues the
// iteration where it failed (the tool-effect ledger). The run completes,
// every model turn was answered (billed) exactly once by the fake server,
// and the iteration's first Bash effect happened once.
func TestTemporalRidesOutAnOutageMidIteration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server and rides out a 30 s outage; run without -short")
	}
	const outage = 30 * time.Second
	var mu sync.Mutex
	var began time.Time
	failures := 0
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		switch r.ToolResults {
		case 0:
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: json.RawMessage(`{"command":"echo one >> log.txt"}`)}}}
		case 1:
			mu.Lock()
			defer mu.Unlock()
			if began.IsZero() {
				began = time.Now()
			}
			if time.Since(began) < outage {
				failures++
				status := 529
				if failures%2 == 0 {
					status = 500
				}
				return fakellm.Reply{Fault: &fakellm.Fault{Status: status}}
			}
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: json.RawMessage(`{"command":"echo two >> log.txt"}`)}}}
		}
		return fakellm.Reply{Text: "both lines appended. ALL_DONE"}
	}})
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "outage", "description": "two Bash effects in one iteration",
  "runner": {"model": "anthropic:claude-sonnet-4-5", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3, "timeoutSeconds": 600}}}`,
		"steps_registry.json":                  `{"agentId": "outage", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Append the two lines.",
	})
	addr := temporaltest.Server(t)
	repo, workDir := sharedRepo(t)
	startWorker(t, addr, filepath.Join(t.TempDir(), "w1"))
	run := cliCommand("run", dir, "--temporal", addr, "--workdir", workDir, "--repo", repo, "--base-url", srv.URL, "--json", "--worker-timeout", "5s")
	run.Env = append(run.Env, "ANTHROPIC_API_KEY="+fakeKey)
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("capstan run --temporal: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var res event.RunResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || !res.Success {
		t.Fatalf("the run did not complete: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	answered := map[int]int{}
	failed := 0
	for _, r := range srv.Requests() {
		if r.Status == 200 {
			answered[r.Request.ToolResults]++
		} else {
			failed++
		}
	}
	if answered[0] != 1 || answered[1] != 1 || answered[2] != 1 || len(answered) != 3 {
		t.Errorf("model turns answered (by tool results in the request): %v, want each of 0, 1, 2 once", answered)
	}
	if failed < 8 {
		t.Errorf("only %d requests failed: the outage was not ridden out by Temporal's retries", failed)
	}
	bare := clitest.BarePath(repo)
	if got := gitT(t, bare, "show", "capstan/"+res.RunID+":log.txt"); got != "one\ntwo" {
		t.Errorf("log.txt on the run's branch:\n%s", got)
	}
	found, err := testStore(t).Find("", res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := agent.LoadRun(found.ID, found.Path)
	if err != nil || rec.FinishedIterations() != 1 || rec.Integrity.Err() != nil {
		t.Fatalf("journal: %v, %d finished iterations, %v", err, rec.FinishedIterations(), rec.Integrity.Err())
	}
	events, _ := journal.ReadFile(found.Path)
	resumed := 0
	for _, ev := range events {
		if ev.Type == journal.RunStart && strings.Contains(string(ev.Data), `"resumed":true`) {
			resumed++
		}
	}
	if resumed < 2 {
		t.Errorf("the journal records %d attempts after the first: the iteration was not retried by Temporal", resumed)
	}
	t.Logf("%d failed requests over the %s outage, %d retried attempts of the iteration", failed, outage, resumed)
}

// TestTemporalResumeKnowsWhereTheRunLives: an outage outlasts a run's
// small time budget on Temporal; the run ends recoverable and its summary
// says to continue with `capstan resume RUN --temporal ADDR`. A local
// `capstan resume RUN` refuses, naming that command; the command, pasted
// once the outage is over, continues the run on Temporal, which completes
// with every model turn answered once and both effects on its branch.
func TestTemporalResumeKnowsWhereTheRunLives(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server; run without -short")
	}
	var down sync.Mutex
	outage := true
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		switch r.ToolResults {
		case 0:
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: json.RawMessage(`{"command":"echo one >> log.txt"}`)}}}
		case 1:
			down.Lock()
			defer down.Unlock()
			if outage {
				return fakellm.Reply{Fault: &fakellm.Fault{Status: 529}}
			}
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: json.RawMessage(`{"command":"echo two >> log.txt"}`)}}}
		}
		return fakellm.Reply{Text: "both lines appended. ALL_DONE"}
	}})
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "outage", "description": "two Bash effects in one iteration",
  "runner": {"model": "anthropic:claude-sonnet-4-5", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3, "timeoutSeconds": 20}}}`,
		"steps_registry.json":                  `{"agentId": "outage", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Append the two lines.",
	})
	addr := temporaltest.Server(t)
	repo, workDir := sharedRepo(t)
	startWorker(t, addr, filepath.Join(t.TempDir(), "w1"))
	run := cliCommand("run", dir, "--temporal", addr, "--workdir", workDir, "--repo", repo, "--base-url", srv.URL, "--worker-timeout", "5s")
	run.Env = append(run.Env, "ANTHROPIC_API_KEY="+fakeKey)
	var stderr bytes.Buffer
	run.Stderr = &stderr
	if err := run.Run(); err == nil {
		t.Fatalf("the run completed through an outage longer than its budget:\n%s", stderr.String())
	}
	_, hint, ok := strings.Cut(stderr.String(), "continue with: ")
	hint = strings.TrimSpace(strings.SplitN(hint, "\n", 2)[0])
	if !ok || !strings.HasPrefix(hint, "capstan resume ") || !strings.Contains(hint, "--temporal "+addr) {
		t.Fatalf("no continue-with hint naming Temporal:\n%s", stderr.String())
	}
	id := strings.Fields(hint)[2]
	code, _, local := captureConfigCLI(t, "resume", id)
	if code != exitUsage || !strings.Contains(local, "continue it on Temporal with: "+hint) {
		t.Fatalf("local resume of a run on Temporal: exit %d\n%s", code, local)
	}
	down.Lock()
	outage = false
	down.Unlock()
	sh := exec.Command("sh", "-c", hint+" --json")
	sh.Env = append(pathWithCapstan(), "ANTHROPIC_API_KEY="+fakeKey)
	var out, errOut bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &errOut
	if err := sh.Run(); err != nil {
		t.Fatalf("the pasted hint %q: %v\n%s", hint, err, errOut.String())
	}
	var res event.RunResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || !res.Success || res.RunID != id {
		t.Fatalf("resumed on Temporal: %v %+v\n%s", err, res, errOut.String())
	}
	answered := map[int]int{}
	for _, r := range srv.Requests() {
		if r.Status == 200 {
			answered[r.Request.ToolResults]++
		}
	}
	if answered[0] != 1 || answered[1] != 1 || answered[2] != 1 {
		t.Errorf("model turns answered (by tool results in the request): %v, want each of 0, 1, 2 once", answered)
	}
	bare := clitest.BarePath(repo)
	if got := gitT(t, bare, "show", "capstan/"+id+":log.txt"); got != "one\ntwo" {
		t.Errorf("log.txt on the run's branch:\n%s", got)
	}
}
