package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/journal"
)

// runSummary is one row of `capstan runs`.
type runSummary struct {
	RunID      string  `json:"runId"`
	Agent      string  `json:"agent,omitempty"`
	Status     string  `json:"status"`
	Reason     string  `json:"completionReason,omitempty"`
	Iterations int     `json:"iterations"`
	Cost       float64 `json:"cost"`
	Tokens     int64   `json:"tokens"`
	Journal    string  `json:"journal"`
}

func newRunsCmd() *cobra.Command {
	var workDir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List past runs recorded under the work dir",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			runs, err := journal.List(workDir)
			if err != nil {
				return withExit(exitInternal, err)
			}
			rows := make([]runSummary, 0, len(runs))
			for _, r := range runs {
				rows = append(rows, summarizeRun(r))
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no runs under %s\n", workDir)
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tAGENT\tSTATUS\tREASON\tITER\tTOKENS\tCOST")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t$%.4f\n", r.RunID, r.Agent, r.Status, r.Reason, r.Iterations, r.Tokens, r.Cost)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&workDir, "workdir", ".", "work dir whose .capstan/runs to list")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func summarizeRun(r journal.Run) runSummary {
	s := runSummary{RunID: r.ID, Journal: r.Path, Status: "unreadable"}
	rec, err := agent.LoadRun(r.ID, r.Path)
	if err != nil {
		return s
	}
	if rec.Start != nil {
		s.Agent = rec.Start.Agent
	}
	s.Iterations = len(rec.Iterations)
	switch {
	case rec.Result == nil:
		s.Status = "unfinished"
	case rec.Result.Success:
		s.Status = "completed"
	default:
		s.Status = "not completed"
	}
	if rec.Result != nil {
		s.Reason, s.Cost, s.Tokens, s.Iterations = rec.Result.CompletionReason, rec.Result.CostUSD, rec.Result.Usage.Total(), rec.Result.Iterations
	}
	return s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newShowCmd() *cobra.Command {
	var workDir string
	var asJSON bool
	var view reportFlags
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show one run as a chronological account: per iteration the prompt, the model's text and tool calls in order, the verdict, tokens and cost",
		Long: `Show one run as a chronological account. Per iteration: where the prompt
came from, the model's text and its tool calls in the order they happened
(with offsets and durations), the completion check, each validator's result
and failure pattern, the retry prompt sent next, the verdict, tokens and cost.

--format md writes GitHub Markdown for a pull request comment or a CI job
summary (for example >> "$GITHUB_STEP_SUMMARY"). capstan report RUN --html
writes the same account as one self-contained HTML page.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeRunIDs(&workDir),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := journal.Find(workDir, args[0])
			if err != nil {
				return withExit(exitUsage, err)
			}
			if asJSON {
				rec, err := agent.LoadRun(run.ID, run.Path)
				if err != nil {
					return withExit(exitInternal, err)
				}
				return writeJSON(cmd.OutOrStdout(), rec)
			}
			if err := view.write(cmd.OutOrStdout(), run); err != nil {
				return err
			}
			if view.format == "text" {
				// The definition the run was pinned to, and on resume
				// whether the agent folder had changed.
				rec, err := agent.LoadRun(run.ID, run.Path)
				if err != nil {
					return withExit(exitInternal, err)
				}
				printDefinitions(cmd.OutOrStdout(), rec.Definitions)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&workDir, "workdir", ".", "work dir whose .capstan/runs holds the run")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run record as JSON")
	view.register(cmd.Flags(), "text")
	return cmd
}
