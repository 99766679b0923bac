package scaleout

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/journal"
)

// runJournal reads the run's journal from the shared state directory.
func runJournal(t *testing.T, runID string) []journal.Event {
	t.Helper()
	found, err := testStore(t).Find("", runID)
	if err != nil {
		t.Fatal(err)
	}
	events, err := journal.ReadFile(found.Path)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// waitJournal waits until the run's journal has an event of type typ for
// iteration n.
func waitJournal(t *testing.T, runID, typ string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if found, err := testStore(t).Find("", runID); err == nil {
			events, _ := journal.ReadFile(found.Path)
			for _, ev := range events {
				if ev.Type == typ && ev.Iteration == n {
					return
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the journal of run %s has no %s of iteration %d", runID, typ, n)
}

func countEvents(events []journal.Event, typ string) int {
	n := 0
	for _, ev := range events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// A lost attempt: Temporal timed the attempt out (its heartbeat did not
// arrive in time) and answers the zombie's next heartbeat with NotFound,
// which cancels its context. That is not the workflow's cancellation: the
// zombie must neither journal run.end canceled nor push a commit that
// records its cut iteration as the run's canceled end, or the retry (on
// the same worker, since its queue is the run's) takes that commit as the
// iteration's result and the run ends canceled although nobody canceled
// it.
func TestALostAttemptNeitherEndsNorCommitsTheRun(t *testing.T) {
	for _, cause := range []struct {
		name string
		err  error
	}{
		{"attempt timed out", serviceerror.NewNotFound("activity attempt timed out")},
		{"worker shutting down", context.Canceled},
	} {
		t.Run(cause.name, func(t *testing.T) {
			in, bare := counterRun(t, WorkflowOptions{})
			p := newPool(t)
			var lost atomic.Bool
			p.iterate = func(ctx context.Context, w *Activities, it IterationInput) (*IterationResult, error) {
				if w == p.w[0] && it.State.Iteration == 1 && lost.CompareAndSwap(false, true) {
					zctx, cancel := context.WithCancelCause(ctx)
					cancel(cause.err)
					if res, err := w.Iterate(zctx, it); err == nil {
						t.Errorf("the lost attempt reported a result: %+v", res)
					}
					// The server's retry of the iteration lands on the same
					// worker's queue.
				}
				return w.Iterate(ctx, it)
			}
			res := p.run(t, in)
			if !lost.Load() {
				t.Fatal("no attempt was lost: nothing was tested")
			}
			checkRun(t, bare, in, &res)
			if n := countEvents(runJournal(t, in.RunID), journal.RunEnd); n != 1 {
				t.Errorf("the journal has %d run.end events, want the run's one end", n)
			}
		})
	}
}

// A zombie attempt still running its iteration when the server's retry of
// it starts on the same worker: the retry waits until the zombie has let
// go of the run, so the two never write the journal (or the checkout) at
// once, and the hash chain holds. The zombie is cut at two points: while
// its Bash call runs, and in its verdict stage after the call ended. Cut
// in its verdict stage, the retry answers the call from the journal and
// the run completes with each line once. Cut while its call ran, the call
// is not run a second time: the retry answers it with what the journal
// recorded of it (the call killed with the zombie) — which this scripted
// model cannot act on, so the run need not complete — and line 2 is in
// log.txt at most once.
func TestAZombieAttemptAndItsRetryNeverWriteAtOnce(t *testing.T) {
	for _, cut := range []string{journal.ToolIntent, journal.ToolCall} {
		t.Run("cut after "+cut, func(t *testing.T) {
			in, bare := counterRun(t, WorkflowOptions{})
			p := newPool(t)
			var played atomic.Bool
			p.iterate = func(ctx context.Context, w *Activities, it IterationInput) (*IterationResult, error) {
				if w != p.w[0] || it.State.Iteration != 1 || !played.CompareAndSwap(false, true) {
					return w.Iterate(ctx, it)
				}
				zctx, cancel := context.WithCancelCause(ctx)
				zombie := make(chan error, 1)
				go func() {
					_, err := w.Iterate(zctx, it)
					zombie <- err
				}()
				waitJournal(t, in.RunID, cut, 2)
				type answer struct {
					res *IterationResult
					err error
				}
				retry := make(chan answer, 1)
				go func() {
					res, err := w.Iterate(ctx, it)
					retry <- answer{res, err}
				}()
				time.Sleep(100 * time.Millisecond)
				cancel(serviceerror.NewNotFound("activity attempt timed out"))
				<-zombie
				a := <-retry
				return a.res, a.err
			}
			res := p.run(t, in)
			if cut == journal.ToolCall {
				checkRun(t, bare, in, &res)
				return
			}
			found, err := testStore(t).Find("", in.RunID)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := agent.LoadRun(found.ID, found.Path)
			if err != nil || rec.Integrity.Err() != nil {
				t.Fatalf("journal: %v, integrity %v", err, rec.Integrity.Err())
			}
			events, _ := journal.ReadFile(found.Path)
			starts := 0 // a call answered from the journal has no intent of its own
			for _, ev := range events {
				if ev.Type == journal.ToolIntent && ev.Iteration == 2 {
					starts++
				}
			}
			if starts != 1 {
				t.Errorf("iteration 2's Bash call started %d times, want once", starts)
			}
			if log := gitT(t, bare, "show", in.Branch+":log.txt"); strings.Count(log, "line-2") > 1 {
				t.Errorf("line 2 is in log.txt twice:\n%s", log)
			}
		})
	}
}

// A worker keeps a run's agent in memory between iterations. When the run
// went elsewhere meanwhile — another worker appended an iteration to the
// journal that the workflow never counted, then died — and comes back,
// the kept agent is stale: its journal writer would chain to a line that
// is no longer the last, and its iteration would repeat one the journal
// already holds. The worker rebuilds the agent from the journal instead.
func TestAKeptAgentIsNotReusedAfterAnotherWorkerWroteTheJournal(t *testing.T) {
	in, bare := counterRun(t, WorkflowOptions{})
	p := newPool(t)
	var step atomic.Int32
	p.kill = func(w *Activities, it IterationInput, res *IterationResult) error {
		switch {
		case w == p.w[0] && it.State.Iteration == 1 && step.CompareAndSwap(0, 1):
			// Worker 0 committed iteration 2 and kept the run's agent,
			// but its answer never reached the server.
			return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
		case w == p.w[1] && it.State.Iteration == 2 && step.CompareAndSwap(1, 2):
			// Worker 1 ran and journaled iteration 3, then died before
			// its commit reached the repository; worker 0 is back.
			p.dead[0].Store(false)
			return dieBeforeCommit(t, bare, in, w, it)
		}
		return nil
	}
	res := p.run(t, in)
	if step.Load() != 2 || p.acquired.Load() != 3 {
		t.Fatalf("step %d, pinned %d times: the scenario did not play", step.Load(), p.acquired.Load())
	}
	checkRun(t, bare, in, &res)
}

// A worker SIGKILLed in the middle of a journal write leaves a torn last
// line; the worker that continues the run moves it to the side file,
// notes the repair, rewinds the iteration the workflow did not count and
// redoes it: the chain holds and the account reads as the run happened.
func TestARunContinuesAfterAWorkerTornItsJournal(t *testing.T) {
	in, bare := counterRun(t, WorkflowOptions{})
	p := newPool(t)
	torn := `{"seq":999,"time":"2026-11-25T00:00:00Z","type":"tool.call","iteration":3,"prev":"`
	var killed atomic.Bool
	p.kill = func(w *Activities, it IterationInput, res *IterationResult) error {
		if w != p.w[0] || it.State.Iteration != 1 || !killed.CompareAndSwap(false, true) {
			return nil
		}
		died := dieBeforeCommit(t, bare, in, w, it)
		found, err := testStore(t).Find("", in.RunID)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(found.Path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(torn); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return died
	}
	res := p.run(t, in)
	checkRun(t, bare, in, &res)
	events := runJournal(t, in.RunID)
	if countEvents(events, journal.Repaired) != 1 {
		t.Error("the journal does not record the repair of its torn line")
	}
	found, _ := testStore(t).Find("", in.RunID)
	if b, err := os.ReadFile(found.Path + journal.TornSuffix); err != nil || !strings.Contains(string(b), torn) {
		t.Errorf("the torn line is not kept in the side file: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Dir(found.Path)); err != nil {
		t.Fatal(err)
	}
}

// Activities without a Store use the state directory the worker's
// environment names, as a local run does — for every iteration, not just
// the first one (which agent.New journals there by itself).
func TestActivitiesWithoutAStoreUseTheStateDirectory(t *testing.T) {
	in, bare := counterRun(t, WorkflowOptions{})
	p := newPool(t)
	for _, w := range p.w {
		w.Store = journal.Store{}
	}
	var killed atomic.Bool
	p.kill = func(w *Activities, it IterationInput, res *IterationResult) error {
		if w != p.w[0] || it.State.Iteration != 1 || !killed.CompareAndSwap(false, true) {
			return nil
		}
		// The run moves: the other worker finds its journal.
		return dieBeforeCommit(t, bare, in, w, it)
	}
	res := p.run(t, in)
	checkRun(t, bare, in, &res)
	for _, rel := range []string{locksDir, "runs"} {
		if _, err := os.Stat(rel); err == nil {
			os.RemoveAll(rel)
			t.Errorf("the workers wrote %s in the current directory, not in the state directory", rel)
		}
	}
}
