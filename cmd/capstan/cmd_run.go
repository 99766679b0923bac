package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/definition"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// runFlags are capstan's own flags of `run` and `resume`.
type runFlags struct {
	model         string
	baseURL       string
	workDir       string
	maxIterations int
	asJSON        bool
	quiet         bool
	stream        streamFlag
}

func (f *runFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "model as provider:model (overrides runner.model)")
	fs.StringVar(&f.baseURL, "base-url", "", "API base URL for the provider (e.g. an OpenAI-compatible server)")
	fs.StringVar(&f.workDir, "workdir", ".", "directory the agent works in; runs are journaled under <workdir>/.capstan/runs")
	fs.IntVar(&f.maxIterations, "max-iterations", 0, "override runner.budgets.maxIterations")
	fs.BoolVar(&f.asJSON, "json", false, "print the final Result as one JSON object on stdout")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	f.stream.register(fs, " and not --quiet")
}

func newRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "run DIR [--<parameter> VALUE ...] [flags]",
		Short: "Run the agent defined in DIR until its completion is verified or a limit stops it",
		Long: `Run the agent defined in DIR (agent.json, steps_registry.json, prompts/).

Every parameter declared in agent.json becomes a flag (--<name> or its "cli"
name) and the prompt variable {uv-<name>}. Run "capstan run DIR --help" to
see an agent's parameter flags.

Exit codes: 0 completed; 1 ran but did not complete (budget, limit, abort,
validation exhausted); 2 usage or configuration error; 3 provider or internal
error; 4 the model declared that the task cannot be done as specified (its
reason and evidence are in the result and in "capstan show").`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAgent(cmd, args)
		},
	}
}

// agentDirArg finds DIR among raw args: the first argument that is neither
// a flag nor the value of one of capstan's own value flags. Put DIR first
// (capstan run DIR --name value) when passing parameter flags.
func agentDirArg(args []string) (string, []string) {
	valueFlags := map[string]bool{"--model": true, "--base-url": true, "--workdir": true, "--max-iterations": true}
	without := func(i, n int) []string { return append(append([]string{}, args[:i]...), args[i+n:]...) }
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1], without(i, 2)
			}
			return "", args
		case valueFlags[a]:
			i++ // skip the flag's value
		case !strings.HasPrefix(a, "-"):
			return a, without(i, 1)
		}
	}
	return "", args
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
	def, err := agent.LoadPinned(dir, modelArg(rest))
	if err != nil {
		printConfigError(stderr, err)
		return withExit(exitUsage, nil)
	}
	spec := def.Definition()
	var flags runFlags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags.register(fs)
	params := registerParamFlags(fs, def)
	if isHelp(rest) {
		fmt.Fprintf(cmd.OutOrStdout(), "Usage: capstan run %s [flags]\n\nAgent %s: %s\n\nFlags:\n%s", dir, spec.Name, spec.Description, fs.FlagUsages())
		return nil
	}
	if err := fs.Parse(rest); err != nil {
		return withExit(exitUsage, fmt.Errorf("run: %w (agent %s accepts: %s)", err, spec.Name, strings.Join(paramFlagNames(def), " ")))
	}
	if fs.NArg() > 0 {
		return withExit(exitUsage, fmt.Errorf("run: unexpected arguments %q", fs.Args()))
	}
	values := map[string]string{}
	for name, flagName := range params {
		if f := fs.Lookup(flagName); f != nil && f.Changed {
			values[name] = f.Value.String()
		}
	}
	return executeRun(cmd.Context(), cmd, def, flags, values, nil, nil)
}

// registerParamFlags adds one flag per declared parameter and returns
// parameter name → flag name.
func registerParamFlags(fs *pflag.FlagSet, def *config.Agent) map[string]string {
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
		fs.String(flagName, "", usage)
		if p.Type == "boolean" {
			fs.Lookup(flagName).NoOptDefVal = "true"
		}
		out[p.Name] = flagName
	}
	return out
}

func paramFlagNames(def *config.Agent) []string {
	var out []string
	for _, p := range def.Params() {
		out = append(out, p.Flag)
	}
	return out
}

// executeRun builds, starts, runs and stops the agent, printing progress
// and the result, and maps the outcome to an exit code.
func executeRun(ctx context.Context, cmd *cobra.Command, def *config.Agent, flags runFlags, params map[string]string, resume *agent.RunRecord, pin *definition.Resume) error {
	stderr := cmd.ErrOrStderr()
	// Seed 002 loadAndValidate: configuration warnings are logged, not
	// swallowed (they are also in the journal).
	for _, w := range def.Warnings() {
		fmt.Fprintln(stderr, w.String())
	}
	streaming := flags.stream.enabled(stderr, flags.quiet)
	var progress *progressPrinter
	if !flags.quiet || streaming {
		progress = newProgressPrinter(stderr)
		progress.progress = !flags.quiet
	}
	if streaming {
		progress.enableStream(processEnviron())
	}
	ctx, tr := startTracing(ctx, stderr)
	defer tr.stop(ctx)
	opts := agent.BuildOptions{WorkDir: flags.workDir, Model: flags.model, BaseURL: flags.baseURL,
		MaxIterations: flags.maxIterations, Params: params, Resume: resume, TracerProvider: tr.provider(), DefinitionResume: pin}
	if progress != nil {
		opts.Events = []event.Consumer{progress}
	}
	a, err := agent.Build(ctx, def, opts)
	if err != nil {
		return withExit(exitCodeFor(err), err)
	}
	if err := a.Start(ctx); err != nil {
		a.Stop()
		return withExit(exitCodeFor(err), err)
	}
	if progress != nil {
		progress.begin(a.RunID(), def.Definition().Name)
	}
	a.Run(ctx)
	res := a.Stop()
	if progress != nil {
		progress.end()
	}
	printSummary(stderr, res)
	if flags.asJSON {
		if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
			return withExit(exitInternal, err)
		}
	}
	return withExit(resultExitCode(res), nil)
}

// resultExitCode maps a finished run to the documented exit codes: 0
// completed; otherwise the class of the error's code (a configuration or
// provider error ends a run too), 4 when the model declared that the task
// cannot be done as specified, and 1 for every other way a run can end
// without completing.
func resultExitCode(res *agent.Result) int {
	if res.Success {
		return exitOK
	}
	if res.CompletionReason == agent.ReasonCannotComplete {
		return exitCannotComplete
	}
	if res.Error != nil {
		if code := exitForCode(res.Error.Code); code != exitOK {
			return code
		}
	}
	return exitNotCompleted
}

// exitCodeFor maps an error raised before the loop ran: its code's class,
// or 3 (internal) for an error without a usage code.
func exitCodeFor(err error) int {
	if code := exitForCode(agenterr.CodeOf(err)); code != exitOK {
		return code
	}
	return exitInternal
}

// exitForCode is the exit code an error code stands for: 2 for a usage or
// configuration mistake, 3 for a provider or internal failure, 0 for codes
// that are outcomes of a run (budgets, limits, validation, abort), which
// the caller maps.
func exitForCode(code string) int {
	switch code {
	case agenterr.CodeConfigurationNotFound, agenterr.CodeConfigurationParse, agenterr.CodeConfigurationValidation,
		agenterr.CodePromptNotFound, agenterr.CodePromptParse, agenterr.CodeUnknownProvider,
		agenterr.CodeParamMissing, agenterr.CodeParamInvalid, agenterr.CodeParamUnknown:
		return exitUsage
	case agenterr.CodeSdkConnection, agenterr.CodeSdkRateLimit, agenterr.CodeSdkSessionNotFound, agenterr.CodeSdkAuth,
		agenterr.CodeSdkRequest, agenterr.CodeScriptExhausted, agenterr.CodeDependencyResolution, "", "INTERNAL":
		return exitInternal
	}
	return exitOK
}

func printSummary(w io.Writer, r *agent.Result) {
	status := "NOT COMPLETED"
	if r.Success {
		status = "COMPLETED"
	}
	fmt.Fprintf(w, "\n%s  %s — %s\n", status, r.CompletionReason, r.Reason)
	fmt.Fprintf(w, "  agent %s  model %s  run %s\n", r.Agent, r.Model, r.RunID)
	fmt.Fprintf(w, "  iterations %d  step %s  tokens in=%d out=%d cache=%d/%d  cost $%.4f  %.1fs\n",
		r.Iterations, r.StepID, r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CacheReadTokens, r.Usage.CacheWriteTokens, r.CostUSD, float64(r.DurationMs)/1000)
	if r.Error != nil {
		fmt.Fprintf(w, "  error %s: %s (recoverable: %v)\n", r.Error.Code, r.Error.Message, r.Error.Recoverable)
		if r.Error.Recoverable {
			fmt.Fprintf(w, "  continue with: capstan resume %s\n", r.RunID)
		}
	}
	if r.DefinitionDigest != "" {
		fmt.Fprintf(w, "  definition %s\n", r.DefinitionDigest)
	}
	fmt.Fprintf(w, "  journal %s  (capstan show %s)\n", r.Journal, r.RunID)
}

// printConfigError prints a configuration error with every problem.
func printConfigError(w io.Writer, err error) {
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems() {
			fmt.Fprintln(w, p.String())
		}
		fmt.Fprintf(w, "capstan: agent definition is invalid (%d errors); run capstan validate for details\n", len(ve.Result.Errors()))
		return
	}
	fmt.Fprintln(w, "capstan:", err)
}

func newResumeCmd() *cobra.Command {
	var flags runFlags
	var reload bool
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue a run that stopped without completing (killed, budget, recoverable error) in the same session",
		Long: `Continue a run that stopped without completing (killed, budget, recoverable
error) in the same session, work dir, parameters and model.

The run continues with the agent definition it recorded when it started
(agent.json, registry, prompts, schemas, script, SKILL.md files), checked
against the digest in its journal. Files of the agent folder that changed
since are listed (added / removed / modified) and ignored; pass
--reload-definition to continue with the folder's current files instead.
Both choices are journaled. A run whose recorded definition is missing
(DEFINITION_SNAPSHOT_MISSING) or does not match its digest
(DEFINITION_SNAPSHOT_MISMATCH) is refused unless --reload-definition is given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := journal.Find(flags.workDir, args[0])
			if err != nil {
				return withExit(exitUsage, err)
			}
			rec, err := agent.LoadRun(run.ID, run.Path)
			if err != nil {
				return withExit(exitInternal, err)
			}
			if rec.Start == nil {
				return withExit(exitUsage, fmt.Errorf("resume: run %s has no run.start event", run.ID))
			}
			flags.workDir = rec.Start.WorkDir
			def, pin, err := resumeDefinition(cmd.ErrOrStderr(), run, rec, reload, flags.model)
			if err != nil {
				printConfigError(cmd.ErrOrStderr(), err)
				return withExit(exitUsage, nil)
			}
			if flags.model == "" {
				flags.model = rec.Start.Model
			}
			return executeRun(cmd.Context(), cmd, def, flags, nil, rec, pin)
		},
	}
	flags.register(cmd.Flags())
	cmd.Flags().BoolVar(&reload, "reload-definition", false, "continue with the agent folder's current files instead of the definition recorded with the run (journaled with both digests)")
	return cmd
}
