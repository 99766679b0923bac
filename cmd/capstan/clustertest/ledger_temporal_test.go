package clustertest

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/internal/temporaltest"
	"github.com/capstan-dev/capstan/scaleout"
)

// externalEffectAgent's one iteration makes one Bash call that appends a
// line to a file outside the work dir — an effect on the outside world, as
// a payment or a posted comment is — in the middle of its run, at a moment
// that differs from run to run. Files under out are named after the run's
// checkout (the run's id): .starts counts the command's starts, .pid names
// its process group, .effect holds the line.
func externalEffectAgent(t *testing.T, out string) string {
	cmd := `f=` + out + `/$(basename "$PWD"); echo $$ > $f.pid; echo start >> $f.starts; sleep $((RANDOM % 300))e-3; echo line >> $f.effect; sleep 0.2`
	return writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "outside", "description": "one Bash effect outside the work dir",
  "parameters": {"tag": {"type": "string", "description": "label of the run", "default": "run"}},
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits", "sandbox": {"enabled": false}}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json":                  `{"agentId": "outside", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Post the line for {uv-tag}.",
		"script.yaml":                          "turns:\n  - tool_calls:\n      - name: Bash\n        input: {command: " + strconv.Quote(cmd) + "}\n  - text: \"posted. ALL_DONE\"\n",
	})
}

// TestTemporalToolLedgerKilledWorker is the tool-effect ledger's
// acceptance test on Temporal: rounds of eight runs start on one worker,
// which is killed with SIGKILL while their Bash calls run (in half the
// rounds with its commands, as when the machine dies); a fresh worker
// takes the runs over. Every cut run completes; where the call's result
// had been journaled before the kill, the line is in its file exactly once
// and the command never ran again; where the call was cut, the model is
// told so and the command is not run again.
func TestTemporalToolLedgerKilledWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server and kills worker processes; run without -short")
	}
	addr := temporaltest.Server(t)
	repo, workDir := sharedRepo(t)
	out := t.TempDir()
	dir := externalEffectAgent(t, out)
	roots := t.TempDir()
	c, err := scaleout.Dial(context.Background(), addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	store := testStore(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 29))
	rounds := max(1, (clitest.LedgerTrials(t)+7)/8)
	t.Logf("seed %d, %d rounds of 8 runs", seed, rounds)
	victim := startWorker(t, addr, filepath.Join(roots, "w0"))
	var trials, recorded, told int
	for round := range rounds {
		submit := cliCommand("submit", dir, "--temporal", addr, "--workdir", workDir, "--repo", repo, "--worker-timeout", "2s", "--each", "tag")
		submit.Stdin = strings.NewReader("a\nb\nc\nd\ne\nf\ng\nh\n")
		o, err := submit.Output()
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		ids := strings.Fields(string(o))
		if len(ids) != 8 {
			t.Fatalf("submit printed %q", o)
		}
		// Every run's command has started; the kill lands somewhere in
		// the next 0.35 s, before, during or after their appends.
		deadline := time.Now().Add(2 * time.Minute)
		for _, id := range ids {
			for clitest.CountLines(t, filepath.Join(out, id+".starts")) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("round %d: run %s did not start its Bash call:\n%s", round, id, victim.Stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		time.Sleep(time.Duration(rng.IntN(350)) * time.Millisecond)
		_ = syscall.Kill(-victim.Cmd.Process.Pid, syscall.SIGKILL)
		err = <-victim.Exited
		victim.Exited <- err
		machine := rng.IntN(2) == 0
		if machine {
			for _, id := range ids {
				if pid, err := strconv.Atoi(strings.TrimSpace(readFileT(t, filepath.Join(out, id+".pid")))); err == nil {
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
			}
		}
		time.Sleep(400 * time.Millisecond) // commands that outlived the worker end
		type atKill struct {
			intent, recorded bool
			lines            int
		}
		state := map[string]atKill{}
		for _, id := range ids {
			found, err := store.Find("", id)
			if err != nil {
				t.Fatalf("round %d: journal of %s: %v", round, id, err)
			}
			var s atKill
			s.intent, s.recorded, _ = clitest.BashCallState(t, found.Path)
			s.lines = clitest.CountLines(t, filepath.Join(out, id+".effect"))
			state[id] = s
		}
		victim = startWorker(t, addr, filepath.Join(roots, "w"+strconv.Itoa(round+1)))
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			var res event.RunResult
			err := c.GetWorkflow(ctx, id, "").Get(ctx, &res)
			cancel()
			if err != nil || !res.Success {
				t.Fatalf("round %d: run %s did not complete: %v %+v\n%s", round, id, err, res, victim.Stderr.String())
			}
			found, _ := store.Find("", id)
			_, _, isTold := clitest.BashCallState(t, found.Path)
			s := state[id]
			starts := clitest.CountLines(t, filepath.Join(out, id+".starts"))
			lines := clitest.CountLines(t, filepath.Join(out, id+".effect"))
			trials++
			switch {
			case s.recorded:
				recorded++
				if lines != 1 || starts != 1 || isTold {
					t.Errorf("run %s (machine died %v): the call had finished before the kill, yet its file has %d lines, the command started %d times, model told %v", id, machine, lines, starts, isTold)
				}
			case s.intent:
				told++
				if !isTold {
					t.Errorf("run %s (machine died %v): the call was cut by the kill and the model was not told", id, machine)
				}
				if starts != 1 || lines != s.lines {
					t.Errorf("run %s (machine died %v): the cut call ran again: %d starts, %d lines (%d at the kill)", id, machine, starts, lines, s.lines)
				}
			default:
				t.Errorf("run %s: the Bash command started without a tool.intent in the journal", id)
			}
		}
	}
	t.Logf("%d trials: %d calls finished before the kill (answered from the journal), %d cut (model told)", trials, recorded, told)
	if trials < 8*rounds {
		t.Fatalf("only %d trials", trials)
	}
}
