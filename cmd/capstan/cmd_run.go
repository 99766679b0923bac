package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/runreport"
	"github.com/capstan-dev/capstan/sandbox"
)

// runFlags are capstan's own flags of `run` and `resume`.
type runFlags struct {
	model         string
	baseURL       string
	workDir       string
	maxIterations int
	timeouts      llm.Timeouts
	maxRetryAfter time.Duration
	noSandbox     bool
	asJSON        bool
	quiet         bool
	stream        streamFlag
	temporal      temporalFlags
	// allowKeyInAncestors lets a run whose tools are not sandboxed start
	// while a process above capstan holds a provider key (see
	// checkAncestorKeys).
	allowKeyInAncestors bool
	// acceptChanged accepts a changed model-writable definition
	// (--accept-changed-definition, run and resume).
	acceptChanged bool
	// baseURLSource says where baseURL came from when not from
	// --base-url (the user config, the resumed run's record).
	baseURLSource string
	// command is the command line as typed (shell-quoted), for hints that
	// repeat it with a flag added.
	command string
}

func (f *runFlags) register(fs *pflag.FlagSet) {
	f.registerOptions(fs)
	fs.BoolVar(&f.asJSON, "json", false, "print the final Result as one JSON object on stdout")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	f.stream.register(fs, " and not --quiet")
	fs.BoolVar(&f.allowKeyInAncestors, allowKeyInAncestorsFlag, false, "start a run whose tools are not sandboxed although a process that started capstan holds a provider key in its environment, which those tools can read (see docs/sandbox.md)")
}

// registerOptions adds the flags that shape the run itself (not its
// output).
func (f *runFlags) registerOptions(fs *pflag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "model as provider:model (overrides runner.model)")
	fs.StringVar(&f.baseURL, "base-url", "", "API base URL for the provider (e.g. an OpenAI-compatible server)")
	fs.StringVar(&f.workDir, "workdir", ".", "directory the agent works in (journals go to the state directory, see capstan runs --help)")
	fs.IntVar(&f.maxIterations, "max-iterations", 0, "override runner.budgets.maxIterations")
	fs.DurationVar(&f.timeouts.Connect, "connect-timeout", 0, "time to open a connection to the model API (overrides runner.requests; default 10s)")
	fs.DurationVar(&f.timeouts.FirstByte, "first-byte-timeout", 0, "time from sending a model request to its response headers (default 2m)")
	fs.DurationVar(&f.timeouts.StreamIdle, "stream-idle-timeout", 0, "longest silence inside a model response stream (default 1m30s)")
	fs.DurationVar(&f.maxRetryAfter, "max-retry-after", 0, "longest retry-after wait a server may ask for before the run stops to be resumed later (default 5m)")
	fs.BoolVar(&f.noSandbox, "no-sandbox", false, "run Bash, validators and subprocess steps unsandboxed, with your rights (the run says so; default: sandboxed)")
}

// temporalOnlyFlags are the flags of run that act only with --temporal:
// given without it, run refuses them rather than ignore them.
var temporalOnlyFlags = []string{"namespace", "task-queue", "repo", "worker-timeout", "continue-every", "chain-for"}

// registerRun adds the flags of run (and submit): register's and those
// that send the run to Temporal.
func (f *runFlags) registerRun(fs *pflag.FlagSet) {
	f.register(fs)
	f.temporal.register(fs, temporalRun)
}

func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run DIR [--<parameter> VALUE ...] [flags]",
		Short: "Run the agent defined in DIR until its completion is verified or a limit stops it",
		Long: `Run the agent defined in DIR (agent.json, steps_registry.json, prompts/).

Every parameter declared in agent.json becomes a flag (--<name> or its "cli"
name) and the prompt variable {uv-<name>}. Run "capstan run DIR --help" to
see an agent's parameter flags with the flags below. Flags may come before
or after DIR.

The model is --model, else $CAPSTAN_MODEL, else the agent's runner.model,
else default_model in the user config file.

Exit codes: 0 completed; 1 ran but did not complete (budget, limit, abort,
validation exhausted); 2 usage or configuration error; 3 provider or internal
error; 4 the model declared that the task cannot be done as specified (its
reason and evidence are in the result and in "capstan show"); 130 interrupted
by Ctrl-C (143 by SIGTERM): the run is journaled as canceled, and the command
printed after "continue with:" resumes it.`,
		DisableFlagParsing: true,
		ValidArgsFunction:  completeRunArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAgent(cmd, args)
		},
	}
	// Parsed by runAgent once DIR is known; registered here so that
	// `capstan run --help` lists them.
	var shown runFlags
	shown.registerRun(cmd.Flags())
	registerAccept(cmd.Flags(), &shown.acceptChanged)
	return cmd
}

// checkValues refuses, before anything is announced or recorded, flag
// values no run can use, naming the flag: a --base-url that carries a
// credential (the run would refuse it too, naming it for Go callers), and
// a negative --max-iterations or duration.
func (f *runFlags) checkValues() error {
	for _, v := range []struct {
		flag     string
		value    any
		negative bool
	}{
		{"--max-iterations", f.maxIterations, f.maxIterations < 0},
		{"--connect-timeout", f.timeouts.Connect, f.timeouts.Connect < 0},
		{"--first-byte-timeout", f.timeouts.FirstByte, f.timeouts.FirstByte < 0},
		{"--stream-idle-timeout", f.timeouts.StreamIdle, f.timeouts.StreamIdle < 0},
		{"--max-retry-after", f.maxRetryAfter, f.maxRetryAfter < 0},
	} {
		if v.negative {
			e := agenterr.New(agenterr.CodeUsage, agenterr.LayerConfiguration, false, "%s %v is negative", v.flag, v.value)
			e.Hint = "give a positive value, or 0 (or leave the flag out) for the default"
			return e
		}
	}
	if f.baseURL == "" {
		return nil
	}
	return llm.CheckBaseURL("--base-url", f.baseURL)
}

func isHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "--help" {
			return true
		}
	}
	return false
}

func runAgent(cmd *cobra.Command, args []string) error {
	dir, rest := agentDirArg(args)
	stderr := cmd.ErrOrStderr()
	if dir == "" {
		if isHelp(args) {
			return cmd.Help()
		}
		return withExit(exitUsage, errors.New("run: missing agent directory (usage: capstan run DIR [--<parameter> VALUE ...])"))
	}
	if err := mistypedFlagBeforeDir(args, dir); err != nil {
		return withExit(exitUsage, fmt.Errorf("run: %w", err))
	}
	def, err := loadPinnedWithDefaults(dir, modelArg(rest))
	if err != nil {
		return configError(stderr, err, dir, true)
	}
	spec := def.Definition()
	var flags runFlags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags.registerRun(fs)
	registerAccept(fs, &flags.acceptChanged)
	params := registerParamFlags(fs, def)
	if isHelp(rest) {
		fmt.Fprintf(cmd.OutOrStdout(), "Usage: capstan run %s [flags]\n\nAgent %s: %s\n\nFlags:\n%s", dir, spec.Name, spec.Description, fs.FlagUsages())
		return nil
	}
	if err := fs.Parse(rest); err != nil {
		return withExit(exitUsage, fmt.Errorf("run: %w (agent %s accepts: %s)", flagError(fs, err), spec.Name, strings.Join(paramFlagNames(def), " ")))
	}
	if fs.NArg() > 0 {
		return withExit(exitUsage, fmt.Errorf("run: unexpected arguments %q", fs.Args()))
	}
	if err := flags.checkValues(); err != nil {
		return withExit(exitUsage, err)
	}
	if flags.temporal.address == "" {
		for _, name := range temporalOnlyFlags {
			if fs.Changed(name) {
				return withExit(exitUsage, fmt.Errorf("run: --%s tunes a run on Temporal and needs --temporal HOST:PORT", name))
			}
		}
	}
	rerun := func(extra ...string) string { return commandLine("run", append(slices.Clone(args), extra...)) }
	if err := applyUserDefaults(&flags, def, rerun); err != nil {
		return withExit(exitUsage, err)
	}
	if flags.temporal.address == "" {
		// A run on Temporal works in the worker's checkout, not here.
		if err := checkWatched(stderr, def, flags.workDir, true, false, flags.acceptChanged, acceptCommand("run", args)); err != nil {
			return err
		}
	}
	values := setParams(fs, params)
	flags.command = rerun()
	return executeRun(cmd.Context(), cmd, def, flags, values, nil, nil)
}

// registerParamFlags adds one flag per declared parameter and returns
// parameter name → flag name.
func registerParamFlags(fs *pflag.FlagSet, def *agentdir.Agent) map[string]string {
	out := map[string]string{}
	for _, p := range def.Params() {
		flagName := strings.TrimPrefix(p.Flag, "--")
		if fs.Lookup(flagName) != nil {
			continue // validation rejects clashes; never shadow capstan's flags
		}
		usage := p.Description
		if p.Required {
			usage += " (required)"
		}
		if p.HasDefault {
			usage += " (default " + p.Default + ")"
		}
		f := fs.VarPF(&paramValue{typ: p.Type}, flagName, "", usage)
		if p.Type == "boolean" {
			f.NoOptDefVal = "true"
		}
		out[p.Name] = flagName
	}
	return out
}

// paramValue is the value of a parameter flag: the text as given (the
// agent checks it against the parameter's type), shown in help with the
// parameter's type ("--issue number", "--resume" for a boolean).
type paramValue struct {
	v, typ string
}

func (p *paramValue) String() string     { return p.v }
func (p *paramValue) Set(s string) error { p.v = s; return nil }

// Type is the name help shows after the flag; pflag shows none for "bool".
func (p *paramValue) Type() string {
	switch p.typ {
	case "boolean":
		return "bool"
	case "number":
		return "number"
	}
	return "string"
}

func paramFlagNames(def *agentdir.Agent) []string {
	var out []string
	for _, p := range def.Params() {
		out = append(out, p.Flag)
	}
	return out
}

// executeRun builds, starts, runs and stops the agent, printing progress
// and the result, and maps the outcome to an exit code.
func executeRun(ctx context.Context, cmd *cobra.Command, def *agentdir.Agent, flags runFlags, params map[string]string, resume *agent.RunRecord, pin *agentdir.SnapshotResume) error {
	stderr := cmd.ErrOrStderr()
	// Configuration warnings are printed, not swallowed (they are also in the journal).
	for _, w := range def.Warnings() {
		fmt.Fprintln(stderr, problemLine(def.Dir(), w))
	}
	if uc, err := loadUserConfig(); err == nil {
		printUserConfigWarnings(stderr, uc)
	}
	if flags.temporal.address != "" {
		if flags.allowKeyInAncestors {
			return withExit(exitUsage, fmt.Errorf("run: --%s acts on a run whose tools run here; with --temporal they run on a worker (start the worker sandboxed, or from a process that does not hold the key)", allowKeyInAncestorsFlag))
		}
		return executeTemporalRun(ctx, cmd, def, flags, params)
	}
	def, err := withUserPricing(def, flags.model)
	if err != nil {
		return withExit(exitUsage, err)
	}
	if err := checkRunUsage(ctx, def, flags, params, resume); err != nil {
		return err
	}
	progress := runProgress(stderr, flags)
	ctx, tr := startTracing(ctx, stderr)
	defer tr.stop(ctx)
	source := flags.baseURLSource
	if source == "" && flags.baseURL != "" {
		source = "--base-url"
	}
	opts := agent.BuildOptions{WorkDir: flags.workDir, Model: flags.model, BaseURL: flags.baseURL, BaseURLSource: source,
		MaxIterations: flags.maxIterations, Timeouts: flags.timeouts, MaxRetryAfter: flags.maxRetryAfter,
		Params: params, Resume: resume, TracerProvider: tr.provider(), DefinitionResume: pin, NoSandbox: flags.noSandbox}
	if progress != nil {
		opts.Events = []event.Consumer{progress}
	}
	// One run at a time works in a work dir: a second would race the
	// first over its files, its commits and its validators' verdicts.
	lock, err := lockWorkDir(flags.workDir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	// Build refuses what the run cannot start with (no model, no API
	// key, no gh, …) before the run is announced.
	a, err := agent.Build(ctx, def, opts)
	if err != nil {
		return withExit(exitCodeFor(err, true), inFolder(sandboxOptOutHint(err, flags.command), fromWorkingDir(def.Dir())))
	}
	lock.SetRun(a.RunID())
	if !flags.quiet {
		announceWorkDir(stderr, flags.workDir)
	}
	// Announced before Start, which runs the test validators once for the
	// no-lost-tests baseline.
	if progress != nil {
		url, source := a.EndpointOf()
		progress.begin(a.RunID(), def.Definition().Name, url, source, a.Unsandboxed())
	}
	if err := a.Start(ctx); err != nil {
		a.Stop()
		return withExit(exitCodeFor(err, true), err)
	}
	a.Run(ctx)
	res := a.Stop()
	if progress != nil {
		progress.end()
	}
	if !flags.quiet {
		printSummary(stderr, res)
	}
	if flags.asJSON {
		if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
			return withExit(exitInternal, err)
		}
	}
	return withExit(resultExitCode(res), nil)
}

// checkRunUsage refuses, as usage errors and before the run is announced,
// what the run cannot start with: parameters that do not resolve and a
// missing work dir (for a new run), a work dir git cannot serve, and an
// unsandboxed run started by a process that holds an API key.
func checkRunUsage(ctx context.Context, def *agentdir.Agent, flags runFlags, params map[string]string, resume *agent.RunRecord) error {
	if resume == nil {
		if _, err := def.ResolveParams(params); err != nil {
			return withExit(exitUsage, inFolder(err, fromWorkingDir(def.Dir())))
		}
		if err := checkWorkDirExists(flags.workDir); err != nil {
			return withExit(exitUsage, err)
		}
	}
	if err := checkGitWorkDir(ctx, def, flags.workDir); err != nil {
		return withExit(exitUsage, err)
	}
	if !flags.allowKeyInAncestors && (flags.noSandbox || !toolsSandboxed(ctx, def)) {
		if err := checkAncestorKeys(os.Args, os.Getenv, agentSandboxHint); err != nil {
			return withExit(exitUsage, err)
		}
	}
	return nil
}

// runProgress is the progress printer of a run on stderr — the progress
// line unless --quiet, the model's output with --stream — or nil when it
// prints neither.
func runProgress(stderr io.Writer, flags runFlags) *progressPrinter {
	streaming := flags.stream.enabled(stderr, flags.quiet)
	if flags.quiet && !streaming {
		return nil
	}
	progress := newProgressPrinter(stderr)
	progress.progress = !flags.quiet
	if streaming {
		progress.enableStream(processEnviron())
	}
	return progress
}

// lockWorkDir takes the work dir for this run, or refuses it (exit 2)
// naming the run that works there and how to see or stop it.
func lockWorkDir(workDir string) (*journal.WorkDirLock, error) {
	store, err := journal.OpenStore(os.Getenv)
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	lock, err := store.LockWorkDir(workDir)
	var busy *journal.BusyError
	switch {
	case errors.As(err, &busy):
		e := agenterr.New(agenterr.CodeWorkDirBusy, agenterr.LayerLifecycle, false, "%s", busy.Error())
		var hints []string
		if busy.RunID != "" {
			hints = append(hints, "see it with: capstan show "+busy.RunID)
		}
		if busy.PID != 0 {
			hints = append(hints, fmt.Sprintf("wait for it to end, or stop it with: kill -INT %d", busy.PID))
		}
		hints = append(hints, "or work in another checkout (git worktree add)")
		e.Hint = strings.Join(hints, "; ")
		return nil, withExit(exitUsage, e)
	case err != nil:
		return nil, withExit(exitInternal, err)
	}
	return lock, nil
}

// resultExitCode maps a finished run to the documented exit codes: 0
// completed; otherwise the class of the error's code (a configuration or
// provider error ends a run too), 4 when the model declared that the task
// cannot be done as specified, and 1 for every other way a run can end
// without completing.
func resultExitCode(res *event.RunResult) int {
	if res.Success {
		return exitOK
	}
	if res.CompletionReason == agent.ReasonCannotComplete {
		return exitCannotComplete
	}
	if res.CompletionReason == agent.ReasonTestChangeRequested {
		return exitTestChangeRequested
	}
	if res.Error != nil {
		if code := exitForCode(res.Error.Code, false); code != exitOK {
			return code
		}
	}
	return exitNotCompleted
}

// exitCodeFor maps an error that stopped a command: its code's class (see
// exitForCode), 2 for any error of the configuration layer, or 3
// (internal) for an error without a usage code. before says whether the
// error came before the run made its first model request. An MCP server
// that cannot be started or reached is 3 even then: like the model API, it
// is a service the run talks to.
func exitCodeFor(err error, before bool) int {
	e := agenterr.From(err)
	if e != nil && e.Layer == agenterr.LayerConfiguration {
		return exitUsage
	}
	if before && e != nil && e.Layer == agenterr.LayerTool {
		before = false
	}
	if code := exitForCode(agenterr.CodeOf(err), before); code != exitOK {
		return code
	}
	return exitInternal
}

// exitForCode is the exit code an error code stands for: 2 for a usage or
// configuration mistake, 3 for a provider or internal failure, 0 for codes
// that are outcomes of a run (budgets, limits, validation, abort), which
// the caller maps. before says whether the error came before the run made
// its first model request: then a missing API key (SDK_AUTH), a missing
// program, repository or work dir the run needs (DEPENDENCY_RESOLUTION) or
// a sandbox the machine cannot make (SANDBOX_UNAVAILABLE) is the user's
// setup to fix, 2; during a run the first two are provider or internal
// failures, 3.
func exitForCode(code string, before bool) int {
	switch code {
	case agenterr.CodeConfigurationNotFound, agenterr.CodeConfigurationParse, agenterr.CodeConfigurationValidation,
		agenterr.CodePromptNotFound, agenterr.CodePromptParse, agenterr.CodeUnknownProvider,
		agenterr.CodeParamMissing, agenterr.CodeParamInvalid, agenterr.CodeParamUnknown:
		return exitUsage
	case agenterr.CodeKeyInAncestor, agenterr.CodeWorkDirBusy:
		return exitUsage
	case agenterr.CodeSdkAuth, agenterr.CodeDependencyResolution:
		if before {
			return exitUsage
		}
		return exitInternal
	case agenterr.CodeSandboxUnavailable:
		// Refused when the agent is built: the machine cannot make the
		// sandbox runner.boundaries.sandbox asks for. A run it stops later
		// (a skill script) did not complete: the caller maps it.
		if before {
			return exitUsage
		}
	case agenterr.CodeSdkConnection, agenterr.CodeSdkRateLimit, agenterr.CodeSdkSessionNotFound,
		agenterr.CodeSdkRequest, agenterr.CodeScriptExhausted, "", "INTERNAL":
		return exitInternal
	case agenterr.CodeSandboxSetup:
		// The sandbox could not prepare what a command needs (its build
		// cache, made by the first command that uses it): internal,
		// whether the agent was being built or a run was under way.
		return exitInternal
	}
	return exitOK
}

// resumeCommand is the command that continues a run stopped by a
// recoverable error ("" when it cannot be continued). A run that used its
// iteration budget gets a larger one (twice the iterations, at most the
// hard limit): resumed as it is, it would stop again at once.
func resumeCommand(r *event.RunResult) string {
	if r.Error == nil || !r.Error.Recoverable {
		return ""
	}
	cmd := "capstan resume " + r.RunID
	if r.CompletionReason == agent.ReasonMaxIterations {
		n := min(2*max(r.Iterations, 1), agent.HardLimit)
		if n <= r.Iterations {
			return ""
		}
		cmd += " --max-iterations " + strconv.Itoa(n)
	}
	return cmd
}

// useColor reports whether w is a terminal and NO_COLOR (no-color.org)
// is unset or empty: then the verdict is printed in color.
func useColor(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == ""
}

func printSummary(w io.Writer, r *event.RunResult) { printSummaryOn(w, r, "") }

// printSummaryOn is printSummary for a run whose `continue with:` command
// takes resumeArgs (the Temporal server a run on Temporal continues on).
func printSummaryOn(w io.Writer, r *event.RunResult, resumeArgs string) {
	status := "NOT COMPLETED"
	if r.Success {
		status = "COMPLETED"
	}
	if useColor(w) {
		color := "\033[1;31m" // bold red
		if r.Success {
			color = "\033[1;32m" // bold green
		}
		status = color + status + "\033[0m"
	}
	if r.Error != nil && r.Reason == r.Error.Code+": "+r.Error.Message {
		fmt.Fprintf(w, "\n%s  %s\n", status, r.CompletionReason) // the error line below says why
	} else {
		fmt.Fprintf(w, "\n%s  %s — %s\n", status, r.CompletionReason, r.Reason)
	}
	fmt.Fprintf(w, "  agent %s  model %s  run %s\n", r.Agent, r.Model, r.RunID)
	fmt.Fprintf(w, "  iterations %d  step %s  tokens in=%d out=%d cache=%d/%d  cost $%.4f  %s\n",
		r.Iterations, r.StepID, r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CacheReadTokens, r.Usage.CacheWriteTokens, r.CostUSD,
		runreport.DurationText(time.Duration(r.DurationMs)*time.Millisecond, time.Duration(r.TestBaselineMs)*time.Millisecond))
	if r.Error != nil {
		// The message ends with the hint; it is printed once, on its own line.
		msg := strings.TrimSuffix(r.Error.Message, "; hint: "+r.Error.Hint)
		fmt.Fprintf(w, "  error %s: %s (recoverable: %v)\n", r.Error.Code, msg, r.Error.Recoverable)
		if r.Error.Hint != "" {
			fmt.Fprintf(w, "  hint: %s\n", r.Error.Hint)
		}
		if cmd := resumeCommand(r); cmd != "" {
			fmt.Fprintf(w, "  continue with: %s%s\n", cmd, resumeArgs)
		}
	}
	if t := r.TestChange; t != nil {
		fmt.Fprintf(w, "  requested change (iteration %d):\n%s\n", t.Iteration, indent(indent(t.Diff())))
		if len(t.Unrequested) > 0 {
			fmt.Fprintf(w, "  also changed, not requested: %s\n", strings.Join(t.Unrequested, ", "))
		}
		fmt.Fprintf(w, "  approve with: capstan approve %s\n  or reject with: capstan reject %s --reason TEXT\n", r.RunID, r.RunID)
	}
	if g := r.GitHub; g != nil {
		for _, c := range g.Calls {
			outcome := "done"
			if c.Error != "" {
				outcome = "FAILED (exit " + strconv.Itoa(c.ExitCode) + ")"
			}
			fmt.Fprintf(w, "  github: gh %s — %s\n", strings.Join(c.Args, " "), outcome)
		}
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
	if r.DefinitionDigest != "" {
		fmt.Fprintf(w, "  definition %s\n", r.DefinitionDigest)
	}
	fmt.Fprintf(w, "  journal %s  (capstan show %s)\n", r.Journal, r.RunID)
}

// printConfigError prints a configuration error with every problem. dir
// is the agent folder the problems' files are relative to; when the folder
// on disk is what was checked, the last line says how to check it again.
func printConfigError(w io.Writer, err error, dir string, onDisk bool) {
	var ve *agentdir.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems() {
			fmt.Fprintln(w, problemLine(dir, p))
		}
		fmt.Fprintf(w, "capstan: the agent definition is invalid (%s, listed above)", plural(len(ve.Result.Errors()), "error"))
		if onDisk && dir != "" {
			fmt.Fprintf(w, "; after fixing, check the folder again with: capstan validate %s", shellQuote(dir))
		}
		fmt.Fprintln(w)
		return
	}
	// A folder that cannot be loaded (no agent.json, broken JSON, a missing
	// registry) names its file relative to the folder.
	fmt.Fprintln(w, "capstan:", inFolder(err, dir))
}

// fromWorkingDir is the absolute path p relative to the current directory
// when it lies below it, else p.
func fromWorkingDir(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if rel, err := filepath.Rel(wd, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return rel
	}
	return p
}

// inFolder is err, a coded error naming a file of the agent folder dir
// relative to it, with that file named from the current directory, as
// validate names it; other errors are returned as they are.
func inFolder(err error, dir string) error {
	if e, ok := err.(*agenterr.Error); ok && e.File != "" && dir != "" && !filepath.IsAbs(e.File) {
		located := *e
		located.File = filepath.Join(dir, e.File)
		return &located
	}
	return err
}

// setParams returns the values of the agent's parameters given on the
// command line, by parameter name (params maps a name to its flag).
func setParams(fs *pflag.FlagSet, params map[string]string) map[string]string {
	values := map[string]string{}
	for name, flagName := range params {
		if f := fs.Lookup(flagName); f != nil && f.Changed {
			values[name] = f.Value.String()
		}
	}
	return values
}

// commandLine is "capstan <verb> args…" with every word shell-quoted: the
// command as typed, for a hint that repeats it with a flag added.
func commandLine(verb string, args []string) string {
	words := []string{"capstan", verb}
	for _, a := range args {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// sandboxOptOutHint makes the opt-out of a SANDBOX_UNAVAILABLE error the
// command as typed with --no-sandbox added, so it works pasted; other
// errors are returned as they are.
func sandboxOptOutHint(err error, command string) error {
	e, ok := err.(*agenterr.Error)
	if !ok || e.Code != agenterr.CodeSandboxUnavailable || command == "" {
		return err
	}
	hinted := *e
	hint := strings.TrimSuffix(strings.TrimSuffix(e.Hint, sandbox.OptOutHint), "; ")
	if hint != "" {
		hint += "; "
	}
	hinted.Hint = hint + "or run unsandboxed on purpose (Bash, validators and subprocess steps then run with your rights): " + command + ` --no-sandbox (or set "sandbox": {"enabled": false} under runner.boundaries in agent.json)`
	return &hinted
}
