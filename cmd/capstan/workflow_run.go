package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/runreport"
	"github.com/capstan-dev/capstan/workflow"
)

// workflowExit maps a workflow status to its exit code.
func workflowExit(status string) int {
	switch status {
	case workflow.StatusCompleted, workflow.StatusDryRun:
		return exitOK
	case workflow.StatusFailed:
		return exitInternal
	}
	return exitNotCompleted
}

func runWorkflow(cmd *cobra.Command, f workflowRunFlags) error {
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	fs := cmd.Flags()
	batch := fs.Changed("label")
	if err := checkWorkflowSelection(fs, f); err != nil {
		return err
	}
	workDir, err := workflowPaths(&f)
	if err != nil {
		return err
	}
	wf, err := loadWorkflow(stderr, f)
	if err != nil {
		return err
	}
	stub, err := stubOutcomes(f, wf)
	if err != nil {
		return err
	}
	if err := checkWorkflowTemporalFlags(fs, f, wf); err != nil {
		return err
	}
	if err := checkPrioritize(f, wf, batch, stub != nil); err != nil {
		return err
	}
	// Every agent folder is read once, before any agent runs: a run cannot
	// change the agents the next dispatches use.
	var disp workflow.Dispatcher = &stubDispatcher{outcomes: stub}
	if stub == nil && !f.dryRun {
		d, err := pinAgents(stderr, wf, f, workDir, givenFlags(fs))
		if err != nil {
			return err
		}
		disp = d
	}
	issues, storeDir, what, err := workflowIssues(ctx, f, wf, workDir)
	if err != nil {
		return err
	}
	store, err := runStore()
	if err != nil {
		return err
	}
	id := journal.NewRunID(time.Now())
	jw, err := store.Create(workDir, id)
	if err != nil {
		return withExit(exitInternal, err)
	}
	defer jw.Close()
	events := event.Journal{Writer: jw}
	target := workflowTarget(f, batch)
	events.Emit(event.WorkflowStart{Command: workflow.Command, Workflow: f.file, WorkDir: workDir,
		Issues: target, Store: what, DryRun: f.dryRun, Stub: stub != nil, Temporal: f.tf.temporal.address})
	r := &workflow.Runner{Workflow: wf, Issues: issues, Dispatch: disp, Events: events, DryRun: f.dryRun,
		Lock: func(n int) (func(), bool, error) { return lockIssue(store, wf, what, n) }}
	if len(wf.Handoffs) > 0 && !f.dryRun {
		r.Handoffs = &workflow.HandoffEmitter{Workflow: wf, WorkDir: workDir, StoreDir: storeDir, Events: events}
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "workflow run %s: %s, %s\n", id, target, what)
	}
	syncLabels(ctx, stderr, r)
	var end event.WorkflowEnd
	if f.prioritize {
		end = prioritizeBatch(ctx, stderr, f, wf, r, storeDir)
	} else if f.tf.temporal.address != "" {
		if end, err = temporalWorkflow(ctx, stderr, f, wf, issues, disp, workDir, id, events, batch); err != nil {
			return err
		}
	} else {
		end = localWorkflow(ctx, r, f, batch)
	}
	end.Success = workflowExit(end.Status) == exitOK
	events.Emit(end)
	if err := jw.Close(); err != nil {
		return withExit(exitInternal, err)
	}
	return reportWorkflowEnd(cmd, f, id, jw.Path(), end)
}

// workflowPaths resolves the work dir of `workflow run` (which must
// exist) and, below it by default, the workflow file and the agents'
// folder.
func workflowPaths(f *workflowRunFlags) (workDir string, err error) {
	if err := checkWorkDirExists(f.workDir); err != nil {
		return "", withExit(exitUsage, err)
	}
	if workDir, err = filepath.Abs(f.workDir); err != nil {
		return "", withExit(exitUsage, err)
	}
	if f.file == "" {
		f.file = filepath.Join(workDir, ".agent", "workflow.json")
	}
	if f.agentsDir == "" {
		f.agentsDir = filepath.Join(workDir, ".agent")
	}
	return workDir, nil
}

// workflowTarget says which issues the run takes.
func workflowTarget(f workflowRunFlags, batch bool) string {
	if batch {
		return fmt.Sprintf("%s issues labelled %s (at most %d)", f.state, strings.Join(f.labels, ", "), f.limit)
	}
	return fmt.Sprintf("issue #%d", f.issue)
}

// localWorkflow runs the issue, or the batch, here and returns the end.
func localWorkflow(ctx context.Context, r *workflow.Runner, f workflowRunFlags, batch bool) event.WorkflowEnd {
	if !batch {
		ir := r.RunIssue(ctx, f.issue)
		return event.WorkflowEnd{Status: ir.Status, Issues: []event.WorkflowIssueResult{ir}}
	}
	b, err := r.RunBatch(ctx, workflow.Criteria{Labels: f.labels, State: f.state, Limit: f.limit})
	end := event.WorkflowEnd{Status: b.Status, Issues: b.Issues, Skipped: b.Skipped}
	if err != nil {
		end.Status, end.Error = workflow.StatusFailed, err.Error()
	}
	return end
}

// reportWorkflowEnd prints how the workflow run ended (and its JSON with
// --json) and returns its exit.
func reportWorkflowEnd(cmd *cobra.Command, f workflowRunFlags, id, journalPath string, end event.WorkflowEnd) error {
	if !f.quiet {
		printWorkflowEnd(cmd.ErrOrStderr(), id, end, cmd.Flags().Changed("label"))
	}
	if f.asJSON {
		if err := writeJSON(cmd.OutOrStdout(), map[string]any{"runId": id, "journal": journalPath, "status": end.Status,
			"issues": end.Issues, "skipped": end.Skipped, "error": end.Error, "prioritized": end.Prioritized}); err != nil {
			return withExit(exitInternal, err)
		}
	}
	return withExit(workflowExit(end.Status), nil)
}

// checkWorkflowSelection checks the flags that select the issues of
// `workflow run`: one issue or a batch by label, not both, and a batch's
// state and limit.
func checkWorkflowSelection(fs *pflag.FlagSet, f workflowRunFlags) error {
	batch := fs.Changed("label")
	switch {
	case f.issue != 0 && batch:
		return withExit(exitUsage, errors.New("workflow run: give --issue N or --label L, not both"))
	case f.issue == 0 && !batch:
		return withExit(exitUsage, errors.New("workflow run: give --issue N (one issue) or --label L (a batch of the issues with that label)"))
	case f.issue < 0:
		return withExit(exitUsage, fmt.Errorf("workflow run: --issue %d: an issue number is a positive integer", f.issue))
	case !batch && (fs.Changed("state") || fs.Changed("limit")):
		return withExit(exitUsage, errors.New("workflow run: --state and --limit select a batch and need --label"))
	case !slices.Contains([]string{"open", "closed", "all"}, f.state):
		return withExit(exitUsage, fmt.Errorf("workflow run: --state %q: want open, closed or all", f.state))
	case f.limit < 1:
		return withExit(exitUsage, fmt.Errorf("workflow run: --limit %d: want at least 1", f.limit))
	case f.repo != "" && f.local != "":
		return withExit(exitUsage, errors.New("workflow run: --repo names a GitHub repository; --local uses a directory instead"))
	}
	return nil
}

// loadWorkflow reads the workflow file, printing its problems (warnings
// unless --quiet); an invalid one is a usage error.
func loadWorkflow(stderr io.Writer, f workflowRunFlags) (*workflow.Workflow, error) {
	wf, res := workflow.Load(f.file)
	for _, p := range res.Problems() {
		if p.Severity != "warning" || !f.quiet {
			fmt.Fprintln(stderr, problemLine("", p))
		}
	}
	if !res.Valid() {
		return nil, withExit(exitUsage, fmt.Errorf("workflow run: %s is invalid; see the errors above (capstan workflow validate %s)", f.file, shellQuote(f.file)))
	}
	return wf, nil
}

// stubOutcomes are --stub-dispatch's outcomes by agent (nil without it),
// each agent one the workflow defines.
func stubOutcomes(f workflowRunFlags, wf *workflow.Workflow) (map[string]string, error) {
	if f.stub == "" {
		return nil, nil
	}
	var stub map[string]string
	if err := json.Unmarshal([]byte(f.stub), &stub); err != nil {
		return nil, withExit(exitUsage, fmt.Errorf(`workflow run: --stub-dispatch %q: want a JSON object of agent → outcome, e.g. '{"iterator":"success"}': %v`, f.stub, err))
	}
	for id := range stub {
		if _, ok := wf.Agents[id]; !ok {
			return nil, withExit(exitUsage, fmt.Errorf("workflow run: --stub-dispatch names agent %q, which %s does not define", id, f.file))
		}
	}
	return stub, nil
}

// checkPrioritize checks --prioritize: it orders a batch, with the
// workflow's prioritizer agent, run here and for real.
func checkPrioritize(f workflowRunFlags, wf *workflow.Workflow, batch, stubbed bool) error {
	if !f.prioritize {
		return nil
	}
	switch {
	case !batch:
		return withExit(exitUsage, errors.New("workflow run: --prioritize orders a batch: give --label L instead of --issue"))
	case wf.PrioritizerAgent() == nil:
		return withExit(exitUsage, fmt.Errorf("workflow run: --prioritize: %s has no prioritizer.agent", f.file))
	case stubbed:
		return withExit(exitUsage, errors.New("workflow run: --prioritize runs the prioritizer agent, whose priorities.json --stub-dispatch cannot give: drop one of them"))
	case f.tf.temporal.address != "":
		return withExit(exitUsage, errors.New("workflow run: --prioritize runs the prioritizer agent here, once: drop --temporal"))
	}
	return nil
}

// syncLabels creates or updates the workflow's labels in the repository;
// what fails is a warning.
func syncLabels(ctx context.Context, stderr io.Writer, r *workflow.Runner) {
	syncs, err := r.SyncLabels(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "warning: label sync: %v\n", err)
		return
	}
	for _, s := range syncs {
		if s.Action == "failed" {
			fmt.Fprintf(stderr, "warning: label %s: %s\n", s.Name, s.Error)
		}
	}
}

// temporalWorkflow runs the workflow's issues — --issue, or the batch in
// the workflow's order — as Temporal workflows and returns its end; an
// error is one the caller returns after journaling it.
func temporalWorkflow(ctx context.Context, stderr io.Writer, f workflowRunFlags, wf *workflow.Workflow, issues workflow.Issues,
	disp workflow.Dispatcher, workDir, id string, events event.Emitter, batch bool) (event.WorkflowEnd, error) {
	var end event.WorkflowEnd
	queue, skipped := []int{f.issue}, []int(nil)
	if batch {
		listed, err := issues.List(ctx, workflow.Criteria{Labels: f.labels, State: f.state, Limit: f.limit})
		if err != nil {
			end.Error = fmt.Sprintf("list issues: %v", err)
		}
		queue, skipped = wf.Order(listed)
	}
	if end.Error == "" {
		results, err := runWorkflowOnTemporal(ctx, stderr, f, wf, issues, disp, workDir, id, queue, events)
		if err != nil {
			events.Emit(event.WorkflowEnd{Status: workflow.StatusFailed, Issues: []event.WorkflowIssueResult{}, Error: err.Error()})
			return end, err
		}
		end.Issues, end.Skipped = results, skipped
		var st []string
		for _, ir := range results {
			st = append(st, ir.Status)
		}
		end.Status = workflow.Worst(st...)
	}
	if end.Status == "" {
		end.Status = workflow.StatusCompleted
	}
	if end.Error != "" {
		end.Status = workflow.StatusFailed
	}
	return end, nil
}

func printWorkflowEnd(w io.Writer, id string, end event.WorkflowEnd, batch bool) {
	for _, ir := range end.Issues {
		var moves []string
		for _, h := range ir.History {
			moves = append(moves, fmt.Sprintf("%s →(%s %s) %s", h.From, h.Agent, h.Outcome, h.To))
		}
		line := fmt.Sprintf("issue #%d: %s at %s", ir.Issue, ir.Status, ir.FinalPhase)
		if len(moves) > 0 {
			line += " [" + strings.Join(moves, ", ") + "]"
		}
		if ir.Closed {
			line += ", closed"
		}
		if ir.Error != "" {
			line += ": " + ir.Error
		}
		fmt.Fprintln(w, runreport.VisibleControls(line))
		if ir.Plan != nil {
			for _, l := range workflow.PlanText(*ir.Plan) {
				fmt.Fprintln(w, "  "+runreport.VisibleControls(l))
			}
		}
	}
	if len(end.Skipped) > 0 {
		var nums []string
		for _, n := range end.Skipped {
			nums = append(nums, "#"+strconv.Itoa(n))
		}
		fmt.Fprintf(w, "skipped, in no actionable phase: %s\n", strings.Join(nums, " "))
	}
	if batch && len(end.Issues) == 0 && len(end.Skipped) == 0 && end.Error == "" && end.Prioritized == nil {
		fmt.Fprintln(w, "no issue matched the batch's --label and --state")
	}
	if end.Error != "" {
		fmt.Fprintln(w, "error:", end.Error)
	}
	fmt.Fprintf(w, "workflow %s (capstan show %s)\n", end.Status, id)
}

// workflowIssues is where the run's issues are: --local's directory, or
// GitHub through a gh outside the work dir, with its repository fixed
// before any agent runs. It returns the directory handoff payloads
// persist to and words naming the store.
func workflowIssues(ctx context.Context, f workflowRunFlags, wf *workflow.Workflow, workDir string) (workflow.Issues, string, string, error) {
	if f.local != "" {
		dir, err := filepath.Abs(f.local)
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(dir); err == nil && !fi.IsDir() {
				err = fmt.Errorf("not a directory")
			}
		}
		if err != nil {
			return nil, "", "", withExit(exitUsage, fmt.Errorf("workflow run: --local %s: %v", f.local, err))
		}
		return &workflow.Local{Dir: dir}, dir, "local issues in " + dir, nil
	}
	gh, err := trustedGH(workDir)
	if err != nil {
		return nil, "", "", withExit(exitUsage, err)
	}
	g := &github.CLI{Path: gh, Env: ghEnv(os.Environ(), workDir), Dir: os.TempDir(), Repo: f.repo}
	if g.Repo == "" {
		g.Repo = os.Getenv("GH_REPO")
	}
	if g.Repo == "" {
		// gh reads the work dir's remotes, once, before any agent could
		// change them; every later call names the repository.
		cmd := exec.CommandContext(ctx, g.Path, "repo", "view", "--json", "nameWithOwner", "--jq", ".nameWithOwner")
		cmd.Dir, cmd.Env = workDir, g.Env
		out, err := cmd.Output()
		repo := strings.TrimSpace(string(out))
		if err != nil || !ghRepoName(repo) {
			return nil, "", "", withExit(exitUsage, fmt.Errorf("workflow run: cannot tell which GitHub repository the issues are in (gh repo view in %s: %v %q); pass --repo OWNER/NAME", workDir, err, repo))
		}
		g.Repo = repo
	}
	if !ghRepoName(g.Repo) {
		return nil, "", "", withExit(exitUsage, fmt.Errorf("workflow run: repository %q is not OWNER/NAME", g.Repo))
	}
	return g, filepath.Join(workDir, wf.SubjectStorePath), "GitHub issues of " + g.Repo, nil
}

func ghRepoName(s string) bool {
	owner, name, ok := strings.Cut(s, "/")
	valid := func(p string) bool {
		return p != "" && !strings.HasPrefix(p, "-") && !strings.ContainsFunc(p, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		})
	}
	return ok && valid(owner) && valid(name)
}

// trustedGH is gh on PATH, refused when a PATH entry inside the work dir
// provides it (the model could have written it; capstan runs it with its
// credentials): proc.LookPath, as for every program capstan runs for
// itself.
func trustedGH(workDir string) (string, error) {
	p, err := proc.LookPath("gh", os.Getenv("PATH"), workDir)
	if proc.IsProgramNotFound(err) {
		return "", fmt.Errorf("workflow run: gh is not on PATH: install the GitHub CLI (https://cli.github.com) and run `gh auth login`, or use --local DIR")
	}
	if err != nil {
		return "", fmt.Errorf("workflow run: %w", err)
	}
	return p, nil
}

// ghEnv is gh's environment: what capstan's own gh calls get
// (proc.ForGitHubCLI: the minimal base, network settings, gh's token
// and host variables; no model API keys, no GIT_* settings), with PATH
// stripped of the work dir's entries and gh's prompts and update notices
// off.
func ghEnv(environ []string, workDir string) []string {
	var out []string
	for _, kv := range proc.ForGitHubCLI(environ) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH":
			kv = "PATH=" + proc.PathOutside(v, workDir)
		case "GH_PROMPT_DISABLED", "GH_NO_UPDATE_NOTIFIER":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GH_PROMPT_DISABLED=1", "GH_NO_UPDATE_NOTIFIER=1")
}

// lockIssue takes an exclusive lock on the issue for this workflow, in
// capstan's state directory (released by the kernel if the process dies).
func lockIssue(store journal.Store, wf *workflow.Workflow, where string, n int) (func(), bool, error) {
	dir := filepath.Join(store.Dir, "workflow-locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	key := fmt.Sprintf("%s|%s|%d", where, wf.ID(), n)
	name := fmt.Sprintf("%s-%d-%x.lock", wf.ID(), n, fnv32(key))
	fh, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fh.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() { fh.Close() }, true, nil
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// stubDispatcher gives agents fixed outcomes (--stub-dispatch): a
// validator's verdict, a transformer's success or failure.
type stubDispatcher struct{ outcomes map[string]string }

func (s *stubDispatcher) Dispatch(_ context.Context, d workflow.Dispatch) (event.WorkflowOutcome, error) {
	return workflow.StubOutcome(d.Agent, s.outcomes), nil
}

// agentDispatcher runs each dispatched agent as a normal capstan run in
// the work dir: its own journal, verified completion, show and report.
type agentDispatcher struct {
	workDir, model string
	// defs are the agents' definitions, read before the first dispatch.
	defs   map[string]*agentdir.Agent
	stderr io.Writer
	quiet  bool
}

// pinAgents reads the folder of every agent an actionable phase
// dispatches, once: each later dispatch runs that snapshot, whatever an
// earlier agent wrote in the work dir. A folder inside the work dir that
// changed since the last run recorded it is shown and refused, as for
// capstan run, unless --accept-changed-definition.
func pinAgents(w io.Writer, wf *workflow.Workflow, f workflowRunFlags, workDir string, given []string) (*agentDispatcher, error) {
	d := &agentDispatcher{workDir: workDir, model: f.model, defs: map[string]*agentdir.Agent{}, stderr: w, quiet: f.quiet}
	var agents []*workflow.Agent
	if f.prioritize {
		agents = append(agents, wf.PrioritizerAgent())
	} else {
		for _, id := range wf.PhaseIDs {
			if ph := wf.Phases[id]; ph.Type == workflow.Actionable {
				agents = append(agents, wf.Agents[ph.Agent])
			}
		}
	}
	for _, a := range agents {
		if d.defs[a.ID] != nil {
			continue
		}
		dir := filepath.Join(f.agentsDir, a.Directory)
		def, err := loadPinnedWithDefaults(dir, f.model)
		if err != nil {
			return nil, configError(w, err, dir, true)
		}
		for _, p := range def.Warnings() {
			if !f.quiet {
				fmt.Fprintln(w, problemLine(def.Dir(), p))
			}
		}
		if err := checkWatched(w, def, workDir, true, false, f.acceptChanged, acceptCommand("workflow run", given)); err != nil {
			return nil, err
		}
		if def, err = withUserPricing(def, ""); err != nil {
			return nil, withExit(exitUsage, err)
		}
		d.defs[a.ID] = def
	}
	return d, nil
}

func (a *agentDispatcher) Dispatch(ctx context.Context, d workflow.Dispatch) (event.WorkflowOutcome, error) {
	def := a.defs[d.Agent.ID]
	if def == nil {
		return event.WorkflowOutcome{}, fmt.Errorf("agent %s was not read before the run", d.Agent.ID)
	}
	// The orchestrator's values (issue, payload keys) reach the agent as
	// the parameters it declares; the others are not its parameters.
	params := map[string]string{}
	for _, p := range def.Params() {
		if v, ok := d.Params[p.Name]; ok {
			params[p.Name] = v
		}
	}
	ag, err := agent.Build(ctx, def, agent.BuildOptions{WorkDir: a.workDir, Model: a.model, Params: params})
	if err != nil {
		return event.WorkflowOutcome{}, err
	}
	if !a.quiet {
		fmt.Fprintf(a.stderr, "  agent %s: run %s\n", d.Agent.ID, ag.RunID())
	}
	if err := ag.Start(ctx); err != nil {
		ag.Stop()
		return event.WorkflowOutcome{}, err
	}
	ag.Run(ctx)
	res := ag.Stop()
	out := event.WorkflowOutcome{RunID: res.RunID, Journal: res.Journal, Success: res.Success, Reason: res.CompletionReason,
		Verdict: res.Verdict, Handoff: res.Handoff}
	if res.Error != nil {
		out.Error = res.Error.Error()
	}
	if !a.quiet {
		fmt.Fprintf(a.stderr, "  agent %s: %s%s\n", d.Agent.ID, res.CompletionReason, verdictSuffix(res.Verdict))
	}
	return out, nil
}

func verdictSuffix(v string) string {
	if v == "" {
		return ""
	}
	return ", verdict " + strconv.Quote(v)
}

// loadWorkflowAccount reads the account of a workflow run's journal; ok
// is false for any other run.
func loadWorkflowAccount(rec *agent.RunRecord) (*workflow.Account, bool, error) {
	ev, ok := firstEvent(rec.Journal)
	if !ok || !workflow.IsStart(ev) {
		return nil, false, nil
	}
	events, err := journal.ReadFile(rec.Journal)
	if err != nil {
		return nil, false, withExit(exitInternal, err)
	}
	return workflow.BuildAccount(rec.ID, events), true, nil
}

// writeWorkflowAccount writes a workflow run's account as text, as
// Markdown (the text in a fenced block) or as a self-contained HTML page.
func writeWorkflowAccount(w io.Writer, format, id, path string) error {
	events, err := journal.ReadFile(path)
	if err != nil {
		return withExit(exitInternal, err)
	}
	acct := workflow.BuildAccount(id, events)
	var b strings.Builder
	if err := acct.WriteText(&b, runreport.VisibleControls); err != nil {
		return withExit(exitInternal, err)
	}
	text := b.String()
	switch format {
	case "md", "markdown":
		fence := "```"
		for strings.Contains(text, fence) {
			fence += "`"
		}
		text = "### Workflow run " + id + "\n\n" + fence + "text\n" + text + fence + "\n"
	case "html":
		text = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>workflow run " + html.EscapeString(id) +
			"</title></head><body><pre>" + html.EscapeString(text) + "</pre></body></html>\n"
	}
	if _, err := io.WriteString(w, text); err != nil {
		return withExit(exitInternal, err)
	}
	return nil
}

// summarizeWorkflowRun is summarizeRun for a workflow run's journal.
func summarizeWorkflowRun(r journal.Run, s runSummary) runSummary {
	s.Agent = "workflow"
	events, err := journal.ReadFile(r.Path)
	if err != nil {
		return s
	}
	acct := workflow.BuildAccount(r.ID, events)
	switch e := acct.End; {
	case e == nil:
		s.Status = "unfinished"
	case e.Success:
		s.Status, s.Reason = "completed", e.Status
	default:
		s.Status, s.Reason = "not completed", e.Status
	}
	return s
}

// prioritizeBatch runs the prioritizer over the batch (--prioritize), or
// with --dry-run says what it would do.
func prioritizeBatch(ctx context.Context, w io.Writer, f workflowRunFlags, wf *workflow.Workflow, r *workflow.Runner, storeDir string) event.WorkflowEnd {
	a := wf.PrioritizerAgent()
	c := workflow.Criteria{Labels: f.labels, State: f.state, Limit: f.limit}
	end := event.WorkflowEnd{Issues: []event.WorkflowIssueResult{}}
	if f.dryRun {
		listed, err := r.Issues.List(ctx, c)
		if err != nil {
			end.Status, end.Error = workflow.StatusFailed, fmt.Sprintf("list issues: %v", err)
			return end
		}
		var nums []string
		for _, it := range listed {
			nums = append(nums, "#"+strconv.Itoa(it.Number))
		}
		fmt.Fprintf(w, "would dispatch prioritizer agent %s (%s) over %d issues [%s], then set their priority labels (%s) from %s\n",
			a.ID, a.Directory, len(listed), strings.Join(nums, " "), strings.Join(wf.Prioritizer.Labels, ", "), filepath.Join(storeDir, workflow.PrioritiesFile))
		end.Status = workflow.StatusDryRun
		return end
	}
	res, err := r.Prioritize(ctx, c, storeDir)
	end.Prioritized, end.Status = &res, workflow.StatusCompleted
	if err != nil {
		end.Status, end.Error = workflow.StatusFailed, err.Error()
	}
	if !f.quiet {
		for _, as := range res.Assignments {
			fmt.Fprintln(w, runreport.VisibleControls(fmt.Sprintf("issue #%d: %s", as.Issue, as.Priority)))
		}
	}
	return end
}
