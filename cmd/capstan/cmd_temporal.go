package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/scaleout"
)

// temporalFlags select a Temporal server and where runs go on it.
type temporalFlags struct {
	address   string
	namespace string
	taskQueue string
	repo      string
	// workerTimeout is how long a silent worker keeps a run.
	workerTimeout time.Duration
	// continueEvery is WorkflowOptions.ContinueEvery.
	continueEvery int
	// chainFor is WorkflowOptions.ChainFor.
	chainFor time.Duration
}

// Which temporalFlags a command takes.
const (
	temporalClient = iota // --temporal, --namespace
	temporalWorker        // and --task-queue
	temporalRun           // and --repo, --worker-timeout, --continue-every, --chain-for
)

// resumeArgs are the flags of `capstan resume` that continue a run on this
// Temporal server.
func (f *temporalFlags) resumeArgs() string {
	s := " --temporal " + shellQuote(f.address)
	if f.namespace != "" && f.namespace != scaleout.DefaultNamespace {
		s += " --namespace " + shellQuote(f.namespace)
	}
	if f.taskQueue != "" && f.taskQueue != scaleout.DefaultTaskQueue {
		s += " --task-queue " + shellQuote(f.taskQueue)
	}
	return s
}

// resumeOnTemporal continues run id, whose workflow ended on a recoverable
// error, on the Temporal server flags name, and follows it.
func resumeOnTemporal(ctx context.Context, cmd *cobra.Command, flags runFlags, id string) error {
	c, err := flags.temporal.dial(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer c.Close()
	in, err := scaleout.Continue(ctx, c, id)
	if err != nil {
		return withExit(exitUsage, fmt.Errorf("resume: %w", err))
	}
	if _, err := scaleout.Start(ctx, c, flags.temporal.taskQueue, in); err != nil {
		return withExit(exitInternal, fmt.Errorf("resume: start run %s on Temporal: %w", id, err))
	}
	return followTemporalRun(ctx, cmd, flags, in, c)
}

// registerResume registers the flags with which `capstan resume`
// continues a run on Temporal.
func (f *temporalFlags) registerResume(fs *pflag.FlagSet) {
	fs.StringVar(&f.address, "temporal", "", "continue a run on Temporal that ended on a recoverable error, on this frontend `HOST:PORT` (a worker continues its journal and branch)")
	fs.StringVar(&f.namespace, "namespace", scaleout.DefaultNamespace, "Temporal namespace (with --temporal)")
	fs.StringVar(&f.taskQueue, "task-queue", scaleout.DefaultTaskQueue, "Temporal task queue the workers poll (with --temporal)")
}

func (f *temporalFlags) register(fs *pflag.FlagSet, kind int) {
	what := "Temporal frontend `HOST:PORT`" // help shows it as the value: --temporal HOST:PORT
	if kind == temporalRun {
		what += " to run on (the run becomes a workflow that capstan worker processes execute)"
	}
	fs.StringVar(&f.address, "temporal", "", what)
	fs.StringVar(&f.namespace, "namespace", scaleout.DefaultNamespace, "Temporal namespace (with --temporal)")
	if kind == temporalClient {
		return
	}
	fs.StringVar(&f.taskQueue, "task-queue", scaleout.DefaultTaskQueue, "Temporal task queue the workers poll (with --temporal)")
	if kind == temporalRun {
		fs.StringVar(&f.repo, "repo", "", "git repository every worker reaches, for the run's branch (with --temporal; default: the work dir's own repository)")
		fs.DurationVar(&f.workerTimeout, "worker-timeout", 20*time.Second, "how long a silent or unreachable worker keeps a run before it moves to another worker (with --temporal)")
		fs.IntVar(&f.continueEvery, "continue-every", 25, "iterations per workflow execution before the run continues as new, keeping its history short (with --temporal)")
		fs.DurationVar(&f.chainFor, "chain-for", 0, "let the run's short iterations share one activity for up to this long, each still committed as it ends: fewer activities and workflow tasks on the server, but the run's progress shows them only when that activity ends (with --temporal; 0 = an activity per iteration)")
	}
}

func (f *temporalFlags) dial(ctx context.Context, stderr io.Writer) (client.Client, error) {
	if f.address == "" {
		return nil, withExit(exitUsage, errors.New("--temporal HOST:PORT is required"))
	}
	c, err := scaleout.Dial(ctx, f.address, f.namespace, stderr)
	if err != nil {
		return nil, withExit(exitInternal, err)
	}
	return c, nil
}

func newWorkerCmd() *cobra.Command {
	var tf temporalFlags
	var root string
	var concurrent int
	cmd := &cobra.Command{
		Use:   "worker --temporal HOST:PORT",
		Short: "Run a Temporal worker that executes capstan runs (capstan run --temporal, capstan submit)",
		Long: `Run a worker that executes capstan runs submitted to a Temporal server: it
takes runs from the task queue, pins each run it starts to itself, checks out
the run's branch under --work-root, runs its iterations and commits each one
to the run's branch. Start several, on several machines, to share the load;
when one dies, its runs continue on another from their last committed
iteration.

API keys (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...) are read from the worker's
environment; they never travel with a run. Every worker must journal into the
same state directory (CAPSTAN_STATE_DIR on a shared filesystem) so that a run
moved to another worker continues its journal, and capstan show / report see
it. Stop the worker with Ctrl-C or SIGTERM.

The worker also runs the issues of capstan workflow run --temporal: their
label changes, comments and closes run the worker's own gh (authenticated
with GH_TOKEN or gh auth login; one outside --work-root), or write the
--local directory, which must be the same path on every worker.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			stderr := cmd.ErrOrStderr()
			store, err := runStore()
			if err != nil {
				return err
			}
			if root == "" {
				root = filepath.Join(store.Dir, "worktrees")
			}
			c, err := tf.dial(ctx, stderr)
			if err != nil {
				return err
			}
			defer c.Close()
			tctx, tr := startTracing(ctx, stderr)
			defer tr.stop(context.WithoutCancel(ctx))
			err = scaleout.RunWorker(tctx, c, scaleout.WorkerConfig{TaskQueue: tf.taskQueue, Root: root, Store: store, TracerProvider: tr.provider(),
				MaxConcurrentRuns: concurrent, Address: tf.address, Namespace: tf.namespace, Issues: workerIssues(root), Ready: func(q string) {
					fmt.Fprintf(stderr, "capstan worker: polling task queue %s (own queue %s) on %s; work dirs in %s\n", tf.taskQueue, q, tf.address, root)
				}})
			if err != nil {
				return withExit(exitInternal, err)
			}
			return nil
		},
	}
	tf.register(cmd.Flags(), temporalWorker)
	cmd.Flags().StringVar(&root, "work-root", "", "directory for the runs' work dir checkouts (default: worktrees in the state directory)")
	cmd.Flags().IntVar(&concurrent, "max-concurrent", scaleout.DefaultMaxConcurrentRuns(), "runs this worker runs an iteration of at once (4 per core by default: an iteration mostly waits for the model)")
	return cmd
}

// executeTemporalRun starts the run as a workflow and follows it like a
// local run: progress, result, --json and exit code. Ctrl-C cancels the
// run (its iteration is interrupted, as locally).
func executeTemporalRun(ctx context.Context, cmd *cobra.Command, def *agentdir.Agent, flags runFlags, params map[string]string) error {
	in, c, err := submitOne(ctx, cmd, def, flags, params)
	if err != nil {
		return err
	}
	defer c.Close()
	return followTemporalRun(ctx, cmd, flags, in, c)
}

// followTemporalRun follows the started run in on Temporal as a local run
// is followed: progress, --stream, Ctrl-C cancels, the summary and --json
// Result, the exit code.
func followTemporalRun(ctx context.Context, cmd *cobra.Command, flags runFlags, in *scaleout.RunInput, c client.Client) error {
	stderr := cmd.ErrOrStderr()
	streaming := flags.stream.enabled(stderr, flags.quiet)
	if !flags.quiet {
		where := "branch " + in.Branch + " of " + in.Repo
		if in.Repo == "" {
			where = "work dir " + in.WorkDir + " (not a git repository: used as it is on the worker)"
			if _, err := os.Stat(in.WorkDir); err != nil {
				where = "work dir " + in.WorkDir + " (not on this machine: the worker must have it)"
			}
		}
		fmt.Fprintf(stderr, "capstan: running %s on Temporal %s (run %s, %s)\n", in.Agent, flags.temporal.address, in.RunID, where)
	}
	// Ctrl-C cancels the run and waits for its result (as long as a
	// worker needs to learn of it); a second one, or no result in time,
	// leaves without it (the run goes on being canceled on the server).
	followCtx, stopFollow := context.WithCancel(context.Background())
	defer stopFollow()
	var gaveUp atomic.Bool
	go func() {
		select {
		case <-ctx.Done():
		case <-followCtx.Done():
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := scaleout.Cancel(cctx, c, in.RunID); err != nil {
			fmt.Fprintln(stderr, "capstan:", err)
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		select {
		case <-sig:
		case <-followCtx.Done():
			return
		case <-time.After(2*flags.temporal.workerTimeout + 10*time.Second):
		}
		gaveUp.Store(true)
		stopFollow()
	}()
	var progress *progressPrinter
	if !flags.quiet || streaming {
		progress = newProgressPrinter(stderr)
		progress.progress = !flags.quiet
	}
	printed := 0
	var journalFed atomic.Bool
	if streaming {
		// The workers' journal, when this machine shares their state
		// directory, feeds the progress printer the run's own events: the
		// same lines as a local run, tool calls and the model's text as
		// each is journaled.
		progress.enableStream(processEnviron())
		store, err := runStore()
		if err != nil {
			return err
		}
		go tailJournal(followCtx, store, in.RunID, 200*time.Millisecond, func(ev journal.Event) {
			journalFed.Store(true)
			feedJournalEvent(progress, ev)
		}, func() {
			fmt.Fprintf(stderr, "capstan: --stream: the run's journal is not in this machine's state directory %s (the workers' CAPSTAN_STATE_DIR); showing one line per iteration\n", store.Dir)
		})
	}
	onProgress := func(p scaleout.Progress) {
		for _, o := range p.Recent {
			if o.Iteration <= printed || progress == nil || journalFed.Load() {
				continue
			}
			printed = o.Iteration
			tools := make([]event.ToolUse, len(o.Tools))
			for i, name := range o.Tools {
				tools[i].Name = name
			}
			progress.Consume(event.Event{Kind: event.KindIterationEnd, Iteration: o.Iteration, Step: o.Step, Payload: &event.IterationEvent{
				Summary: &event.IterationSummary{Iteration: o.Iteration, StepID: o.Step, ToolsUsed: tools},
				Outcome: event.OutcomeEvent{Complete: o.Complete, Stop: o.Stop, Reason: o.Reason}, RunUsage: o.Usage, RunCostUSD: o.CostUSD}})
		}
	}
	// A run no worker takes waits on the server: say so once.
	go func() {
		select {
		case <-followCtx.Done():
			return
		case <-time.After(15 * time.Second):
		}
		qctx, cancel := context.WithTimeout(followCtx, 5*time.Second)
		defer cancel()
		v, err := c.QueryWorkflow(qctx, in.RunID, "", scaleout.QueryProgress)
		if followCtx.Err() != nil {
			return
		}
		var p scaleout.Progress
		if err != nil || v.Get(&p) != nil || p.State.Queue == "" {
			fmt.Fprintf(stderr, "capstan: no worker has taken run %s yet; start one with: capstan worker --temporal %s --namespace %s --task-queue %s\n",
				in.RunID, flags.temporal.address, flags.temporal.namespace, flags.temporal.taskQueue)
		}
	}()
	res, err := scaleout.Follow(followCtx, c, in.RunID, 500*time.Millisecond, onProgress)
	if err != nil && gaveUp.Load() {
		return withExit(exitNotCompleted, fmt.Errorf("run %s: cancel requested; it ends when a worker processes the cancellation (see capstan runs --temporal %s --namespace %s)",
			in.RunID, flags.temporal.address, flags.temporal.namespace))
	}
	if err != nil {
		return withExit(exitCodeFor(err, false), err)
	}
	if journalFed.Load() {
		time.Sleep(300 * time.Millisecond) // the journal's last lines
	}
	if progress != nil {
		progress.end()
	}
	if !flags.quiet {
		printSummaryOn(stderr, res, flags.temporal.resumeArgs())
		if in.Repo != "" {
			fmt.Fprintf(stderr, "  work on branch %s of %s\n", in.Branch, in.Repo)
		}
	}
	if flags.asJSON {
		if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
			return withExit(exitInternal, err)
		}
	}
	return withExit(resultExitCode(res), nil)
}

// tailJournal calls fn with each event of run id's journal in the store
// as it is appended, until ctx ends; missing is called once when the
// journal has not appeared within 10 seconds.
func tailJournal(ctx context.Context, store journal.Store, id string, every time.Duration, fn func(journal.Event), missing func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	start, warned := time.Now(), false
	var seen int64
	for {
		if found, err := store.Find("", id); err == nil {
			if events, err := journal.ReadFile(found.Path); err == nil {
				for _, ev := range events {
					if ev.Seq > seen {
						seen = ev.Seq
						fn(ev)
					}
				}
			}
		} else if !warned && time.Since(start) > 10*time.Second {
			warned = true
			missing()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// feedJournalEvent gives the progress printer what a journaled event
// says, as the run's live event stream would have.
func feedJournalEvent(p *progressPrinter, ev journal.Event) {
	switch ev.Type {
	case journal.PromptResolved:
		p.Consume(event.Event{Kind: event.KindPromptResolved, Iteration: ev.Iteration, Step: ev.Step})
	case journal.IterationEnd:
		var it event.IterationEvent
		if json.Unmarshal(ev.Data, &it) == nil && it.Summary != nil && !it.Outcome.Redo {
			p.Consume(event.Event{Kind: event.KindIterationEnd, Iteration: ev.Iteration, Step: ev.Step, Payload: &it})
		}
	case journal.ToolCall:
		var u event.ToolUse
		if json.Unmarshal(ev.Data, &u) == nil {
			p.Consume(event.Event{Kind: event.KindToolStart, Payload: event.ToolStartEvent{Call: event.ToolCall{ID: u.ID, Name: u.Name, Input: u.Input}}})
			p.Consume(event.Event{Kind: event.KindToolEnd, Payload: event.ToolEndEvent{Use: u}})
		}
	case journal.QueryResult:
		var q event.QueryResult
		if json.Unmarshal(ev.Data, &q) == nil {
			for _, text := range q.Responses {
				p.Consume(event.Event{Kind: event.KindTextDelta, Payload: event.TextDeltaEvent{Text: text + "\n"}})
			}
		}
	}
}

// submitOne prepares and starts one run.
func submitOne(ctx context.Context, cmd *cobra.Command, def *agentdir.Agent, flags runFlags, params map[string]string) (*scaleout.RunInput, client.Client, error) {
	c, err := flags.temporal.dial(ctx, cmd.ErrOrStderr())
	if err != nil {
		return nil, nil, err
	}
	in, err := startRun(ctx, c, def, flags, params)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return in, c, nil
}

func startRun(ctx context.Context, c client.Client, def *agentdir.Agent, flags runFlags, params map[string]string) (*scaleout.RunInput, error) {
	ins, err := prepareRuns(ctx, def, flags, []map[string]string{params})
	if err != nil {
		return nil, err
	}
	if _, err := scaleout.Start(ctx, c, flags.temporal.taskQueue, ins[0]); err != nil {
		return nil, withExit(exitInternal, fmt.Errorf("start run %s on Temporal: %w", ins[0].RunID, err))
	}
	return ins[0], nil
}

// prepareRuns checks the runs' parameters and work dir and makes their
// workflow inputs, creating every run's branch with one push.
func prepareRuns(ctx context.Context, def *agentdir.Agent, flags runFlags, params []map[string]string) ([]*scaleout.RunInput, error) {
	for _, p := range params {
		if _, err := def.ResolveParams(p); err != nil {
			return nil, withExit(exitUsage, err)
		}
	}
	if err := checkGitWorkDir(ctx, def, flags.workDir); err != nil {
		return nil, withExit(exitUsage, err)
	}
	ins, err := scaleout.PrepareRuns(ctx, scaleout.Submission{Agent: def, WorkDir: flags.workDir, Repo: flags.temporal.repo,
		Model: flags.model, BaseURL: flags.baseURL, MaxIterations: flags.maxIterations,
		Timeouts: flags.timeouts, MaxRetryAfter: flags.maxRetryAfter, NoSandbox: flags.noSandbox,
		Options: scaleout.WorkflowOptions{Heartbeat: flags.temporal.workerTimeout, ScheduleToStart: flags.temporal.workerTimeout,
			ContinueEvery: flags.temporal.continueEvery, ChainFor: flags.temporal.chainFor}}, params)
	if err != nil {
		return nil, withExit(exitCodeFor(err, true), err)
	}
	return ins, nil
}

func newSubmitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "submit DIR --temporal HOST:PORT [--each PARAM] [--from FILE] [--<parameter> VALUE ...] [flags]",
		Short: "Start runs of the agent in DIR on Temporal without waiting, printing their run IDs",
		Long: `Start runs of the agent in DIR on a Temporal server and print one run ID per
line on stdout, without waiting for them. With --each PARAM, one run starts
per non-empty line of --from FILE (or of stdin when FILE is - or not given),
the line being PARAM's value; without it, one run starts. The other flags are
those of capstan run --temporal that shape a run. Follow the runs with capstan runs
--temporal, capstan show RUN and capstan report RUN; cancel one with capstan
cancel RUN.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return submitRuns(cmd, args)
		},
	}
	var shown runFlags
	shown.registerSubmit(cmd.Flags())
	cmd.Flags().String("each", "", "parameter that takes one value per line of --from")
	cmd.Flags().String("from", "-", "file of values for --each, one per line (- = stdin)")
	return cmd
}

// registerSubmit adds the flags of submit: those of run that shape a run
// and send it to Temporal (nothing is followed, so no output flags).
func (f *runFlags) registerSubmit(fs *pflag.FlagSet) {
	f.registerOptions(fs)
	f.temporal.register(fs, temporalRun)
}

func submitRuns(cmd *cobra.Command, args []string) error {
	dir, rest := agentDirArg(stripSubmitFlags(args))
	each, from := submitFlagValues(args)
	if dir == "" {
		if isHelp(args) {
			return cmd.Help()
		}
		return withExit(exitUsage, errors.New("submit: missing agent directory (usage: capstan submit DIR --temporal HOST:PORT ...)"))
	}
	stderr := cmd.ErrOrStderr()
	def, err := loadPinnedWithDefaults(dir, modelArg(rest))
	if err != nil {
		return configError(stderr, err, dir, true)
	}
	var flags runFlags
	fs := pflag.NewFlagSet("submit", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags.registerSubmit(fs)
	params := registerParamFlags(fs, def)
	fs.String("each", "", "parameter that takes one value per line of --from")
	fs.String("from", "-", "file of values for --each, one per line (- = stdin)")
	if isHelp(rest) {
		fmt.Fprintf(cmd.OutOrStdout(), "Usage: capstan submit %s --temporal HOST:PORT [flags]\n\nAgent %s: %s\n\nFlags:\n%s", dir, def.Definition().Name, def.Definition().Description, fs.FlagUsages())
		return nil
	}
	if err := fs.Parse(rest); err != nil {
		return withExit(exitUsage, fmt.Errorf("submit: %w (agent %s accepts: %s)", err, def.Definition().Name, strings.Join(paramFlagNames(def), " ")))
	}
	if fs.NArg() > 0 {
		return withExit(exitUsage, fmt.Errorf("submit: unexpected arguments %q", fs.Args()))
	}
	if err := flags.checkValues(); err != nil {
		return withExit(exitUsage, err)
	}
	if flags.temporal.address == "" {
		return withExit(exitUsage, errors.New("submit: --temporal HOST:PORT is required"))
	}
	if err := applyUserDefaults(&flags, def, nil); err != nil {
		return withExit(exitUsage, err)
	}
	values := setParams(fs, params)
	runs := []map[string]string{values}
	if each != "" {
		if _, ok := params[each]; !ok {
			return withExit(exitUsage, fmt.Errorf("submit: --each %s: agent %s has no parameter %q (it has: %s)", each, def.Definition().Name, each, strings.Join(paramFlagNames(def), " ")))
		}
		lines, err := readValues(cmd.InOrStdin(), from)
		if err != nil {
			return withExit(exitUsage, err)
		}
		runs = runs[:0]
		for _, v := range lines {
			p := make(map[string]string, len(values)+1)
			for k, x := range values {
				p[k] = x
			}
			p[each] = v
			runs = append(runs, p)
		}
	}
	ctx := cmd.Context()
	c, err := flags.temporal.dial(ctx, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	ins, err := prepareRuns(ctx, def, flags, runs)
	if err != nil {
		return err
	}
	if in := ins[0]; in.Repo == "" {
		if _, err := os.Stat(in.WorkDir); err != nil {
			fmt.Fprintf(stderr, "capstan: work dir %s is not on this machine: the workers must have it (see why a run failed with: capstan runs --temporal %s --namespace %s)\n",
				in.WorkDir, flags.temporal.address, flags.temporal.namespace)
		}
	}
	// The workflows start concurrently; the IDs are printed in the order
	// of the values, each once its run has started.
	failed := 0
	for i, err := range scaleout.StartRuns(ctx, c, flags.temporal.taskQueue, ins, 0) {
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "capstan: submit: start run %s (%s) on Temporal: %v\n", ins[i].RunID, describeParams(runs[i], each), err)
			continue
		}
		fmt.Fprintln(cmd.OutOrStdout(), ins[i].RunID)
	}
	if failed > 0 {
		return withExit(exitInternal, fmt.Errorf("submit: %d of %d runs did not start (the others did: their IDs are on stdout); submit the values of the failed ones again", failed, len(ins)))
	}
	return nil
}

// describeParams names the --each value of a run ("" = no --each).
func describeParams(params map[string]string, each string) string {
	if each == "" {
		return "the run"
	}
	return "--" + each + " " + shellQuote(params[each])
}

// stripSubmitFlags removes --each and --from (with their values) from args.
func stripSubmitFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--each" || a == "--from":
			i++
		case strings.HasPrefix(a, "--each=") || strings.HasPrefix(a, "--from="):
		default:
			out = append(out, a)
		}
	}
	return out
}

func submitFlagValues(args []string) (each, from string) {
	from = "-"
	for i := 0; i < len(args); i++ {
		a := args[i]
		for _, name := range []string{"each", "from"} {
			var v string
			switch {
			case a == "--"+name && i+1 < len(args):
				v = args[i+1]
			case strings.HasPrefix(a, "--"+name+"="):
				v = strings.TrimPrefix(a, "--"+name+"=")
			default:
				continue
			}
			if name == "each" {
				each = v
			} else {
				from = v
			}
		}
	}
	return each, from
}

// readValues reads the non-empty, trimmed lines of file (- = stdin).
func readValues(stdin io.Reader, file string) ([]string, error) {
	r := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("submit: --from: %w", err)
		}
		defer f.Close()
		r = f
	}
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v := strings.TrimSpace(sc.Text()); v != "" {
			out = append(out, v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("submit: read values: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("submit: --each: no values (one per line of --from, or of stdin)")
	}
	return out, nil
}

func newCancelCmd() *cobra.Command {
	var tf temporalFlags
	cmd := &cobra.Command{
		Use:   "cancel RUN --temporal HOST:PORT",
		Short: "Cancel a run on Temporal: its iteration is interrupted and the run ends as canceled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := tf.dial(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := scaleout.Cancel(ctx, c, args[0]); err != nil {
				if errors.Is(err, scaleout.ErrNoRun) {
					return withExit(exitUsage, fmt.Errorf("%w (list the runs with: capstan runs --temporal %s --namespace %s)", err, tf.address, tf.namespace))
				}
				if errors.Is(err, scaleout.ErrRunEnded) {
					return withExit(exitUsage, fmt.Errorf("%w (see how it ended with: capstan show %s)", err, args[0]))
				}
				return withExit(exitInternal, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "capstan: cancel requested for run %s\n", args[0])
			return nil
		},
	}
	tf.register(cmd.Flags(), temporalClient)
	return cmd
}

// listTemporalRuns prints the runs Temporal knows, with what their journals
// (in this machine's state directory, when shared with the workers) say.
func listTemporalRuns(ctx context.Context, cmd *cobra.Command, tf temporalFlags, limit int, asJSON bool) error {
	c, err := tf.dial(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer c.Close()
	runs, err := scaleout.List(ctx, c, limit)
	if err != nil {
		return withExit(exitInternal, err)
	}
	store, err := runStore()
	if err != nil {
		return err
	}
	type row struct {
		scaleout.RunSummary
		Journal *runSummary `json:"journal,omitempty"`
	}
	rows := make([]row, 0, len(runs))
	for _, r := range runs {
		rw := row{RunSummary: r}
		if found, err := store.Find("", r.RunID); err == nil {
			s := summarizeRun(found)
			rw.Journal = &s
		}
		rows = append(rows, rw)
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), rows)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tTEMPORAL\tSTATUS\tITER\tAGENT\tSTARTED")
	for _, r := range rows {
		status, iters, agentName := "-", "-", "-"
		if j := r.Journal; j != nil {
			status, iters, agentName = j.Status, fmt.Sprint(j.Iterations), j.Agent
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.RunID, strings.ToLower(r.Status), status, iters, agentName, r.Start.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Failure != "" {
			fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n", r.Failure)
		}
	}
	return nil
}
