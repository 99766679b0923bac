package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/runreport"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/verify"
)

func TestMain(m *testing.M) {
	sandbox.Init() // sandboxed commands re-execute the test binary as their helper
	os.Exit(testenv.Run(m))
}

var quietLogger = log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

func gitT(t testing.TB, dir string, args ...string) string { return clitest.Git(t, dir, args...) }

// counterRun prepares a run of testdata/counter in a fresh work dir whose
// repository (the one every worker reaches) is a bare file:// repo.
func counterRun(t testing.TB, opts WorkflowOptions) (*RunInput, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required")
	}
	base := t.TempDir()
	bare := filepath.Join(base, "origin.git")
	gitT(t, base, "init", "-q", "--bare", bare)
	wd := filepath.Join(base, "work")
	gitT(t, base, "clone", "-q", "file://"+bare, wd)
	if err := os.WriteFile(filepath.Join(wd, "README"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, wd, "add", "README")
	gitT(t, wd, "commit", "-q", "-m", "init")
	def, err := agent.LoadPinned(filepath.Join("testdata", "counter"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := PrepareRun(context.Background(), Submission{Agent: def, WorkDir: wd, Repo: "file://" + bare,
		Params: map[string]string{"tag": "unit"}, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return in, bare
}

func testStore(t testing.TB) journal.Store {
	t.Helper()
	s, err := journal.OpenStore(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pool is two workers' activities behind the test environment, which has
// no task queues: iterations go to the worker whose queue the workflow
// chose. kill, when set, is called after a worker's iteration returns and
// may turn its answer into the failure a dead worker causes.
type pool struct {
	w [2]*Activities
	// acquired counts the runs pinned to a worker (by ActivityAcquire in
	// histories recorded before, by an iteration on the shared queue now).
	acquired atomic.Int32
	dead     [2]atomic.Bool
	kill     func(w *Activities, in IterationInput, res *IterationResult) error
	// iterate, when set, runs an iteration on a worker in place of its
	// Iterate (to play a zombie attempt next to the real one).
	iterate func(ctx context.Context, w *Activities, in IterationInput) (*IterationResult, error)
}

func newPool(t testing.TB) *pool {
	p := &pool{}
	store := testStore(t)
	for i := range p.w {
		p.w[i] = &Activities{Queue: []string{"q1", "q2"}[i], Root: filepath.Join(t.TempDir(), "root"), Store: store}
		t.Cleanup(p.w[i].Close)
	}
	return p
}

func (p *pool) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterWorkflowWithOptions(Run, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivityWithOptions(func(ctx context.Context) (string, error) {
		// Workers take turns at pinning runs.
		return p.w[int(p.acquired.Add(1)-1)%2].Acquire(ctx)
	}, activity.RegisterOptions{Name: ActivityAcquire})
	env.RegisterActivityWithOptions(func(ctx context.Context, in IterationInput) (*IterationResult, error) {
		i := slices.IndexFunc(p.w[:], func(w *Activities) bool { return w.Queue == activity.GetInfo(ctx).TaskQueue })
		if i < 0 {
			// The iteration of a run no worker holds, on the shared
			// queue: workers take turns at it (a dead one polls
			// nothing), and the one that runs it holds the run.
			if i = int(p.acquired.Add(1)-1) % 2; p.dead[i].Load() {
				i = 1 - i
			}
		} else if p.dead[i].Load() {
			// Nobody polls a dead worker's queue: the retry of its
			// iteration is never picked up.
			return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		}
		iterate := p.iterate
		if iterate == nil {
			iterate = func(ctx context.Context, w *Activities, in IterationInput) (*IterationResult, error) {
				return w.Iterate(ctx, in)
			}
		}
		res, err := iterate(ctx, p.w[i], in)
		if err == nil && p.kill != nil {
			if kerr := p.kill(p.w[i], in, res); kerr != nil {
				p.dead[i].Store(true)
				return nil, kerr
			}
		}
		return res, err
	}, activity.RegisterOptions{Name: ActivityIterate})
}

// run executes the run's workflow on the pool's workers in a test
// environment and returns the run's result.
func (p *pool) run(t *testing.T, in *RunInput) event.RunResult {
	t.Helper()
	env := newEnv(t)
	p.register(env)
	env.ExecuteWorkflow(WorkflowName, *in)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res event.RunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// dieBeforeCommit makes worker w die as if killed after journaling the
// iteration after it.State but before its commit reached the repository,
// and returns the failure the workflow then sees.
func dieBeforeCommit(t testing.TB, bare string, in *RunInput, w *Activities, it IterationInput) error {
	gitT(t, bare, "update-ref", "refs/heads/"+in.Branch, it.State.Commit)
	w.Close() // the process is gone, and its agents with it
	return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger)
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(2 * time.Minute)
	// The SDK's deadlock detector fails a workflow task that does not
	// yield within 1s of wall-clock time, which a loaded 2-core machine
	// reached in workflow code that does not block (a verdict that changed
	// under load). The tests assert what the workflow did, so the detector
	// gets a margin; a real deadlock still fails at the test timeout.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return env
}

func checkRun(t *testing.T, bare string, in *RunInput, res *event.RunResult) {
	t.Helper()
	if !res.Success || res.Iterations != 4 || res.CompletionReason != "completed" {
		t.Fatalf("result: %+v", res)
	}
	if got := gitT(t, bare, "show", in.Branch+":log.txt"); got != "line-1\nline-2\nline-3\nline-4" {
		t.Errorf("log.txt on the run's branch:\n%s", got)
	}
	trailers := gitT(t, bare, "log", "--reverse", "--format=%(trailers:key=Capstan-Iteration,valueonly)", in.Branch, "^"+in.BaseCommit)
	if got := strings.Join(strings.Fields(trailers), ","); got != "1,2,3,4" {
		t.Errorf("iteration commits: %s", got)
	}
	// Its iterations' Bash calls were checkpointed to the run's wip ref;
	// the ended run leaves only its branch.
	if refs := gitT(t, bare, "for-each-ref", "refs/capstan"); refs != "" {
		t.Errorf("the ended run left its checkpoint: %s", refs)
	}
	found, err := testStore(t).Find("", in.RunID)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := agent.LoadRun(found.ID, found.Path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.FinishedIterations() != 4 || rec.Result == nil || !rec.Result.Success || rec.Integrity.Err() != nil {
		t.Errorf("journal: %d finished iterations, result %+v, integrity %v", rec.FinishedIterations(), rec.Result, rec.Integrity.Err())
	}
	for i, it := range rec.Iterations {
		if it.Iteration != i+1 || !it.Finished {
			t.Errorf("journal iteration %d: %+v", i+1, it)
		}
	}
	// capstan show and report tell the same account: the iterations the
	// workflow counted, once each.
	acc, err := runreport.Load(found.ID, found.Path)
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, it := range acc.Iterations {
		shown = append(shown, fmt.Sprintf("%d:%v", it.N, it.Finished))
	}
	if got := strings.Join(shown, ","); got != "1:true,2:true,3:true,4:true" || acc.Outcome == nil || !acc.Outcome.Success {
		t.Errorf("the run's account shows iterations %s, outcome %+v", got, acc.Outcome)
	}
}

// The workflow runs the agent's iterations on the worker it pinned the
// run to, verification and retry prompts included, and commits each.
func TestWorkflowRunsTheAgent(t *testing.T) {
	in, bare := counterRun(t, WorkflowOptions{})
	p := newPool(t)
	res := p.run(t, in)
	checkRun(t, bare, in, &res)
	if n := p.acquired.Load(); n != 1 {
		t.Errorf("the run was pinned %d times, want once", n)
	}
	// The verdict stage ran on the worker: iteration 2's early claim was
	// rejected by the validator and answered with the retry prompt.
	found, _ := testStore(t).Find("", in.RunID)
	rec, _ := agent.LoadRun(found.ID, found.Path)
	if got := rec.Iterations[2].PromptSource; !strings.HasPrefix(got, "retry:short") {
		t.Errorf("iteration 3's prompt came from %q, want the retry prompt of pattern short", got)
	}
}

// A worker that dies during an iteration, before committing it: the run
// moves to the other worker, which checks out the last commit, rewinds
// the journal and redoes the iteration — counted once, its Bash side
// effect applied once.
func TestWorkflowMovesARunWhoseWorkerDied(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed bool // the worker died after pushing the iteration's commit
	}{{"before its commit", false}, {"after its commit", true}} {
		t.Run(tc.name, func(t *testing.T) {
			in, bare := counterRun(t, WorkflowOptions{})
			p := newPool(t)
			var killed atomic.Bool
			p.kill = func(w *Activities, it IterationInput, res *IterationResult) error {
				if w != p.w[0] || it.State.Iteration != 1 || !killed.CompareAndSwap(false, true) {
					return nil
				}
				if !tc.committed {
					// The iteration ran and journaled, but the commit never
					// reached the shared repository.
					return dieBeforeCommit(t, bare, in, w, it)
				}
				w.Close() // the process is gone, and its agents with it
				return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
			}
			res := p.run(t, in)
			if !killed.Load() || p.acquired.Load() != 2 {
				t.Fatalf("killed %v, pinned %d times", killed.Load(), p.acquired.Load())
			}
			checkRun(t, bare, in, &res)
		})
	}
}

// Short iterations run one after another in one activity, each committed
// and pushed as it ends: a worker that dies after the run's four
// iterations, before its answer reached the server, leaves the branch
// four iterations ahead of the workflow. The other worker reads them from
// the branch (each commit recording the iteration before the next one's)
// and ends the run with the result the last commit records — each
// iteration counted once, its Bash side effect applied once.
func TestWorkflowMovesAChainedRunWhoseWorkerDied(t *testing.T) {
	// However slow the machine, the four iterations share the activity.
	in, bare := counterRun(t, WorkflowOptions{ChainFor: time.Hour})
	p := newPool(t)
	var killed atomic.Bool
	activities := 0
	p.iterate = func(ctx context.Context, w *Activities, it IterationInput) (*IterationResult, error) {
		activities++
		return w.Iterate(ctx, it)
	}
	p.kill = func(w *Activities, it IterationInput, res *IterationResult) error {
		if it.State.Iteration != 0 || res.Iteration < 4 || !killed.CompareAndSwap(false, true) {
			return nil
		}
		if len(res.Earlier) != 3 {
			t.Errorf("the first activity ran iterations to %d with earlier outcomes %+v: not chained", res.Iteration, res.Earlier)
		}
		w.Close() // the process is gone, and its agents with it
		return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
	}
	res := p.run(t, in)
	if !killed.Load() {
		t.Fatal("the first activity did not run the four iterations: nothing was tested")
	}
	checkRun(t, bare, in, &res)
	if activities != 2 {
		t.Errorf("%d iteration activities, want 2: the four iterations, and the other worker's reading of them", activities)
	}
}

// Every ContinueEvery iterations the workflow continues as new with the
// run's state; the continued workflow picks the run up where it was.
func TestWorkflowContinuesAsNew(t *testing.T) {
	in, bare := counterRun(t, WorkflowOptions{ContinueEvery: 2})
	p := newPool(t)
	next := *in
	var res event.RunResult
	for round := 0; ; round++ {
		if round > 3 {
			t.Fatal("the workflow did not end")
		}
		env := newEnv(t)
		p.register(env)
		env.ExecuteWorkflow(WorkflowName, next)
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			next = RunInput{}
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			if next.State == nil || next.State.Iteration != 2*(round+1) || len(next.Definition) != 0 {
				t.Fatalf("continued with %+v", next.State)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		break
	}
	checkRun(t, bare, in, &res)
	if n := p.acquired.Load(); n != 1 {
		t.Errorf("pinned %d times: the continued workflow should keep the run's worker", n)
	}
}

// A provider rate limit is retried by the activity's retry policy after
// the server's retry-after, not turned into the end of the run; an
// authentication error is not retried.
func TestRetryableFollowsCapstanClassification(t *testing.T) {
	for _, tc := range []struct {
		code        string
		recoverable bool
		retry       bool
	}{
		{"SDK_RATE_LIMIT", true, true},
		{"SDK_CONNECTION", true, true},
		{"SDK_AUTH", false, false},
		{"SDK_REQUEST", false, false},
	} {
		res := &event.RunResult{Iterations: 2, Error: &event.ResultError{Code: tc.code, Message: "m", Recoverable: tc.recoverable}}
		err := retryable(res, 2)
		if (err != nil) != tc.retry {
			t.Errorf("%s: retryable = %v", tc.code, err)
		}
		var ae *temporal.ApplicationError
		if err != nil && (!errors.As(err, &ae) || ae.Type() != tc.code || ae.NonRetryable()) {
			t.Errorf("%s: %v", tc.code, err)
		}
	}
	// A finished iteration is never redone, whatever ended the run after it.
	if err := retryable(&event.RunResult{Iterations: 3, Error: &event.ResultError{Code: "SDK_RATE_LIMIT", Recoverable: true}}, 2); err != nil {
		t.Errorf("retryable after a finished iteration: %v", err)
	}
}

// PrepareRun refuses work dirs a worker could not check out, with a coded
// error whose hint says what to do.
func TestPrepareRunRefusesWorkDirsItCannotCheckOut(t *testing.T) {
	def, err := agent.LoadPinned(filepath.Join("testdata", "counter"))
	if err != nil {
		t.Fatal(err)
	}
	// A folder inside a repository: workers check out whole repositories.
	repo := t.TempDir()
	gitT(t, repo, "init", "-q")
	sub := filepath.Join(repo, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = PrepareRun(context.Background(), Submission{Agent: def, WorkDir: sub})
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeConfigurationValidation || e.Hint != "pass --workdir "+verify.ShellQuote(repo) {
		t.Fatalf("work dir inside a repository: %v", err)
	}
	// A repository without a commit has nothing to branch from.
	_, err = PrepareRun(context.Background(), Submission{Agent: def, WorkDir: repo})
	if e := agenterr.From(err); e == nil || !strings.Contains(e.Hint, "commit") {
		t.Fatalf("repository without a commit: %v", err)
	}
	// --repo needs a git work dir.
	_, err = PrepareRun(context.Background(), Submission{Agent: def, WorkDir: t.TempDir(), Repo: "file://" + repo})
	if err == nil || !strings.Contains(err.Error(), "needs the work dir") {
		t.Fatalf("--repo with a plain folder: %v", err)
	}
	// A plain folder is used as it is: no repository, no branch.
	plain := t.TempDir()
	in, err := PrepareRun(context.Background(), Submission{Agent: def, WorkDir: plain})
	if err != nil || in.Repo != "" || in.Branch != "" || in.WorkDir != plain {
		t.Fatalf("plain work dir: %+v %v", in, err)
	}
}

// A work dir that is not a git repository is used as it is, on the worker
// that runs the run: nothing is committed, and the run completes there.
func TestWorkflowRunsInAPlainWorkDir(t *testing.T) {
	def, err := agent.LoadPinned(filepath.Join("testdata", "counter"))
	if err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir()
	in, err := PrepareRun(context.Background(), Submission{Agent: def, WorkDir: plain})
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(t)
	res := p.run(t, in)
	if !res.Success || res.Iterations != 4 {
		t.Fatalf("%+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(plain, "log.txt")); err != nil || string(b) != "line-1\nline-2\nline-3\nline-4\n" {
		t.Fatalf("log.txt: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(plain, ".git")); !os.IsNotExist(err) {
		t.Fatalf("a plain work dir became a repository: %v", err)
	}
}

// A --repo or --base-url with a token in its URL is refused before it can
// enter workflow input (and so Temporal's history); the run's branch is not
// created.
func TestPrepareRunRefusesCredentialsInURLs(t *testing.T) {
	def, err := agent.LoadPinned(filepath.Join("testdata", "counter"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    Submission
		says string
	}{
		{Submission{Agent: def, WorkDir: t.TempDir(), Repo: "https://x-access-token:ghp_SECRET@github.com/o/r.git"}, "password or token"},
		{Submission{Agent: def, WorkDir: t.TempDir(), BaseURL: "https://user:sk-SECRET@llm.example/v1"}, "user or password"},
		{Submission{Agent: def, WorkDir: t.TempDir(), BaseURL: "https://sk-SECRET@llm.example/v1"}, "user or password"},
		{Submission{Agent: def, WorkDir: t.TempDir(), BaseURL: "https://llm.example/v1?key=sk-SECRET"}, "query string"},
	} {
		in, err := PrepareRun(context.Background(), tc.s)
		if err == nil {
			t.Fatalf("PrepareRun accepted a URL with a token: %+v", in)
		}
		if e := agenterr.From(err); strings.Contains(err.Error()+e.Hint, "SECRET") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("error = %v", err)
		}
	}
	// runner.baseUrl travels in the definition: loading it to submit it
	// refuses it.
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "counter"))); err != nil {
		t.Fatal(err)
	}
	agentJSON := filepath.Join(dir, "agent.json")
	b, err := os.ReadFile(agentJSON)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `"runner": {`, `"runner": {"baseUrl": "https://llm.example/v1?key=sk-SECRET",`, 1)
	if edited == string(b) {
		t.Fatal("testdata agent.json has no runner object to edit")
	}
	if err := os.WriteFile(agentJSON, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.LoadPinned(dir); err == nil || !strings.Contains(err.Error(), "AC-BASE-URL") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("runner.baseUrl with a key: %v", err)
	}
	if _, err := PrepareRun(context.Background(), Submission{Agent: def, WorkDir: t.TempDir(), Repo: "https://github.com/o/r.git"}); err != nil && strings.Contains(err.Error(), "password or token") {
		t.Errorf("a URL without a password was refused: %v", err)
	}
}

// PrepareRuns makes a batch of runs of one submission: each with its own
// run ID, branch and parameters, every branch created in the repository at
// the work dir's HEAD; a run ID cannot name a batch.
func TestPrepareRunsCreatesEveryBranchAtOnce(t *testing.T) {
	base := t.TempDir()
	bare := filepath.Join(base, "origin.git")
	gitT(t, base, "init", "-q", "--bare", bare)
	wd := filepath.Join(base, "work")
	gitT(t, base, "clone", "-q", "file://"+bare, wd)
	gitT(t, wd, "commit", "-q", "--allow-empty", "-m", "init")
	head := gitT(t, wd, "rev-parse", "HEAD")
	def, err := agent.LoadPinned(filepath.Join("testdata", "counter"))
	if err != nil {
		t.Fatal(err)
	}
	params := make([]map[string]string, 2*pushChunk+3) // three pushes
	for i := range params {
		params[i] = map[string]string{"tag": fmt.Sprint("r", i)}
	}
	ins, err := PrepareRuns(context.Background(), Submission{Agent: def, WorkDir: wd, Repo: "file://" + bare}, params)
	if err != nil {
		t.Fatal(err)
	}
	branches := strings.Fields(gitT(t, bare, "for-each-ref", "--format=%(objectname):%(refname:short)", "refs/heads/capstan"))
	if len(ins) != len(params) || len(branches) != len(params) {
		t.Fatalf("%d inputs, %d branches for %d runs", len(ins), len(branches), len(params))
	}
	ids := map[string]bool{}
	for i, in := range ins {
		if ids[in.RunID] || in.Params["tag"] != params[i]["tag"] || in.BaseCommit != head || in.Branch != "capstan/"+in.RunID || in.Repo != "file://"+bare {
			t.Fatalf("run %d: %+v", i, in)
		}
		ids[in.RunID] = true
		if !slices.Contains(branches, head+":"+in.Branch) {
			t.Fatalf("run %d: branch %s not at %s in %v", i, in.Branch, head, branches[:3])
		}
	}
	if _, err := PrepareRuns(context.Background(), Submission{Agent: def, WorkDir: wd, RunID: "one"}, params[:2]); err == nil {
		t.Fatal("a run ID was given to two runs")
	}
}
