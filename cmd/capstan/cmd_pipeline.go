package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/pipeline"
	"github.com/capstan-dev/capstan/pipeline/standard"
	"github.com/capstan-dev/capstan/runreport"
	"github.com/capstan-dev/capstan/tracing"
)

// pipelineDeps are what the pipeline command needs from the rest of
// capstan: an agent runner for stages of kind agent (nil = such stages are
// a configuration error).
type pipelineDeps struct {
	Runner pipeline.AgentRunner
}

func newPipelineCmd(deps pipelineDeps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Run a contract-checked reasoning pipeline (a git-activity summary whose numbers cite commits)",
	}
	cmd.AddCommand(newPipelineRunCmd(deps), newPipelineCheckCmd(deps))
	return cmd
}

type pipelineRunFlags struct {
	repo, since, model, file, now string
	journalDir                    string
	json, continueOnViolation     bool
	noSandbox                     bool
	allowKeyInAncestors           bool
	inputs                        map[string]string
}

func newPipelineRunCmd(deps pipelineDeps) *cobra.Command {
	var f pipelineRunFlags
	cmd := &cobra.Command{
		Use:   "run [flags] \"request\"",
		Short: "Summarize a git repository's development activity with fact-checked numbers",
		Long: `Runs the reasoning pipeline on a local git repository: intent detection,
reasoning structure, retrieval planning, git retrieval, fact synthesis,
inference, summarization and validation. Every number in the summary comes
from a fact that cites commit hashes. Without --file the standard pipeline
runs; --file runs a pipeline declared in YAML (see docs/pipeline.md).

Exit codes: 0 ok and every number in the summary is backed by a cited
fact; 1 a violation or failed stage stopped the pipeline, or the validation
stage failed (a number no fact backs, a conclusion without evidence);
2 usage or configuration error (including pipeline compile errors and a
time window the request states in words capstan cannot read);
3 provider or internal error.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPipeline(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), deps, f, strings.Join(args, " "))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.repo, "repo", ".", "git repository to read")
	fl.StringVar(&f.since, "since", "", "window start: 36h, 7d, 2w, 3m (months), 1y, YYYY-MM-DD or RFC 3339 (default: from the request, else 7d)")
	fl.StringVar(&f.model, "model", "", "provider:model for intent detection, inference, summarization and model stages (default: rule-based)")
	fl.StringVar(&f.file, "file", "", "pipeline YAML file (default: the standard pipeline)")
	fl.StringVar(&f.now, "now", "", "the current time, RFC 3339 (for reproducible output; default: the clock)")
	fl.BoolVar(&f.json, "json", false, "print the whole AgentContext as JSON")
	fl.BoolVar(&f.continueOnViolation, "continue-on-violation", false, "report violations and go on instead of stopping")
	fl.BoolVar(&f.noSandbox, "no-sandbox", false, "run the commands of agent stages unsandboxed, with your rights (each agent run says so; default: sandboxed)")
	fl.BoolVar(&f.allowKeyInAncestors, allowKeyInAncestorsFlag, false, "start agent stages whose commands are not sandboxed although a process that started capstan holds a provider key in its environment, which those commands can read (see docs/sandbox.md)")
	fl.StringVar(&f.journalDir, "journal-dir", "", "also write a copy of the run journal to DIR/.capstan/runs/<run-id>/events.jsonl")
	fl.StringToStringVar(&f.inputs, "input", nil, "extra input.NAME=VALUE for pipeline files that declare more inputs (repeatable)")
	return cmd
}

func newPipelineCheckCmd(deps pipelineDeps) *cobra.Command {
	var model string
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a pipeline file (key flow, cycles, concurrent writers) without running it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var m llm.Model
			if model != "" {
				var err error
				if m, err = openPipelineModel(ctx, model, args[0]); err != nil {
					return err
				}
			}
			mgr, err := buildPipeline(ctx, args[0], m, deps, false, nil)
			if err != nil {
				return withExit(exitUsage, err)
			}
			spec, err := pipeline.LoadSpec(args[0])
			if err != nil {
				return withExit(exitUsage, err)
			}
			inputs := []string{pipeline.KeySessionID, pipeline.KeyTraceID}
			for _, in := range spec.Inputs {
				inputs = append(inputs, pipeline.NamespaceInput+"."+in)
			}
			plan, err := mgr.Compile(inputs...)
			if err != nil {
				return withExit(exitUsage, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: ok, %d stages\n", args[0], len(plan.Stages))
			for i, level := range plan.Levels {
				fmt.Fprintf(out, "  level %d: %s\n", i+1, strings.Join(level, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "provider:model for model stages")
	return cmd
}

func openPipelineModel(ctx context.Context, spec, base string) (llm.Model, error) {
	dir, _ := os.Getwd()
	if base != "" {
		dir = filepath.Dir(base)
	}
	uc, err := loadUserConfig()
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	baseURL, err := uc.baseURLFor(spec)
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	m, err := llm.OpenModel(ctx, spec, llm.Config{AgentDir: dir, WorkDir: dir, BaseURL: baseURL})
	if err != nil {
		return nil, withExit(exitCodeFor(err, true), err)
	}
	return m, nil
}

// buildPipeline builds the manager from file, or the standard pipeline;
// continueOnViolation turns FailOnViolation off.
func buildPipeline(ctx context.Context, file string, model llm.Model, deps pipelineDeps, continueOnViolation bool, events event.Emitter) (*pipeline.Manager, error) {
	scfg := standard.Config{Model: model}
	if file == "" {
		opts := pipeline.DefaultExecutionOptions()
		opts.FailOnViolation = !continueOnViolation
		return standard.NewManager(pipeline.Config{Options: opts, Events: events}, scfg)
	}
	spec, err := pipeline.LoadSpec(file)
	if err != nil {
		return nil, err
	}
	if continueOnViolation {
		spec.Options.FailOnViolation = false
	}
	return spec.Build(ctx, pipeline.BuildOptions{
		Config:       pipeline.Config{Events: events},
		Standard:     func(id string) (pipeline.ReasoningAgent, error) { return standard.Agent(id, scfg) },
		DefaultModel: model,
		Runner:       deps.Runner,
	})
}

func runPipeline(ctx context.Context, stdout, stderr io.Writer, deps pipelineDeps, f pipelineRunFlags, request string) error {
	in, err := pipelineInput(ctx, f, request)
	if err != nil {
		return err
	}
	var model llm.Model
	if f.model != "" {
		if model, err = openPipelineModel(ctx, f.model, f.file); err != nil {
			return err
		}
	}
	store, err := runStore()
	if err != nil {
		return err
	}
	// Agent stages act in the current directory, and the pipeline run is
	// kept in the state directory as theirs are, under that work dir.
	workDir, err := filepath.Abs(".")
	if err != nil {
		return withExit(exitInternal, err)
	}
	id := journal.NewRunID(time.Now())
	// The pipeline is built and compiled before its journal exists, so a
	// pipeline that cannot run leaves no run behind (as an invalid agent
	// folder does); the journal takes the events once it is open.
	sink := &forwardEmitter{to: event.Discard}
	ctx, tr := startTracing(ctx, stderr)
	defer tr.stop(ctx)
	events := tr.emitter(ctx, sink)
	deps.Runner = withStageRuns(deps.Runner, f, events, id, tr)
	mgr, err := buildPipeline(ctx, f.file, model, deps, f.continueOnViolation, events)
	if err != nil {
		return withExit(exitUsage, err)
	}
	if _, err := mgr.Compile(in.Keys()...); err != nil {
		return withExit(exitUsage, err)
	}
	closeJournals, err := openPipelineJournals(stderr, store, workDir, id, f.journalDir, sink)
	if err != nil {
		return err
	}
	defer closeJournals()
	events.Emit(event.PipelineRunStartEvent{Command: runreport.PipelineCommand, Request: request, Repo: f.repo, File: f.file,
		Model: f.model, WorkDir: workDir})
	if te, ok := events.(*tracing.Emitter); ok {
		// Agent stages run inside the pipeline's span, which run.start began.
		ctx = te.RunContext(ctx)
	}
	out, runErr := mgr.Execute(ctx, in)
	if runErr == nil && out != nil {
		// A summary that fails validation fails the run, in the journal
		// too: show and runs must not call it completed.
		runErr = validationFailure(out)
	}
	events.Emit(pipelineRunEnd(out, runErr))
	if out == nil { // compile error: nothing ran
		return withExit(exitUsage, runErr)
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return withExit(exitInternal, err)
		}
	} else {
		printPipelineResult(stdout, out)
	}
	printPipelineDiagnostics(stderr, out)
	return pipelineExit(runErr)
}

// pipelineInput checks the request and the flags of `pipeline run` and
// builds the pipeline's input: the request, the repository's activity
// since --since (as of --now), and each --input.
func pipelineInput(ctx context.Context, f pipelineRunFlags, request string) (*pipeline.AgentContext, error) {
	if strings.TrimSpace(request) == "" {
		return nil, withExit(exitUsage, errors.New("pipeline run: the request is empty"))
	}
	if f.noSandbox && !f.allowKeyInAncestors {
		// Refused before anything runs; an agent stage that opts out on
		// its own is checked when it starts.
		if err := checkAncestorKeys(os.Args, os.Getenv, agentSandboxHint); err != nil {
			return nil, withExit(exitUsage, err)
		}
	}
	now := time.Now().UTC()
	if f.now != "" {
		t, err := time.Parse(time.RFC3339, f.now)
		if err != nil {
			return nil, withExit(exitUsage, fmt.Errorf("--now %q: want an RFC 3339 time like 2026-11-21T12:00:00Z", f.now))
		}
		now = t.UTC()
	}
	if err := standard.CheckRepo(ctx, f.repo); err != nil {
		return nil, withExit(exitUsage, err)
	}
	in, err := standard.Input(request, f.repo, f.since, now)
	if err != nil {
		return nil, withExit(exitUsage, err)
	}
	for name, v := range f.inputs {
		if in.Has(pipeline.NamespaceInput + "." + name) {
			return nil, withExit(exitUsage, fmt.Errorf("--input %s: set by the command itself; use its own flag", name))
		}
		if err := in.SetInput(name, v); err != nil {
			return nil, withExit(exitUsage, fmt.Errorf("--input %s: %w", name, err))
		}
	}
	return in, nil
}

// withStageRuns sets up the agent stages' runs: each, with its own
// journal, is named in the pipeline's journal and names the pipeline run
// id in its own, is traced under the pipeline's span, and keeps the
// sandbox unless --no-sandbox.
func withStageRuns(runner pipeline.AgentRunner, f pipelineRunFlags, events event.Emitter, id string, tr *commandTracing) pipeline.AgentRunner {
	r, ok := runner.(agent.DirRunner)
	if !ok {
		return runner
	}
	r.Events, r.PipelineRun = events, id
	r.TracerProvider = tr.provider()
	r.NoSandbox = f.noSandbox
	if !f.allowKeyInAncestors {
		r.BeforeUnsandboxed = func() error { return checkAncestorKeys(os.Args, os.Getenv, agentSandboxHint) }
	}
	return r
}

// openPipelineJournals opens the pipeline run's journal in the state
// directory, and a copy in journalDir when one is asked for (show, report
// and runs read the state directory's, which the agent cannot reach), and
// points sink at them. The caller closes them with the returned func.
func openPipelineJournals(stderr io.Writer, store journal.Store, workDir, id, journalDir string, sink *forwardEmitter) (func(), error) {
	var cw *journal.Writer
	if journalDir != "" {
		var err error
		if cw, err = journal.Create(journalDir, id); err != nil {
			return nil, withExit(exitUsage, err)
		}
	}
	jw, err := store.Create(workDir, id)
	if err != nil {
		if cw != nil {
			cw.Close()
		}
		return nil, withExit(exitInternal, err)
	}
	sink.to = event.Journal{Writer: jw}
	fmt.Fprintf(stderr, "journal: %s  (capstan show %s)\n", jw.Path(), id)
	if cw == nil {
		return func() { jw.Close() }, nil
	}
	sink.to = teeEmitter{event.Journal{Writer: jw}, event.Journal{Writer: cw}}
	fmt.Fprintf(stderr, "journal copy: %s\n", cw.Path())
	return func() { jw.Close(); cw.Close() }, nil
}

// pipelineRunEnd is the pipeline run's end event: success, the error that
// ended it, the summary's status.
func pipelineRunEnd(out *pipeline.AgentContext, runErr error) event.PipelineRunEndEvent {
	end := event.PipelineRunEndEvent{Success: runErr == nil}
	if runErr != nil {
		end.Error, end.ErrorCode = runErr.Error(), agenterr.CodeOf(runErr)
	}
	if out != nil {
		status := out.String("metadata.status")
		end.Status = &status
	}
	return end
}

// pipelineExit is the exit of a pipeline run that ran: not completed for
// a stage or contract failure, usage for an agent stage refused before it
// ran, internal for anything else.
func pipelineExit(runErr error) error {
	if runErr == nil {
		return nil
	}
	switch agenterr.CodeOf(runErr) {
	case agenterr.CodeContractViolation, agenterr.CodeNamespaceViolation, agenterr.CodeStageFailed,
		agenterr.CodeStageTimeout, agenterr.CodeStagePanic, agenterr.CodeStageOutput, agenterr.CodeCanceled, agenterr.CodeGit,
		agenterr.CodePipelineValidation:
		return withExit(exitNotCompleted, runErr)
	case agenterr.CodeKeyInAncestor:
		// An agent stage that opts out of the sandbox, refused
		// before it ran: the user's setup, as for capstan run.
		return withExit(exitUsage, runErr)
	}
	return withExit(exitInternal, runErr)
}

// validationFailure turns a failed validation report into an error: the
// summary was printed, but a number in it is not backed by a fact, so the
// run must not pass as a success in a script or CI job.
func validationFailure(out *pipeline.AgentContext) error {
	var reps []standard.ValidationReport
	if out.Decode(standard.KeyValidationReport, &reps) != nil {
		return nil
	}
	failed := 0
	for _, r := range reps {
		if !r.Passed {
			failed += len(r.Violations)
		}
	}
	if failed == 0 {
		return nil
	}
	e := agenterr.New(agenterr.CodePipelineValidation, agenterr.LayerPipeline, false,
		"validation failed: %d problem(s) in the summary (listed above as validation: ...)", failed)
	e.Hint = "every number in the summary must equal a fact it cites; see the Facts list"
	return e
}

// printPipelineResult writes the summary and the facts it cites.
func printPipelineResult(w io.Writer, out *pipeline.AgentContext) {
	if s := out.String(standard.KeySummary); s != "" {
		fmt.Fprintln(w, s)
	} else {
		fmt.Fprintln(w, "(no summary: the pipeline did not produce reasoning.summary)")
	}
	var facts []standard.Fact
	if out.Decode(standard.KeyFacts, &facts) == nil && len(facts) > 0 {
		fmt.Fprintln(w, "\nFacts:")
		for _, f := range facts {
			fmt.Fprintf(w, "  %-4s %s", f.ID, f.Content)
			if len(f.Commits) > 0 {
				short := make([]string, 0, 6)
				for i, h := range f.Commits {
					if i == 6 {
						short = append(short, fmt.Sprintf("+%d more", len(f.Commits)-6))
						break
					}
					short = append(short, h[:min(10, len(h))])
				}
				fmt.Fprintf(w, " (%s)", strings.Join(short, " "))
			}
			fmt.Fprintln(w)
		}
	}
}

// printPipelineDiagnostics reports violations, stage errors, warnings and
// failed validation checks on stderr.
func printPipelineDiagnostics(w io.Writer, out *pipeline.AgentContext) {
	var vs []event.PipelineViolation
	if out.Decode(pipeline.KeyViolations, &vs) == nil {
		for _, v := range vs {
			fmt.Fprintf(w, "violation: agent %s: %s\n", v.AgentID, v.Message)
		}
	}
	var errs []pipeline.StageError
	if out.Decode(pipeline.KeyErrors, &errs) == nil {
		for _, e := range errs {
			if e.Final {
				fmt.Fprintf(w, "stage error: %s\n", e.Message)
			}
		}
	}
	var warns []string
	if out.Decode(pipeline.KeyWarnings, &warns) == nil {
		for _, s := range warns {
			fmt.Fprintf(w, "warning: %s\n", s)
		}
	}
	var reps []standard.ValidationReport
	if out.Decode(standard.KeyValidationReport, &reps) == nil {
		for _, r := range reps {
			for _, v := range r.Violations {
				fmt.Fprintf(w, "validation: %s\n", v)
			}
		}
	}
}

// forwardEmitter passes events on to the Emitter it is set to.
type forwardEmitter struct{ to event.Emitter }

// Emit implements event.Emitter.
func (f *forwardEmitter) Emit(p event.Payload) { f.to.Emit(p) }

// teeEmitter passes each event on to every one of its Emitters.
type teeEmitter []event.Emitter

// Emit implements event.Emitter.
func (t teeEmitter) Emit(p event.Payload) {
	for _, e := range t {
		e.Emit(p)
	}
}
