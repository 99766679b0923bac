package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"

	"github.com/capstan-dev/capstan/scaleout"
	"github.com/capstan-dev/capstan/workflow"
)

// workflowTemporalFlags are the flags of `capstan workflow run --temporal`.
type workflowTemporalFlags struct {
	temporal    temporalFlags
	gitRepo     string
	concurrency int
}

func (f *workflowTemporalFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.temporal.address, "temporal", "", "run on Temporal at this frontend `HOST:PORT`: each issue is a workflow, each dispatched agent a run on the capstan worker processes")
	fs.StringVar(&f.temporal.namespace, "namespace", scaleout.DefaultNamespace, "Temporal namespace (with --temporal)")
	fs.StringVar(&f.temporal.taskQueue, "task-queue", scaleout.DefaultTaskQueue, "Temporal task queue the workers poll (with --temporal)")
	fs.DurationVar(&f.temporal.workerTimeout, "worker-timeout", 20*time.Second, "how long a silent or unreachable worker keeps an agent run or an issue change before it moves to another worker (with --temporal)")
	fs.IntVar(&f.concurrency, "concurrency", 4, "batch: issues run at once (with --temporal)")
	fs.StringVar(&f.gitRepo, "git-repo", "", "git repository every worker reaches, for the issues' branches (with --temporal; default: the work dir's own repository)")
}

// temporalOnly are the flags that need --temporal.
var temporalOnly = []string{"namespace", "task-queue", "worker-timeout", "concurrency", "git-repo"}

// checkWorkflowTemporalFlags refuses the flags and workflow sections
// that cannot act with or without --temporal.
func checkWorkflowTemporalFlags(fs *pflag.FlagSet, f workflowRunFlags, wf *workflow.Workflow) error {
	if f.tf.temporal.address == "" {
		for _, name := range temporalOnly {
			if fs.Changed(name) {
				return withExit(exitUsage, fmt.Errorf("workflow run: --%s needs --temporal HOST:PORT", name))
			}
		}
		return nil
	}
	switch {
	case f.dryRun:
		return withExit(exitUsage, errors.New("workflow run: --dry-run prints the plan without running anything; drop --temporal (the plan is the same)"))
	case f.tf.concurrency < 1:
		return withExit(exitUsage, fmt.Errorf("workflow run: --concurrency %d: want at least 1", f.tf.concurrency))
	case reachableHandoffs(wf):
		return withExit(exitUsage, fmt.Errorf("workflow run: %s has handoffs that fire, which write artifacts into the work dir and the subject store of the machine that runs them; on Temporal the agents run on the workers: run this workflow without --temporal", f.file))
	case f.tf.temporal.workerTimeout < time.Second:
		return withExit(exitUsage, fmt.Errorf("workflow run: --worker-timeout %s: want at least 1s", f.tf.temporal.workerTimeout))
	}
	return nil
}

// temporalIssueRun is what starting one issue's workflow needs.
type temporalIssueRun struct {
	c          client.Client
	taskQueue  string
	workflowID string
	base       scaleout.IssueInput
	branches   map[int]string
}

// runWorkflowOnTemporal runs the queued issues as issue workflows on
// Temporal, at most --concurrency at once (in queue order, cycleDelayMs
// apart), journaling each issue's events when it ends.
func runWorkflowOnTemporal(ctx context.Context, stderr io.Writer, f workflowRunFlags, wf *workflow.Workflow, issues workflow.Issues,
	disp workflow.Dispatcher, workDir, runID string, queue []int, jw event.Emitter) ([]event.WorkflowIssueResult, error) {
	raw, err := os.ReadFile(f.file)
	if err != nil {
		return nil, withExit(exitUsage, fmt.Errorf("workflow run: %v", err))
	}
	tr := temporalIssueRun{taskQueue: f.tf.temporal.taskQueue, workflowID: wf.ID()}
	in := scaleout.IssueInput{RunID: runID, WorkflowFile: f.file, Workflow: raw, Model: f.model, TaskQueue: f.tf.temporal.taskQueue,
		Options: scaleout.WorkflowOptions{Heartbeat: f.tf.temporal.workerTimeout, ScheduleToStart: f.tf.temporal.workerTimeout}}
	switch s := issues.(type) {
	case *workflow.Local:
		in.Store.Local = s.Dir
	case *github.CLI:
		in.Store.Repo = s.Repo
	}
	if ad, ok := disp.(*agentDispatcher); ok {
		in.Agents = map[string]scaleout.DispatchAgent{}
		for id, def := range ad.defs {
			da, err := scaleout.PinAgent(def, f.model, "")
			if err != nil {
				return nil, withExit(exitCodeFor(err, true), err)
			}
			in.Agents[id] = da
		}
		if in.Repo, tr.branches, err = scaleout.IssueBranches(ctx, workDir, f.tf.gitRepo, runID, queue); err != nil {
			return nil, withExit(exitCodeFor(err, true), err)
		}
		if in.Repo == "" {
			in.WorkDir = workDir
		}
	} else {
		in.Stub = disp.(*stubDispatcher).outcomes
		if in.Stub == nil {
			in.Stub = map[string]string{}
		}
	}
	tr.base = in
	if tr.c, err = f.tf.temporal.dial(ctx, stderr); err != nil {
		return nil, err
	}
	defer tr.c.Close()

	results := make([]event.WorkflowIssueResult, len(queue))
	var mu sync.Mutex // one issue's events stay together in the journal
	var wg sync.WaitGroup
	slots := make(chan struct{}, f.tf.concurrency)
	for i, n := range queue {
		if i > 0 && wf.Rules.CycleDelayMs > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(wf.Rules.CycleDelayMs) * time.Millisecond):
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			results[i] = event.WorkflowIssueResult{Issue: n, Status: workflow.StatusFailed, History: []event.WorkflowTransition{}, Error: "not started: interrupted"}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			res, events := tr.run(ctx, stderr, f.quiet, n)
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range events {
				jw.Emit(event.Raw{Kind: event.Kind(ev.Type), Data: ev.Data})
			}
			results[i] = res
		}()
	}
	wg.Wait()
	return results, nil
}

// run starts issue n's workflow and waits for it; it returns the issue's
// result and its journal events.
func (tr *temporalIssueRun) run(ctx context.Context, stderr io.Writer, quiet bool, n int) (event.WorkflowIssueResult, []scaleout.IssueEvent) {
	in := tr.base
	in.Issue = n
	if in.Repo != "" {
		in.Branch = tr.branches[n]
	}
	id := scaleout.IssueWorkflowID(in.Store, tr.workflowID, n)
	failed := func(status, msg string) (event.WorkflowIssueResult, []scaleout.IssueEvent) {
		res := event.WorkflowIssueResult{Issue: n, Status: status, FinalPhase: "unknown", History: []event.WorkflowTransition{}, Error: msg}
		return res, []scaleout.IssueEvent{issueEvent(string(event.KindWorkflowIssueStart), map[string]any{"issue": n}), issueEvent(string(event.KindWorkflowIssueEnd), res)}
	}
	wr, err := scaleout.StartIssue(ctx, tr.c, tr.taskQueue, tr.workflowID, &in)
	if errors.Is(err, scaleout.ErrIssueRunning) {
		return failed(workflow.StatusBlocked, fmt.Sprintf("issue %d is being run by another workflow run (Temporal workflow %s is running)", n, id))
	}
	if err != nil {
		return failed(workflow.StatusFailed, fmt.Sprintf("start the workflow of issue %d on Temporal: %v", n, err))
	}
	if !quiet {
		fmt.Fprintf(stderr, "issue #%d: Temporal workflow %s\n", n, id)
	}
	out, err := scaleout.IssueEnded(ctx, wr)
	if err != nil {
		if ctx.Err() != nil {
			return failed(workflow.StatusFailed, fmt.Sprintf("stopped waiting (interrupted); the issue's workflow %s goes on on Temporal", id))
		}
		return failed(workflow.StatusFailed, err.Error())
	}
	return out.Result, out.Events
}

func issueEvent(t string, data any) scaleout.IssueEvent {
	b, _ := json.Marshal(data)
	return scaleout.IssueEvent{Type: t, Data: b}
}

// workerIssues opens the issue stores of the issue workflows a worker
// runs: a local directory, or GitHub through the worker's gh — one
// outside the worker's checkouts under root (which models write), run
// with gh's minimal environment, naming the repository in every call.
func workerIssues(root string) scaleout.OpenIssues {
	return func(s scaleout.IssueStore) (workflow.Issues, error) {
		if s.Local != "" {
			if !filepath.IsAbs(s.Local) {
				return nil, fmt.Errorf("local issue directory %q is not an absolute path", s.Local)
			}
			return &workflow.Local{Dir: s.Local}, nil
		}
		if !ghRepoName(s.Repo) {
			return nil, fmt.Errorf("repository %q is not OWNER/NAME", s.Repo)
		}
		gh, err := trustedGH(root)
		if err != nil {
			return nil, err
		}
		return &github.CLI{Path: gh, Env: ghEnv(os.Environ(), root), Dir: os.TempDir(), Repo: s.Repo}, nil
	}
}

// reachableHandoffs reports whether a handoff of wf can fire: its agent is
// dispatched by an actionable phase.
func reachableHandoffs(wf *workflow.Workflow) bool {
	for _, h := range wf.Handoffs {
		for _, ph := range wf.Phases {
			if ph.Type == workflow.Actionable && ph.Agent == h.FromAgent {
				return true
			}
		}
	}
	return false
}
