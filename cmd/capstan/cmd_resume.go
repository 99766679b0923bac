package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/runreport"
)

func newResumeCmd() *cobra.Command {
	var flags runFlags
	var reload, trustWorkDirJournal bool
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue a run that stopped without completing (killed, budget, recoverable error) in the same session",
		Long: `Continue a run that stopped without completing, found by its id (or a unique
prefix) from any directory. The run continues in its own work dir with the
options it was started with — model, base URL (the endpoint), parameters,
--max-iterations, request timeouts — unless a flag given here overrides one.
The transcript is never sent to a different endpoint without --base-url or
--model saying so. A journal whose hash chain is broken, or that has an
unreadable line, is not resumed; nor is a journal an older capstan kept
under <workdir>/.capstan/runs, which the agent can write, unless
--trust-workdir-journal is given.

The run continues with the agent definition it recorded when it started
(agent.json, registry, prompts, schemas, script, SKILL.md files), checked
against the digest in its journal. Files of the agent folder that changed
since are listed (added / removed / modified) and ignored; pass
--reload-definition to continue with the folder's current files instead.
Both choices are journaled. A run whose recorded definition is missing
(DEFINITION_SNAPSHOT_MISSING) or does not match its digest
(DEFINITION_SNAPSHOT_MISMATCH) is refused unless --reload-definition is given.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeRunIDs(&flags.workDir),
		RunE: func(cmd *cobra.Command, args []string) error {
			if flags.temporal.address != "" {
				return resumeOnTemporal(cmd.Context(), cmd, flags, args[0])
			}
			rec, legacy, err := loadRun(flags.workDir, args[0])
			if err != nil {
				return err
			}
			if legacy {
				// Everything resume takes from this record (iterations,
				// verdicts, step state, baselines, the pinned definition
				// next to it) is what the agent could have written.
				if !trustWorkDirJournal {
					return withExit(exitUsage, fmt.Errorf("resume: %s: run %s's journal is %s, under the work dir: its iterations, step state, verdicts and pinned definition are files the agent could have written or planted, so it is not resumed; "+
						"start the agent anew with capstan run, or, if you trust everything in the work dir, resume it with: capstan resume %s --workdir %s --trust-workdir-journal",
						runreport.Unverified, rec.ID, rec.Journal, shellQuote(rec.ID), shellQuote(flags.workDir)))
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "capstan: %s: run %s's journal is %s, under the work dir; what it says of the run so far is not verified (--trust-workdir-journal)\n",
					runreport.Unverified, rec.ID, rec.Journal)
			}
			if err := checkResumable(rec); err != nil {
				return err
			}
			def, pin, err := resumeDefinition(cmd.ErrOrStderr(), rec, reload, flags.model)
			if err != nil {
				return configError(cmd.ErrOrStderr(), err, rec.Start.AgentDir, reload)
			}
			if err := resumeOptions(cmd.Flags(), &flags, rec, def, cmd.ErrOrStderr()); err != nil {
				return err
			}
			if st, err := os.Stat(flags.workDir); err != nil || !st.IsDir() {
				return withExit(exitUsage, fmt.Errorf("resume: run %s works in %s, which is no longer a directory; a run continues only in its own work dir (run the agent anew elsewhere with: capstan run %s --workdir DIR)",
					rec.ID, flags.workDir, shellQuote(rec.Start.AgentDir)))
			}
			flags.command = commandLine("resume", append([]string{args[0]}, givenFlags(cmd.Flags())...))
			if err := checkWatched(cmd.ErrOrStderr(), def, flags.workDir, reload, reload, flags.acceptChanged,
				acceptCommand("resume", append([]string{args[0]}, givenFlags(cmd.Flags())...))); err != nil {
				return err
			}
			return executeRun(cmd.Context(), cmd, def, flags, nil, rec, pin)
		},
	}
	flags.register(cmd.Flags())
	flags.temporal.registerResume(cmd.Flags())
	registerAccept(cmd.Flags(), &flags.acceptChanged)
	cmd.Flags().BoolVar(&trustWorkDirJournal, "trust-workdir-journal", false, "resume a run whose journal an older capstan kept under <workdir>/.capstan/runs, trusting what it records (the agent could have written it)")
	cmd.Flags().BoolVar(&reload, "reload-definition", false, "continue with the agent folder's current files instead of the definition recorded with the run (journaled with both digests)")
	cmd.Flags().Lookup("workdir").Usage = "also find runs an older capstan kept under <workdir>/.capstan/runs (the run continues in its own work dir)"
	return cmd
}

// checkResumable refuses a run that is not resumed here: one on Temporal,
// one with a damaged journal, one that never started, one waiting for a
// decision on a test change, and one that completed.
func checkResumable(rec *agent.RunRecord) error {
	if t := rec.Temporal; t != nil {
		// Continued here it would leave its workflow and branch
		// behind: the journal, the branch and show would disagree.
		tf := temporalFlags{address: t.Address, namespace: t.Namespace, taskQueue: t.TaskQueue}
		return withExit(exitUsage, fmt.Errorf("resume: run %s runs on Temporal (%s, namespace %s, branch %s): it is not resumed here, outside its workflow and its branch; continue it on Temporal with: capstan resume %s%s",
			rec.ID, t.Address, t.Namespace, t.Branch, rec.ID, tf.resumeArgs()))
	}
	if err := journalProblem(rec); err != nil {
		again := "start a new run with capstan run"
		if s := rec.Start; s != nil && s.AgentDir != "" && s.WorkDir != "" {
			again = "start a new run with: capstan run " + shellQuote(s.AgentDir) + " --workdir " + shellQuote(s.WorkDir)
		}
		return withExit(exitInternal, fmt.Errorf("resume: %w; it is not resumed (%s)", err, again))
	}
	if rec.Start == nil {
		return withExit(exitUsage, fmt.Errorf("resume: %w", errNotStarted(rec)))
	}
	if t := rec.TestChange; t.Pending() {
		return withExit(exitUsage, fmt.Errorf("resume: run %s waits for a decision on the model's request to change %s (see it with: capstan show %s); decide with: capstan approve %s  or  capstan reject %s --reason TEXT",
			rec.ID, strings.Join(t.Request.Paths(), ", "), rec.ID, rec.ID, rec.ID))
	}
	if rec.Result != nil && rec.Result.Success {
		return withExit(exitUsage, fmt.Errorf("resume: run %s already completed; there is nothing to resume (run the agent again with: capstan run %s --workdir %s)",
			rec.ID, shellQuote(rec.Start.AgentDir), shellQuote(rec.Start.WorkDir)))
	}
	return nil
}

// resumeOptions fills the flags not given on the command line from the
// options rec was started with, and checks that the transcript goes where
// the run was talking unless a flag says otherwise.
func resumeOptions(fs *pflag.FlagSet, flags *runFlags, rec *agent.RunRecord, def *agentdir.Agent, stderr io.Writer) error {
	start := rec.Start
	if err := flags.checkValues(); err != nil {
		return withExit(exitUsage, err)
	}
	if fs.Changed("workdir") {
		given, err := filepath.Abs(flags.workDir)
		if err != nil {
			return withExit(exitUsage, err)
		}
		if given != start.WorkDir {
			return withExit(exitUsage, fmt.Errorf("resume: run %s works in %s, not %s; it continues there (--workdir only finds runs an older capstan kept under <workdir>/.capstan/runs)", rec.ID, start.WorkDir, given))
		}
	}
	flags.workDir = start.WorkDir
	if !fs.Changed("model") {
		flags.model = start.Model
	}
	opts := start.Options
	if opts == nil {
		if !fs.Changed("base-url") {
			fmt.Fprintf(stderr, "resume: run %s was recorded by a capstan that did not record its endpoint; continuing against %s (pass --base-url to choose)\n",
				rec.ID, endpointName(agent.Endpoint(flags.model, def.Definition().Runner.BaseURL, os.Getenv)))
		}
		return nil
	}
	if !fs.Changed("max-iterations") {
		flags.maxIterations = opts.MaxIterations
	}
	flags.timeouts = opts.Timeouts.Override(flags.timeouts)
	if !fs.Changed("max-retry-after") {
		flags.maxRetryAfter = opts.MaxRetryAfter
	}
	if !fs.Changed("base-url") {
		flags.baseURL = opts.BaseURL
		if opts.EndpointSource != "" {
			flags.baseURLSource = opts.EndpointSource + ", as the run recorded"
		} else {
			flags.baseURLSource = "the run's recorded options"
		}
	}
	// Nothing below prints a base URL that carries a key: the run would
	// refuse it anyway (a run recorded before capstan refused them may
	// hold one).
	if err := agent.CheckBaseURLs(flags.model, flags.baseURL, "", "", os.Getenv); err != nil {
		if !fs.Changed("base-url") && opts.BaseURL != "" {
			return withExit(exitUsage, fmt.Errorf("resume: run %s was recorded with a base URL that carries a key; pass --base-url with the address alone: %w", rec.ID, err))
		}
		return withExit(exitUsage, err)
	}
	now := agent.Endpoint(flags.model, flags.baseURL, os.Getenv)
	if now == opts.Endpoint {
		return nil
	}
	if fs.Changed("base-url") || fs.Changed("model") {
		fmt.Fprintf(stderr, "resume: run %s talked to %s; continuing against %s as the flags ask\n", rec.ID, endpointName(opts.Endpoint), endpointName(now))
		return nil
	}
	e := fmt.Errorf("resume: run %s talked to %s, but its provider's environment now points to %s; resume will not send the transcript and key elsewhere silently", rec.ID, endpointName(opts.Endpoint), endpointName(now))
	hint := "pass --base-url " + endpointName(opts.Endpoint) + " to continue where it was talking, or --base-url " + now + " to move it"
	if opts.Endpoint == "" {
		hint = "unset the provider's base-URL variable to continue where it was talking, or pass --base-url " + now + " to move it"
	}
	return withExit(exitUsage, fmt.Errorf("%w (%s)", e, hint))
}

// endpointName names an endpoint for messages, without a key it may
// carry (one recorded before capstan refused them).
func endpointName(e string) string {
	if e == "" {
		return "the provider's public endpoint"
	}
	if llm.CheckBaseURL("", e) != nil {
		return llm.RedactedBaseURL(e)
	}
	return e
}
