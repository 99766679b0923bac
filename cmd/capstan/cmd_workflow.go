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
	cmd.AddCommand(newWorkflowValidateCmd())
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
