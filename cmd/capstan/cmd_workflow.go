package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/workflow"
)

// newWorkflowCmd builds `capstan workflow`: issue-driven multi-agent
// workflows in climpt's format.
func newWorkflowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Run issue-driven multi-agent workflows (climpt's .agent/workflow.json)",
		Long: `A workflow maps an issue's labels to a phase, each actionable phase to an
agent, and each agent's outcome to the next phase. capstan reads climpt's
workflow files unchanged. See docs/workflows.md.`,
	}
	cmd.AddCommand(newWorkflowValidateCmd(), newWorkflowRunCmd())
	return cmd
}

func newWorkflowValidateCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a workflow file and list every problem",
		Long: `Check a workflow file (climpt's .agent/workflow.json format) and print every
problem at once, one a line:

  file:line:col: severity CODE message (pointer) — hint

Every field is either acted on by "capstan workflow run" or reported with a
warning that says why it has no effect. Exit status: 0 valid (warnings are
allowed), 2 invalid. --json prints {"valid", "errors", "warnings"}. Codes
are documented in docs/workflows.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			_, res := workflow.Load(file)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(validateJSON{Valid: res.Valid(), Errors: res.Errors(), Warnings: res.Warnings()}); err != nil {
					return withExit(exitInternal, err)
				}
			} else {
				for _, p := range res.Problems() {
					fmt.Fprintln(out, problemLine("", p))
				}
				fmt.Fprintln(out, summary(file, res))
			}
			if !res.Valid() {
				return withExit(exitUsage, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// workflowRunFlags are the flags of `capstan workflow run`.
type workflowRunFlags struct {
	file, workDir, agentsDir string
	issue                    int
	labels                   []string
	state                    string
	limit                    int
	local                    string
	dryRun, asJSON, quiet    bool
	prioritize               bool
	acceptChanged            bool
	stub                     string
	model, repo              string
	tf                       workflowTemporalFlags
}

func newWorkflowRunCmd() *cobra.Command {
	var f workflowRunFlags
	cmd := &cobra.Command{
		Use:   "run [--workflow FILE] (--issue N | --label L [--state open] [--limit K]) [flags]",
		Short: "Drive issues through a workflow's phases, dispatching its agents",
		Long: `Drive an issue (--issue N) or a batch (--label L, repeatable: issues with
every label) through the workflow: read the issue's labels, pick the phase
and its agent, run the agent as a normal capstan run (verified completion,
its own journal), move the labels, post the handoff comment and close the
issue as one unit, and loop until a terminal or blocking phase or a limit.

Issues are GitHub's, through gh (its repository: --repo, else GH_REPO, else
the work dir's, fixed before any agent runs), or with --local DIR a
directory in climpt's subject-store layout (DIR/<n>/meta.json, body.md,
comments/). --dry-run prints the plan (phase, agent, and per outcome the
label changes, comment and close) and changes nothing. --stub-dispatch
'{"agent":"outcome"}' gives agents fixed outcomes instead of running them.
--prioritize (with --label) runs the workflow's prioritizer agent over the
batch and sets the issues' priority labels from its priorities.json.

--temporal HOST:PORT runs each issue as a Temporal workflow on the capstan
worker processes and each dispatched agent as a run there, --concurrency
issues at once; every label change, comment and close is applied once,
however often a worker is lost.

Statuses and exit codes: completed 0, dry-run 0, blocked 1,
cycle_exceeded 1, phase_repetition_exceeded 1, failed 3 (a batch exits with
its worst issue's); 2 for a usage or workflow file error. The workflow
run's own journal is shown by "capstan show RUN". See docs/workflows.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorkflow(cmd, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.file, "workflow", "w", "", "the workflow file (default <workdir>/.agent/workflow.json)")
	fs.StringVar(&f.workDir, "workdir", ".", "directory the agents work in")
	fs.StringVar(&f.agentsDir, "agents", "", "directory of the agent folders (default <workdir>/.agent)")
	fs.IntVar(&f.issue, "issue", 0, "run this issue")
	fs.StringArrayVar(&f.labels, "label", nil, "batch: the issues with this label (repeatable: every label)")
	fs.StringVar(&f.state, "state", "open", "batch: open, closed or all")
	fs.IntVar(&f.limit, "limit", 30, "batch: at most this many issues")
	fs.StringVar(&f.local, "local", "", "use the issues in this directory instead of GitHub")
	fs.BoolVar(&f.prioritize, "prioritize", false, "batch: run the workflow's prioritizer agent over the issues and set their priority labels from its priorities.json; the issues are not run")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the plan; change no issue and run no agent")
	fs.StringVar(&f.stub, "stub-dispatch", "", `fixed outcomes instead of agent runs, as JSON {"agent":"outcome"} (default outcome success)`)
	fs.StringVar(&f.model, "model", "", "model of every dispatched agent (overrides each agent's runner.model)")
	fs.StringVar(&f.repo, "repo", "", "GitHub repository OWNER/NAME of the issues")
	fs.BoolVar(&f.asJSON, "json", false, "print the result as JSON on stdout")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	f.tf.register(fs)
	registerAccept(fs, &f.acceptChanged)
	return cmd
}
