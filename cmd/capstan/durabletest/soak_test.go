package durabletest

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/journal"
)

// soakKills is how many SIGKILLs TestKillResumeSoak lands: 12 by default,
// CAPSTAN_SOAK_KILLS for a longer soak (the documented full soak is 120).
func soakKills(t *testing.T) int {
	if v := os.Getenv("CAPSTAN_SOAK_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CAPSTAN_SOAK_KILLS=%q is not a positive number", v)
		}
		return n
	}
	return 12
}

// bigAgent runs three iterations whose model replies are 2 MB each, so a
// kill often lands inside the write of a multi-megabyte journal event.
func bigAgent(t *testing.T) string {
	big := func(c string) string { return strings.Repeat(c, 2<<20) }
	return writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "big", "description": "writes large events",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"}, "budgets": {"maxIterations": 10}}}`,
		"steps_registry.json":                  `{"agentId": "big", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Iteration {uv-iteration}.",
		"script.yaml":                          "turns:\n  - text: " + big("a") + "\n  - text: " + big("b") + "\n  - text: ALL_DONE\n",
	})
}

// TestKillResumeSoak kills runs and their resumes with SIGKILL at random
// moments, many of them inside multi-megabyte journal writes, and requires
// every journal to stay readable, trustworthy and resumable: after each
// kill the run is read (no damage, chain intact), and resumed until it
// completes. A kill before the first event leaves an empty journal, which
// must be reported as such.
func TestKillResumeSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test: skipped with -short")
	}
	kills, target := 0, soakKills(t)
	agentDir := bigAgent(t)
	store := testStore(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	t.Logf("soak seed time %s, %d kills", time.Now().Format(time.RFC3339Nano), target)
	var tornSeen, tornMade, runs, empties int
	deadline := time.Now().Add(8 * time.Minute)
	for kills < target {
		if time.Now().After(deadline) {
			t.Fatalf("soak ran out of time after %d kills", kills)
		}
		runs++
		wd := t.TempDir()
		args := []string{"run", agentDir, "--workdir", wd, "--quiet"}
		var id string
		for step := 0; ; step++ {
			if step > 40 {
				t.Fatalf("run %s did not complete after %d resumes", id, step)
			}
			cmd := cliCommand(args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Half the kills land at a random moment; the others as soon as
			// the journal has grown past a random size, i.e. right after (or
			// inside) the write of a large event.
			var kill <-chan time.Time
			if rng.IntN(2) == 0 {
				kill = time.After(time.Duration(rng.IntN(1200)) * time.Millisecond)
			} else {
				kill = grownPast(store, wd, int64(rng.IntN(13<<20)), done)
			}
			killed := false
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%v ended on its own with %v", args, err)
				}
			case <-kill:
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				killed = true
				kills++
			}
			list, err := store.List(wd)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) == 0 {
				break // killed before the journal existed: nothing to check
			}
			if len(list) != 1 {
				t.Fatalf("%d runs in one work dir", len(list))
			}
			id = list[0].ID
			if killed && rng.IntN(3) == 0 && tear(t, list[0].Path, rng) {
				// A third of the kills also tear the last event, as a kill
				// inside its write(2) does (real kills rarely land there).
				tornMade++
			}
			rec, err := agent.LoadRun(id, list[0].Path)
			if err != nil {
				t.Fatalf("run %s unreadable after kill %d: %v", id, kills, err)
			}
			if err := rec.Integrity.Err(); err != nil {
				t.Fatalf("run %s after kill %d: %v", id, kills, err)
			}
			if rec.Integrity.TornTail != nil {
				tornSeen++
			}
			if rec.Start == nil {
				// An empty journal: resume must say so, not fail obscurely.
				empties++
				code, _, stderr := captureConfigCLI(t, "resume", id)
				if code != exitUsage || !strings.Contains(stderr, "nothing to resume") {
					t.Fatalf("resume of empty run %s: exit %d\n%s", id, code, stderr)
				}
				break
			}
			if rec.Result != nil && rec.Result.Success {
				if len(rec.Iterations) != 3 || rec.Result.Iterations != 3 {
					t.Fatalf("run %s completed with %d iterations recorded, result %d", id, len(rec.Iterations), rec.Result.Iterations)
				}
				code, _, _ := captureConfigCLI(t, "show", id)
				if code != 0 {
					t.Fatalf("show %s after completion: exit %d", id, code)
				}
				break
			}
			if !killed {
				t.Fatalf("run %s exited without completing", id)
			}
			if kills >= target {
				// Finish the last run without a kill.
				code, _, stderr := captureConfigCLI(t, "resume", id, "--quiet")
				if code != 0 {
					t.Fatalf("final resume of %s: exit %d\n%s", id, code, stderr)
				}
				if _, in, err := journal.ReadChecked(list[0].Path); err != nil || in.Err() != nil {
					t.Fatalf("run %s after the final resume: %v %v", id, err, in.Err())
				}
				break
			}
			args = []string{"resume", id, "--quiet"}
		}
	}
	t.Logf("%d kills over %d runs: %d torn tails repaired (%d of them torn by the test), %d empty journals reported", kills, runs, tornSeen, tornMade, empties)
}

// grownPast fires once wd's run journal is larger than size (polling), or
// never if the run ends first.
func grownPast(store journal.Store, wd string, size int64, done <-chan error) <-chan time.Time {
	fire := make(chan time.Time, 1)
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if list, _ := store.List(wd); len(list) == 1 {
				if st, err := os.Stat(list[0].Path); err == nil && st.Size() > size {
					fire <- time.Now()
					return
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return fire
}

// tear cuts the journal at path inside its last line, as a kill inside
// that line's write leaves it; it reports whether there was a line to cut.
func tear(t *testing.T, path string, rng *rand.Rand) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[len(b)-1] != '\n' {
		return false
	}
	start := strings.LastIndexByte(string(b[:len(b)-1]), '\n') + 1
	cut := start + 1 + rng.IntN(len(b)-1-start)
	if err := os.Truncate(path, int64(cut)); err != nil {
		t.Fatal(err)
	}
	return true
}
