package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
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
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show one run: iterations, resolved prompts, responses, tools, checks, usage and how it ended",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := journal.Find(workDir, args[0])
			if err != nil {
				return withExit(exitUsage, err)
			}
			rec, err := agent.LoadRun(run.ID, run.Path)
			if err != nil {
				return withExit(exitInternal, err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rec)
			}
			printRun(cmd.OutOrStdout(), rec)
			return nil
		},
	}
	cmd.Flags().StringVar(&workDir, "workdir", ".", "work dir whose .capstan/runs holds the run")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run as JSON")
	return cmd
}

func printRun(w io.Writer, rec *agent.RunRecord) {
	fmt.Fprintf(w, "run %s\n", rec.ID)
	if s := rec.Start; s != nil {
		fmt.Fprintf(w, "agent %s (%s)  model %s  workdir %s\n", s.Agent, s.AgentDir, s.Model, s.WorkDir)
		if len(s.Params) > 0 {
			fmt.Fprintf(w, "params %v\n", s.Params)
		}
	}
	printDefinitions(w, rec.Definitions)
	printProtected(w, rec.ProtectBaseline)
	printProtected(w, rec.StepBaseline)
	for _, it := range rec.Iterations {
		fmt.Fprintf(w, "\n== iteration %d", it.Iteration)
		if it.Step != "" {
			fmt.Fprintf(w, "  step %s", it.Step)
		}
		if !it.Finished {
			fmt.Fprint(w, "  (cut short)")
		}
		fmt.Fprintln(w)
		if it.Prompt != "" {
			fmt.Fprintf(w, "-- prompt (%s)\n%s\n", it.PromptSource, indent(it.Prompt))
		}
		if q := it.Query; q != nil {
			for _, u := range q.ToolUses {
				status := "ok"
				switch {
				case u.Denied:
					status = "DENIED"
				case u.IsError:
					status = "error"
				}
				fmt.Fprintf(w, "-- tool %s %s [%s]\n%s\n", u.Name, truncate(string(u.Input), 200), status, indent(truncate(u.Output, 400)))
			}
			for _, r := range q.Responses {
				fmt.Fprintf(w, "-- response\n%s\n", indent(r))
			}
			if len(q.StructuredOutput) > 0 {
				fmt.Fprintf(w, "-- structured output\n%s\n", indent(string(q.StructuredOutput)))
			}
			cost := q.CostUSD
			if it.Summary != nil {
				cost = it.Summary.CostUSD
			}
			fmt.Fprintf(w, "-- usage in=%d out=%d cache_read=%d cache_write=%d turns=%d cost=$%.4f\n",
				q.Usage.InputTokens, q.Usage.OutputTokens, q.Usage.CacheReadTokens, q.Usage.CacheWriteTokens, q.Turns, cost)
		}
		for _, ev := range it.Events {
			fmt.Fprintf(w, "-- %s %s\n", ev.Type, truncate(string(ev.Data), 600))
		}
		for _, e := range it.Errors {
			fmt.Fprintf(w, "-- error %s: %s\n", e.Code, e.Message)
		}
		if o := it.Outcome; o != nil {
			switch {
			case o.Complete:
				fmt.Fprintf(w, "-- outcome: complete (%s)\n", o.Reason)
			case o.Stop:
				fmt.Fprintf(w, "-- outcome: stopped (%s)\n", o.Reason)
			default:
				fmt.Fprintf(w, "-- outcome: continue %s\n", o.Reason)
			}
		}
	}
	fmt.Fprintln(w)
	for _, warn := range rec.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if r := rec.Result; r != nil {
		status := "NOT COMPLETED"
		if r.Success {
			status = "COMPLETED"
		}
		fmt.Fprintf(w, "%s: %s — %s\n", status, r.CompletionReason, r.Reason)
		fmt.Fprintf(w, "iterations %d  tokens in=%d out=%d  cost $%.4f  %dms\n", r.Iterations, r.Usage.InputTokens, r.Usage.OutputTokens, r.CostUSD, r.DurationMs)
		if r.Error != nil {
			fmt.Fprintf(w, "error %s: %s (recoverable=%v)\n", r.Error.Code, r.Error.Message, r.Error.Recoverable)
		}
		printCannotComplete(w, r.CannotComplete)
	} else {
		fmt.Fprintf(w, "UNFINISHED: the journal has no run.end event (the run was killed or is still running); %d iterations finished\n", rec.FinishedIterations())
	}
}

func indent(s string) string {
	return "   " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n   ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
}
