package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/internal/temporaltest"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/scaleout"
)

// fakeKey is an API key in the workers' and the submitter's environment:
// it must never reach a workflow history.
const fakeKey = clitest.FakeKey

// tworker is a `capstan worker` process.
type tworker = clitest.Worker

// startWorker starts `capstan worker` on the Temporal server at addr with
// its work dirs under root, holding fakeKey.
func startWorker(t testing.TB, addr, root string, extra ...string) *tworker {
	return clitest.StartWorker(t, cliCommand, addr, root, extra...)
}

func gitT(t testing.TB, dir string, args ...string) string { return clitest.Git(t, dir, args...) }

// sharedRepo makes a bare repository every worker reaches (served over
// git:// on loopback, as a remote on another machine; see serveGit) and a
// clone of it as the submitter's work dir.
func sharedRepo(t testing.TB) (url, workDir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required")
	}
	base := t.TempDir()
	bare := filepath.Join(base, "origin.git")
	gitT(t, base, "init", "-q", "--bare", bare)
	workDir = filepath.Join(base, "work")
	url = serveGit(t, base) + "origin.git"
	gitT(t, base, "clone", "-q", url, workDir)
	if err := os.WriteFile(filepath.Join(workDir, "README"), []byte("work dir of the scale-out test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, workDir, "add", "README")
	gitT(t, workDir, "commit", "-q", "-m", "init")
	gitT(t, workDir, "push", "-q", "origin", "HEAD")
	return url, workDir
}

// counterAgent appends one line to log.txt per iteration with Bash and
// claims completion too early once (the validator sends a retry prompt).
const counterAgent = "../../../scaleout/testdata/counter"

// TestTemporalRunsSurviveAKilledWorker is the scale-out acceptance test:
// on a real Temporal dev server, two worker processes run ten runs of a
// multi-iteration agent (real Bash tool calls, a command validator); one
// worker is killed with SIGKILL mid-run. Every run completes, with each
// iteration counted once in the workflow, the run's branch and its
// journal, and each tool's side effect (a line of log.txt) applied once.
func TestTemporalRunsSurviveAKilledWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server and worker processes; run without -short")
	}
	addr := temporaltest.Server(t)
	repo, workDir := sharedRepo(t)
	base := gitT(t, workDir, "rev-parse", "HEAD")
	roots := t.TempDir()
	w1 := startWorker(t, addr, filepath.Join(roots, "w1"))
	startWorker(t, addr, filepath.Join(roots, "w2"))

	// The follower: the same progress lines, --json Result and exit code
	// as a local run.
	run := cliCommand("run", counterAgent, "--temporal", addr, "--workdir", workDir, "--repo", repo, "--json", "--stream", "--tag", "followed")
	run.Env = append(run.Env, "ANTHROPIC_API_KEY="+fakeKey)
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("capstan run --temporal: %v\n%s", err, stderr.String())
	}
	var followed event.RunResult
	if err := json.Unmarshal(stdout.Bytes(), &followed); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout.String())
	}
	if !followed.Success || followed.Iterations != 4 || !strings.Contains(stderr.String(), "[iteration 4] step work.count  tools 1") ||
		!strings.Contains(stderr.String(), "but four-lines failed") || !strings.Contains(stderr.String(), "  → Bash  sleep 0.2; echo line-3 >> log.txt") ||
		!strings.Contains(stderr.String(), "appended line 2. ALL_DONE") {
		t.Fatalf("followed run: %+v\n%s", followed, stderr.String())
	}

	// Ten runs, one per line of stdin.
	var tags strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&tags, "r%d\n", i)
	}
	submit := cliCommand("submit", counterAgent, "--temporal", addr, "--workdir", workDir, "--repo", repo,
		"--worker-timeout", "3s", "--each", "tag")
	submit.Env = append(submit.Env, "ANTHROPIC_API_KEY="+fakeKey)
	submit.Stdin = strings.NewReader(tags.String())
	out, err := submit.Output()
	if err != nil {
		t.Fatalf("capstan submit: %v", err)
	}
	ids := strings.Fields(string(out))
	if len(ids) != 10 {
		t.Fatalf("submit printed %d ids: %q", len(ids), out)
	}

	// Kill worker 1 while it holds runs that have not finished.
	bare := clitest.BarePath(repo)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		commits := 0
		for _, id := range ids {
			c := exec.Command("git", "rev-list", "--count", "capstan/"+id, "^"+base)
			c.Dir = bare
			if b, err := c.Output(); err == nil {
				n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				commits += n
			}
		}
		held, _ := os.ReadDir(w1.Root)
		if commits >= 6 && len(held) > 0 {
			if commits >= 40 {
				t.Fatal("every run finished before worker 1 could be killed: nothing was tested")
			}
			t.Logf("killing worker 1 after %d of 40 iterations, holding %d runs", commits, len(held))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs made no progress (%d iterations)", commits)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w1.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	c, err := scaleout.Dial(context.Background(), addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	moved, historyBytes, iterations, told := 0, 0, 0, map[string]bool{}
	for _, id := range ids {
		var res event.RunResult
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		found, err := testStore(t).Find("", id)
		if err != nil {
			t.Fatalf("run %s: journal: %v", id, err)
		}
		// No secret in any run's history.
		hist := historyJSON(t, c, id)
		if bytes.Contains(hist, []byte(fakeKey)) || bytes.Contains(hist, []byte("capstanTemporalSecret")) {
			t.Errorf("run %s: the API key is in the workflow history", id)
		}
		if cut := clitest.InterruptedLine(t, found.Path); cut != "" {
			// The kill cut a Bash call that the journal had not recorded
			// as finished: the tool-effect ledger did not run it again but
			// told the model, which this scripted model cannot act on — it
			// goes on with its script. Whether the cut call's line is in
			// the work dir the next attempt starts from depends on where
			// the kill fell: the worker pushes its checkpoint after a
			// call's effect and before the call's result is journaled, so
			// a kill between the two leaves the line in the checkpoint
			// (the call ran once, the model was told, and the validator
			// finds four lines); a kill before the checkpoint leaves it
			// out (three lines, and the validator keeps the run from
			// claiming success). Either way no call ran twice: log.txt on
			// the branch has each line at most once, in order; the
			// branch's iteration commits and the journal's iterations are
			// in order, once each, and the journal's chain holds.
			told[id] = true
			all := strings.Join([]string{"line-1", "line-2", "line-3", "line-4"}, "\n")
			three := strings.Join(slices.DeleteFunc([]string{"line-1", "line-2", "line-3", "line-4"}, func(l string) bool { return l == cut }), "\n")
			switch got := gitT(t, bare, "show", "capstan/"+id+":log.txt"); {
			case got == three && res.Success:
				t.Errorf("run %s (%s cut) claims success with three lines: %+v", id, cut, res)
			case got == all && !res.Success:
				t.Errorf("run %s (%s cut, its effect in the checkpoint): %+v", id, cut, res)
			case got != three && got != all:
				t.Errorf("run %s (%s cut): log.txt on its branch:\n%s", id, cut, got)
			}
			trailers := strings.Fields(gitT(t, bare, "log", "--reverse", "--format=%(trailers:key=Capstan-Iteration,valueonly)", "capstan/"+id, "^"+base))
			for i, n := range trailers {
				if n != strconv.Itoa(i+1) {
					t.Errorf("run %s (%s cut): iteration commits %v", id, cut, trailers)
					break
				}
			}
			rec, err := agent.LoadRun(found.ID, found.Path)
			// (The run's last commit records where it ended: after its
			// last finished iteration, or in the one it did not finish.)
			if n := len(trailers); err != nil || rec.Integrity.Err() != nil || rec.FinishedIterations() != n && rec.FinishedIterations() != n-1 {
				t.Errorf("run %s (%s cut): journal %v, integrity %v, %d finished iterations for %d commits", id, cut, err, rec.Integrity.Err(), rec.FinishedIterations(), n)
			}
			continue
		}
		if !res.Success || res.Iterations != 4 || res.CompletionReason != "completed" {
			t.Errorf("run %s: %+v", id, res)
		}
		// Each tool side effect once: the run's branch has each line once.
		if got := gitT(t, bare, "show", "capstan/"+id+":log.txt"); got != "line-1\nline-2\nline-3\nline-4" {
			t.Errorf("run %s: log.txt on its branch:\n%s", id, got)
		}
		// Each iteration once on the branch: commits 1..4, in order.
		trailers := gitT(t, bare, "log", "--reverse", "--format=%(trailers:key=Capstan-Iteration,valueonly)", "capstan/"+id, "^"+base)
		if got := strings.Join(strings.Fields(trailers), ","); got != "1,2,3,4" {
			t.Errorf("run %s: iteration commits %s", id, got)
		}
		// …and in the journal: four finished iterations, run.end completed.
		rec, err := agent.LoadRun(found.ID, found.Path)
		if err != nil {
			t.Fatal(err)
		}
		if rec.FinishedIterations() != 4 || rec.Result == nil || !rec.Result.Success || rec.Integrity.Err() != nil {
			t.Errorf("run %s: journal has %d finished iterations, result %+v, integrity %v", id, rec.FinishedIterations(), rec.Result, rec.Integrity.Err())
		}
		for i, it := range rec.Iterations {
			if it.Iteration != i+1 {
				t.Errorf("run %s: journal iteration %d is numbered %d", id, i+1, it.Iteration)
			}
		}
		// Moved runs and history size.
		historyBytes += historySize(t, c, id)
		iterations += res.Iterations
		if bytes.Contains(hist, []byte("ACTIVITY_TASK_TIMED_OUT")) || bytes.Contains(hist, []byte("EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT")) ||
			strings.Count(string(hist), scaleout.ActivityAcquire) > 1 {
			moved++
		}
	}
	if moved == 0 && len(told) == 0 {
		t.Error("no run moved to the other worker: the kill tested nothing")
	}
	if len(told) > 0 {
		t.Logf("%d runs had a Bash call cut by the kill: reported to the model, not run again", len(told))
	}
	t.Logf("%d of 10 runs moved to worker 2; workflow history %d bytes per iteration", moved, historyBytes/iterations)

	// capstan runs --temporal lists them with their journals' status.
	list := cliCommand("runs", "--temporal", addr)
	lout, err := list.Output()
	if err != nil {
		t.Fatalf("capstan runs --temporal: %v", err)
	}
	for _, id := range ids {
		if !told[id] && !clitest.HasLine(string(lout), id+`\s+completed\s+completed\s+4\s+counter`) {
			t.Errorf("capstan runs --temporal does not list %s as completed:\n%s", id, lout)
		}
	}
}

// TestTemporalCancel: capstan cancel and Ctrl-C on the follower end a
// run on Temporal as canceled, as Ctrl-C ends a local run.
func TestTemporalCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server and a worker process; run without -short")
	}
	addr := temporaltest.Server(t)
	repo, workDir := sharedRepo(t)
	startWorker(t, addr, t.TempDir())
	dir := sleepingAgent(t, 60)

	// Ctrl-C on the follower.
	// A canceled iteration learns of it from its next heartbeat: within
	// 0.8 x --worker-timeout.
	run := cliCommand("run", dir, "--temporal", addr, "--workdir", workDir, "--repo", repo, "--who", "Ada", "--json", "--worker-timeout", "2s")
	var stdout bytes.Buffer
	run.Stdout = &stdout
	pr, pw := io.Pipe()
	run.Stderr = pw
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "[iteration 1]") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	time.Sleep(300 * time.Millisecond) // iteration 2's sleep is under way
	if err := run.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := run.Wait()
	pw.Close()
	var res event.RunResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		t.Fatalf("--json after Ctrl-C: %v (%v)\n%s", jerr, err, strings.Join(lines, "\n"))
	}
	if code := clitest.ExitCode(err); code != 130 || res.CompletionReason != "canceled" || res.Iterations != 1 {
		t.Fatalf("Ctrl-C: exit %d, result %+v", code, res)
	}

	// capstan cancel RUN.
	id, c := submitSleeping(t, addr, dir, workDir, repo)
	if out, err := cliCommand("cancel", id, "--temporal", addr).CombinedOutput(); err != nil {
		t.Fatalf("capstan cancel: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res = event.RunResult{}
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.CompletionReason != "canceled" || res.Success {
		t.Fatalf("capstan cancel: %+v", res)
	}

	// A run that has ended cannot be canceled: the server would accept
	// the request and ignore it, so capstan says so instead.
	out, err := cliCommand("cancel", id, "--temporal", addr).CombinedOutput()
	if clitest.ExitCode(err) != exitUsage || !strings.Contains(string(out), "already ended") || !strings.Contains(string(out), "capstan show "+id) {
		t.Fatalf("cancel of an ended run: exit %d\n%s", clitest.ExitCode(err), out)
	}
}

// TestTemporalStoppedWorkerMovesItsRuns: a worker stopped with SIGTERM
// while it runs an iteration gives the run up — it neither journals the
// run's end nor commits the cut iteration as the run's canceled result —
// and the run finishes on another worker as if the first had died.
func TestTemporalStoppedWorkerMovesItsRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server and worker processes; run without -short")
	}
	addr := temporaltest.Server(t)
	repo, workDir := sharedRepo(t)
	base := gitT(t, workDir, "rev-parse", "HEAD")
	dir := sleepingAgent(t, 4)
	roots := t.TempDir()
	w1 := startWorker(t, addr, filepath.Join(roots, "w1"))
	id, c := submitSleeping(t, addr, dir, workDir, repo)
	startWorker(t, addr, filepath.Join(roots, "w2"))
	time.Sleep(500 * time.Millisecond) // iteration 2's sleep is under way on worker 1
	if err := w1.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w1.Exited:
		w1.Exited <- err // for the worker's cleanup
	case <-time.After(30 * time.Second):
		t.Fatalf("worker 1 did not stop on SIGTERM:\n%s", w1.Stderr.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res event.RunResult
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.CompletionReason != "completed" || res.Iterations != 2 {
		t.Fatalf("the run did not survive its worker's stop: %+v", res)
	}
	bare := clitest.BarePath(repo)
	trailers := gitT(t, bare, "log", "--reverse", "--format=%(trailers:key=Capstan-Iteration,valueonly)", "capstan/"+id, "^"+base)
	if got := strings.Join(strings.Fields(trailers), ","); got != "1,2" {
		t.Errorf("iteration commits %s", got)
	}
	found, err := testStore(t).Find("", id)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := agent.LoadRun(found.ID, found.Path)
	if err != nil {
		t.Fatal(err)
	}
	ends := 0
	events, _ := journal.ReadFile(found.Path)
	for _, ev := range events {
		if ev.Type == journal.RunEnd {
			ends++
		}
	}
	if ends != 1 || rec.FinishedIterations() != 2 || rec.Integrity.Err() != nil {
		t.Errorf("journal: %d run.end events, %d finished iterations, integrity %v", ends, rec.FinishedIterations(), rec.Integrity.Err())
	}
}

// submitSleeping submits a run of sleepingAgent dir with a worker timeout
// of 2 s and waits until its first iteration is done; it returns the run's
// id and a client of the server.
func submitSleeping(t *testing.T, addr, dir, workDir, repo string) (string, client.Client) {
	t.Helper()
	submit := cliCommand("submit", dir, "--temporal", addr, "--workdir", workDir, "--repo", repo, "--who", "Ada", "--worker-timeout", "2s")
	out, err := submit.Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(out))
	c, err := scaleout.Dial(context.Background(), addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	waitIteration(t, c, id, 1)
	return id, c
}

// waitIteration waits until run id has finished n iterations, by its
// progress query.
func waitIteration(t *testing.T, c client.Client, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		v, err := c.QueryWorkflow(context.Background(), id, "", scaleout.QueryProgress)
		var p scaleout.Progress
		if err == nil && v.Get(&p) == nil && p.State.Iteration >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not finish iteration %d: %+v, query error %v", id, n, p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// historySize is the size of the run's workflow history as the server
// stores it (protobuf).
func historySize(t *testing.T, c client.Client, id string) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		n += proto.Size(ev)
	}
	return n
}

// historyJSON returns the run's workflow history (every run of it, when it
// continued as new) as JSON.
func historyJSON(t *testing.T, c client.Client, id string) []byte {
	t.Helper()
	var buf bytes.Buffer
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	// Payloads are base64 in JSON: add them decoded, so a search sees
	// what they carry.
	raw := buf.Bytes()
	for _, m := range payloadData.FindAllSubmatch(raw, -1) {
		if dec, err := base64.StdEncoding.DecodeString(string(m[1])); err == nil {
			buf.Write(dec)
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes()
}

var payloadData = regexp.MustCompile(`"data":"([A-Za-z0-9+/=]+)"`)
