package durabletest

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/journal"
)

// effectAgent's one iteration makes one Bash call that appends a line to
// effect.txt in the middle of its run (starts.txt counts the command's
// starts, pid.txt names its process group), then ends with ALL_DONE.
func effectAgent(t *testing.T) string {
	return writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "effect", "description": "one Bash effect",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json":                  `{"agentId": "effect", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Append the line.",
		"script.yaml": `turns:
  - tool_calls:
      - name: Bash
        input: {command: "echo $$ > pid.txt; echo start >> starts.txt; sleep 0.15; echo line >> effect.txt; sleep 0.15"}
  - text: "appended. ALL_DONE"
`,
	})
}

// ledgerTrial is what one kill left in the journal and what the resume
// made of it.
type ledgerTrial struct {
	intent, recorded, told bool
	starts, lines          int
}

// TestToolLedgerKilledMidCall is the tool-effect ledger's acceptance test
// for local runs: a run is killed with SIGKILL at a random moment around a
// Bash call that appends a line to a file (half the time its command is
// killed with it, as when the machine dies), then resumed. In every trial
// where the call's result had been journaled, the line is there exactly
// once and the command never ran again; in every trial where the call had
// started but not finished, the model is told so and the command is not
// run again; a call the kill came before runs once on resume.
func TestToolLedgerKilledMidCall(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 50 runs: skipped with -short")
	}
	agentDir := effectAgent(t)
	store := testStore(t)
	trials := clitest.LedgerTrials(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d trials", seed, trials)
	var mu sync.Mutex
	var results []ledgerTrial
	var wg sync.WaitGroup
	// Every trial is queued before the workers start, so a worker that
	// stops at a t.Fatal never blocks the queue.
	next := make(chan int, trials)
	for i := range trials {
		next <- i
	}
	close(next)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				r := ledgerKillTrial(t, agentDir, store, rng)
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var recorded, told, before int
	for _, r := range results {
		switch {
		case r.recorded:
			recorded++
		case r.intent:
			told++
		default:
			before++
		}
	}
	t.Logf("%d trials: %d calls finished before the kill (answered from the journal), %d cut (model told), %d killed before the call", len(results), recorded, told, before)
}

// ledgerKillTrial runs one trial of TestToolLedgerKilledMidCall.
func ledgerKillTrial(t *testing.T, agentDir string, store journal.Store, rng *rand.Rand) ledgerTrial {
	wd := t.TempDir()
	cmd := cliCommand("run", agentDir, "--workdir", wd, "--quiet")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait for the command to start, then kill at a random moment of the
	// next 0.45 s (the command runs 0.3 s; its result is journaled after).
	starts := filepath.Join(wd, "starts.txt")
	waitForLine(t, starts, done)
	time.Sleep(time.Duration(rng.IntN(450)) * time.Millisecond)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	machine := rng.IntN(2) == 0
	if machine {
		// The machine died: the command's process group dies too.
		if pid, err := strconv.Atoi(strings.TrimSpace(readFileT(t, filepath.Join(wd, "pid.txt")))); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	<-done
	// A command that outlived capstan ends on its own.
	time.Sleep(400 * time.Millisecond)
	list, err := store.List(wd)
	if err != nil || len(list) != 1 {
		t.Fatalf("runs of %s: %v %v", wd, list, err)
	}
	id, path := list[0].ID, list[0].Path
	var r ledgerTrial
	r.intent, r.recorded, _ = clitest.BashCallState(t, path)
	linesAtKill := clitest.CountLines(t, filepath.Join(wd, "effect.txt"))
	code, stdout, stderr := captureConfigCLI(t, "resume", id, "--quiet")
	if code != 0 && !strings.Contains(stderr, "already completed") {
		t.Fatalf("resume %s: exit %d\nstdout:\n%s\nstderr:\n%s", id, code, stdout, stderr)
	}
	_, _, r.told = clitest.BashCallState(t, path)
	r.starts = clitest.CountLines(t, starts)
	r.lines = clitest.CountLines(t, filepath.Join(wd, "effect.txt"))
	switch {
	case r.recorded:
		if r.lines != 1 || r.starts != 1 || r.told {
			t.Errorf("run %s: the call had finished before the kill, yet after resume effect.txt has %d lines, the command started %d times, model told %v", id, r.lines, r.starts, r.told)
		}
	case r.intent:
		if !r.told {
			t.Errorf("run %s: the call was cut by the kill and the model was not told", id)
		}
		if r.starts != 1 || r.lines != linesAtKill {
			t.Errorf("run %s: the cut call ran again on resume: %d starts, effect.txt %d lines (%d at the kill)", id, r.starts, r.lines, linesAtKill)
		}
	default:
		t.Errorf("run %s: the Bash command started without a tool.intent in the journal", id)
	}
	return r
}

// waitForLine waits until the file starts has a line (a Bash call of the
// run started), failing the test when the run ends first (done) or after
// a minute.
func waitForLine(t *testing.T, starts string, done <-chan error) {
	t.Helper()
	waitUntil(t, done, "its Bash call started", func() bool { return clitest.CountLines(t, starts) > 0 })
}

// waitUntil waits until cond holds — what it says, for the failure — for
// up to a minute, failing when the run ends first (done).
func waitUntil(t *testing.T, done <-chan error, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("run ended before %s: %v", what, err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within a minute: %s", what)
		}
	}
}

func readFileT(t testing.TB, p string) string { return clitest.ReadFile(t, p) }

// TestEmptyJournalNamesItsAgent: a run killed before its first event is
// listed with its agent, and resume prints the command that starts it
// again, which works pasted into a shell.
func TestEmptyJournalNamesItsAgent(t *testing.T) {
	agentDir := effectAgent(t)
	wd := filepath.Join(t.TempDir(), "work dir")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	store := testStore(t)
	w, err := store.Create(wd, "20261206T000000Z-e0e0e0")
	if err != nil {
		t.Fatal(err)
	}
	if err := journal.WriteStarted(w.Path(), journal.Started{Agent: "effect", AgentDir: agentDir, WorkDir: wd}); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	code, stdout, _ := captureConfigCLI(t, "runs", "--workdir", wd)
	if code != 0 || !clitest.HasLine(stdout, `^20261206T000000Z-e0e0e0\s+effect\s+empty`) {
		t.Fatalf("runs: exit %d\n%s", code, stdout)
	}
	code, _, stderr := captureConfigCLI(t, "resume", "20261206T000000Z-e0e0e0")
	_, hint, ok := strings.Cut(stderr, "start again with: ")
	if code != exitUsage || !ok {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	hint = strings.TrimSpace(strings.SplitN(hint, "\n", 2)[0])
	sh := exec.Command("sh", "-c", hint+" --quiet")
	sh.Env = pathWithCapstan()
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the pasted hint %q: %v\n%s", hint, err, out)
	}
	if got := clitest.CountLines(t, filepath.Join(wd, "effect.txt")); got != 1 {
		t.Fatalf("the run started by the hint appended %d lines", got)
	}
}
