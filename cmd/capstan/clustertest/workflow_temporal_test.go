package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/internal/temporaltest"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/scaleout"
)

// slowIterator makes the project's iterator agent run a Bash command that
// marks its start in the work dir and then takes three seconds.
func slowIterator(t *testing.T, wd string) {
	t.Helper()
	dir := filepath.Join(wd, ".agent", "iterator")
	def := readFileT(t, filepath.Join(dir, "agent.json"))
	def = strings.Replace(def, `"allowedTools": ["Read"]`, `"allowedTools": ["Read", "Bash"]`, 1)
	files := map[string]string{"agent.json": def, "script.yaml": `turns:
  - tool_calls: [{name: Bash, input: {command: "touch started.txt; sleep 3"}}]
  - structured: {next_action: {action: closing}}
`}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// commentMarker matches the hidden idempotency marker of a comment posted
// by an issue workflow.
var commentMarker = regexp.MustCompile(`\n\n<!-- capstan-step: \S+/issue-7/[a-z-]+/cycle-\d/comment -->`)

// TestWorkflowTemporalKilledWorker runs the three-agent workflow of
// TestWorkflowRunDrivesAnIssueThroughScriptedAgents on a real Temporal
// dev server with two worker processes, and kills (SIGKILL) the worker
// that runs the last agent in the middle of its Bash call. The issue
// completes; the fake gh's call log holds the same label changes,
// comments and close as the local run, each once, every comment with its
// step's idempotency marker.
func TestWorkflowTemporalKilledWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server and worker processes; run without -short")
	}
	addr := temporaltest.Server(t)
	wd := clitest.WorkflowProject(t, "../../..")
	slowIterator(t, wd)
	gitT(t, wd, "init", "-q")
	gitT(t, wd, "add", "-A")
	gitT(t, wd, "commit", "-q", "-m", "project")
	// The issues' branches go to a bare repository every worker reaches
	// (over git://, as on another machine: see serveGit).
	base := t.TempDir()
	bare := filepath.Join(base, "origin.git")
	gitT(t, wd, "init", "-q", "--bare", bare)
	remote := serveGit(t, base) + "origin.git"
	gh := testenv.InstallFakeGH(t, testenv.GHState{Issues: map[string]*testenv.GHIssue{
		"7": {Title: "Add a flag", Labels: []string{"kind:consider", "order:1"}, State: "open"},
	}})
	// The workers and the submitter find the fake gh first on PATH.
	t.Setenv("PATH", gh.Dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	roots := t.TempDir()
	workers := []*tworker{startWorker(t, addr, filepath.Join(roots, "w1")), startWorker(t, addr, filepath.Join(roots, "w2"))}

	run := cliCommand("workflow", "run", "--issue", "7", "--workdir", wd, "--repo", "acme/app", "--temporal", addr,
		"--worker-timeout", "3s", "--git-repo", remote, "--json")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()

	// Kill the worker whose checkout of the iterator's run (the issue's
	// third dispatch) has started its Bash command.
	var victim *tworker
	deadline := time.Now().Add(3 * time.Minute)
	for victim == nil {
		for _, w := range workers {
			if m, _ := filepath.Glob(filepath.Join(w.Root, "*-7-3", "started.txt")); len(m) > 0 {
				victim = w
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("workflow run ended before the iterator ran: %v\n%s\n%s", err, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the iterator did not start:\n%s\n%s", stderr.String(), workers[0].Stderr.String()+workers[1].Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(-victim.Cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("workflow run: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
	case <-time.After(3 * time.Minute):
		_ = run.Process.Kill()
		t.Fatalf("workflow run did not end:\n%s", stderr.String())
	}
	// The iterator's run moved to the other worker, which finished it.
	for _, w := range workers {
		if m, _ := filepath.Glob(filepath.Join(w.Root, "*-7-3")); w != victim && len(m) == 0 {
			t.Fatalf("the iterator's run did not move to the surviving worker:\n%s", w.Stderr.String())
		}
	}
	var res clitest.WorkflowResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatal(err, stdout.String())
	}
	ir := res.Issues[0]
	var moves []string
	for _, h := range ir.History {
		moves = append(moves, fmt.Sprintf("%s>%s:%s", h.From, h.To, h.Outcome))
	}
	if res.Status != "completed" || ir.FinalPhase != "done" || !ir.Closed ||
		strings.Join(moves, " ") != "consider-pending>detail-pending:handoff-detail detail-pending>impl-pending:handoff-impl impl-pending>done:success" {
		t.Fatalf("result %+v\n%s", res, stderr.String())
	}
	// The three agents worked one after another on the issue's branch.
	var runs []string
	for _, line := range strings.Split(gitT(t, bare, "log", "--format=%(trailers:key=Capstan-Run,valueonly)", "capstan/"+res.RunID+"-issue-7"), "\n") {
		if line = strings.TrimSpace(line); line != "" && (len(runs) == 0 || runs[len(runs)-1] != line) {
			runs = append(runs, line)
		}
	}
	if want := []string{res.RunID + "-7-3", res.RunID + "-7-2", res.RunID + "-7-1"}; strings.Join(runs, " ") != strings.Join(want, " ") {
		t.Errorf("runs on the issue's branch, newest first: %v, want %v", runs, want)
	}
	want := clitest.Issue7Moves
	var got []string
	for _, w := range gh.Writes(t) {
		if strings.HasPrefix(w, "label create") {
			continue
		}
		if strings.HasPrefix(w, "issue comment") {
			if !commentMarker.MatchString(w) {
				t.Errorf("comment without its step's marker: %q", w)
			}
			w = commentMarker.ReplaceAllString(w, "")
		}
		got = append(got, w)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("gh writes:\n%s\nwant (each once):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Temporal's UI shows the issue with its phase (details and memo).
	c, err := scaleout.Dial(context.Background(), addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := scaleout.IssueWorkflowID(scaleout.IssueStore{Repo: "acme/app"}, "default", 7)
	desc, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	var phase string
	if f := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[scaleout.MemoPhase]; f == nil || converter.GetDefaultDataConverter().FromPayload(f, &phase) != nil || phase != "done" {
		t.Errorf("memo phase %q (%v)", phase, f)
	}
	if cfg := desc.GetExecutionConfig().GetUserMetadata(); cfg == nil || !strings.Contains(string(cfg.GetSummary().GetData()), "capstan issue #7") {
		t.Errorf("summary %v", cfg)
	}
	if dir := os.Getenv("CAPSTAN_RECORD_HISTORIES"); dir != "" {
		// Re-record scaleout/testdata/histories/issue.json.
		out, err := exec.Command(temporaltest.CLI(t), "workflow", "show", "--address", addr, "--workflow-id", id, "--output", "json").Output()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "issue.json"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The workflow run's journal has the issue's whole account.
	code, acct, _ := captureConfigCLI(t, "show", res.RunID)
	for _, s := range []string{"on Temporal " + addr, "phase consider-pending", "dispatch considerer", "move detail-pending → impl-pending",
		"close: ok", "status: completed"} {
		if code != 0 || !strings.Contains(acct, s) {
			t.Fatalf("show %s lacks %q (exit %d):\n%s", res.RunID, s, code, acct)
		}
	}

	// A batch on a local issue store the workers share, two issues at a
	// time, with fixed outcomes: every issue makes its moves and closes;
	// one that no label puts in an actionable phase is skipped.
	store := t.TempDir()
	for n, labels := range map[int]string{1: `["backlog", "kind:consider"]`, 2: `["backlog", "kind:detail"]`, 3: `["backlog", "kind:impl"]`, 4: `["backlog", "done"]`} {
		clitest.WriteLocalIssue(t, store, n, labels)
	}
	code, out, errOut := captureConfigCLI(t, "workflow", "run", "--label", "backlog", "--workdir", wd, "--local", store, "--temporal", addr,
		"--concurrency", "2", "--json", "--stub-dispatch", `{"considerer": "handoff-detail", "detailer": "handoff-impl"}`)
	var batch struct {
		clitest.WorkflowResult
		Skipped []int
	}
	if err := json.Unmarshal([]byte(out), &batch); err != nil || code != 0 || batch.Status != "completed" || len(batch.Issues) != 3 ||
		fmt.Sprint(batch.Skipped) != "[4]" {
		t.Fatalf("batch: exit %d %v\n%s\n%s", code, err, out, errOut)
	}
	for i, want := range []int{3, 2, 1} {
		if ir := batch.Issues[i]; ir.Status != "completed" || !ir.Closed || len(ir.History) != want {
			t.Errorf("issue %d of the batch: %+v", i+1, ir)
		}
		if meta := readFileT(t, filepath.Join(store, fmt.Sprint(i+1), "meta.json")); !strings.Contains(meta, `"closed"`) || !strings.Contains(meta, `"done"`) {
			t.Errorf("issue %d: %s", i+1, meta)
		}
	}
}
