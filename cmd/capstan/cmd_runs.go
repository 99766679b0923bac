package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/runreport"
	"github.com/capstan-dev/capstan/workflow"
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
	WorkDir    string  `json:"workDir,omitempty"`
	Journal    string  `json:"journal"`
	// Unverified is set for a journal kept inside the work dir, which the
	// agent could write (its status carries "(unverified)").
	Unverified bool `json:"unverified,omitempty"`
	// Started is the time of the journal's first event (zero for an empty
	// or unreadable journal).
	Started time.Time `json:"started,omitzero"`
}

// runStore is where run journals are kept: the user's state directory
// (CAPSTAN_STATE_DIR, else $XDG_STATE_HOME/capstan, else
// ~/.local/state/capstan).
func runStore() (journal.Store, error) {
	s, err := journal.OpenStore(os.Getenv)
	if err != nil {
		return s, withExit(exitUsage, err)
	}
	return s, nil
}

// loadRun finds RUN (an id or a unique prefix) from any directory — workDir
// also finds the runs an older capstan kept under <workDir>/.capstan/runs —
// and reads its journal: an agent run's, for resume (a pipeline run is
// refused). legacy is true for such a journal inside the work dir.
func loadRun(workDir, id string) (rec *agent.RunRecord, legacy bool, err error) {
	store, err := runStore()
	if err != nil {
		return nil, false, err
	}
	run, err := lookUpRun(store, workDir, id)
	if err != nil {
		return nil, false, err
	}
	if ev, ok := firstEvent(run.Path); ok && (runreport.IsPipelineStart(ev) || workflow.IsStart(ev)) {
		what := "a pipeline run"
		if workflow.IsStart(ev) {
			what = "a workflow run (capstan workflow run)"
		}
		show := "capstan show " + run.ID
		if run.Legacy {
			// Kept only under the folder given: show finds it there too.
			show += " --workdir " + shellQuote(workDir)
		}
		return nil, false, withExit(exitUsage, fmt.Errorf("run %s is %s, which cannot be resumed; see how it ended with: %s", run.ID, what, show))
	}
	rec, err = agent.LoadRun(run.ID, run.Path)
	if err != nil {
		return nil, false, withExit(exitInternal, err)
	}
	if err := newerJournal(rec); err != nil {
		return nil, false, err
	}
	return rec, run.Legacy, nil
}

// newerJournal refuses to continue or decide a run whose journal a newer
// capstan wrote (a run.start of a format above journal.Format): what
// this capstan does not know of it would be lost or misread.
func newerJournal(rec *agent.RunRecord) error {
	if rec.Start == nil || rec.Start.Format <= journal.Format {
		return nil
	}
	e := agenterr.New(agenterr.CodeUsage, agenterr.LayerLifecycle, false,
		"run %s was written by a newer capstan (journal format %d; this one reads formats 1 to %d)", rec.ID, rec.Start.Format, journal.Format)
	e.File = rec.Journal
	e.Hint = "continue it with the capstan that wrote it, or a newer one; see what it did with: capstan show " + rec.ID
	return withExit(exitUsage, e)
}

// lookUpRun is store.Find with a run id that finds no run, or more than
// one, as a coded usage error that says which id, where capstan looked and
// the command that lists the runs.
func lookUpRun(store journal.Store, workDir, id string) (journal.Run, error) {
	run, err := store.Find(workDir, id)
	var nr *journal.NoRunError
	switch {
	case err == nil:
		return run, nil
	case !errors.As(err, &nr):
		return run, withExit(exitUsage, err)
	case len(nr.Matches) > 0:
		some := nr.Matches
		if len(some) > 5 {
			some = append(some[:5:5], fmt.Sprintf("and %d more", len(nr.Matches)-5))
		}
		e := agenterr.New(agenterr.CodeRunAmbiguous, agenterr.LayerLifecycle, false,
			"run id %q starts %d runs' ids: %s", id, len(nr.Matches), strings.Join(some, ", "))
		e.Hint = "give the whole id; list the runs with: capstan runs --all"
		return run, withExit(exitUsage, e)
	}
	e := agenterr.New(agenterr.CodeRunNotFound, agenterr.LayerLifecycle, false,
		"no run %q in %s", id, strings.Join(nr.Searched, " or "))
	e.Hint = "a run an older capstan kept under DIR/" + journal.RunsDir + " is found with --workdir DIR; list the runs with: capstan runs --all"
	return run, withExit(exitUsage, e)
}

// loadShownRun is loadRun for show and report, which also show pipeline
// runs (capstan pipeline run): a pipeline journal is no agent
// run record, so for one it returns only the run's id, journal and the
// journal's integrity, and pipeline is true; its account comes from
// runreport. legacy is true for a journal kept inside the work dir, which
// the agent could write (shown as unverified).
func loadShownRun(workDir, id string) (rec *agent.RunRecord, pipeline, legacy bool, err error) {
	store, err := runStore()
	if err != nil {
		return nil, false, false, err
	}
	run, err := lookUpRun(store, workDir, id)
	if err != nil {
		return nil, false, false, err
	}
	if ev, ok := firstEvent(run.Path); ok && (runreport.IsPipelineStart(ev) || workflow.IsStart(ev)) {
		_, integrity, err := journal.ReadChecked(run.Path)
		if err != nil {
			return nil, false, false, withExit(exitInternal, err)
		}
		return &agent.RunRecord{ID: run.ID, Journal: run.Path, Integrity: integrity}, true, run.Legacy, nil
	}
	rec, err = agent.LoadRun(run.ID, run.Path)
	if err != nil {
		return nil, false, false, withExit(exitInternal, err)
	}
	return rec, false, run.Legacy, nil
}

// journalProblem is the error for a journal that cannot be trusted (broken
// hash chain, unreadable lines), nil otherwise.
func journalProblem(rec *agent.RunRecord) error {
	if err := rec.Integrity.Err(); err != nil {
		return fmt.Errorf("run %s: journal %s: %w", rec.ID, rec.Journal, err)
	}
	return nil
}

// errNotStarted explains a journal with no run.start event.
func errNotStarted(rec *agent.RunRecord) error {
	if rec.Integrity.Lines == 0 {
		if s, ok := journal.ReadStarted(rec.Journal); ok && s.AgentDir != "" && s.WorkDir != "" {
			return fmt.Errorf("run %s of agent %s was stopped before it started (its journal %s is empty): there is nothing to resume; start again with: capstan run %s --workdir %s",
				rec.ID, runreport.VisibleControls(s.Agent), rec.Journal, shellQuote(s.AgentDir), shellQuote(s.WorkDir))
		}
		return fmt.Errorf("run %s was stopped before it started (its journal %s is empty): there is nothing to resume; start the agent again with capstan run", rec.ID, rec.Journal)
	}
	return fmt.Errorf("run %s has no run.start event in %s: there is nothing to resume; start the agent again with capstan run", rec.ID, rec.Journal)
}

func newRunsCmd() *cobra.Command {
	var workDir string
	var asJSON, all bool
	var tf temporalFlags
	var limit int
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List past runs of the work dir (or of every work dir with --all)",
		Long: `List past runs, newest first, with their status: completed, not completed,
unfinished (killed or still running), empty (stopped before it started),
damaged (a line cannot be read) or tampered (the journal's hash chain is
broken). Journals live in the state directory (CAPSTAN_STATE_DIR, else
$XDG_STATE_HOME/capstan, else ~/.local/state/capstan); runs an older capstan
kept under <workdir>/.capstan/runs are listed too.

With --temporal HOST:PORT it lists the runs on that Temporal server instead
(capstan run --temporal, capstan submit): Temporal's status of each, and what
its journal says when the workers' state directory is this one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tf.address != "" {
				return listTemporalRuns(cmd.Context(), cmd, tf, limit, asJSON)
			}
			store, err := runStore()
			if err != nil {
				return err
			}
			var runs []journal.Run
			if all {
				runs, err = store.ListAll()
			} else {
				runs, err = store.List(workDir)
			}
			if err != nil {
				return withExit(exitInternal, err)
			}
			rows := newestFirst(runs)
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, rows)
			}
			if len(rows) == 0 {
				if all {
					fmt.Fprintf(cmd.ErrOrStderr(), "no runs in %s\n", store.Dir)
				} else {
					abs, err := filepath.Abs(workDir)
					if err != nil {
						abs = workDir
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "no runs of work dir %s (every work dir: capstan runs --all)\n", abs)
				}
				return nil
			}
			if err := writeRunsTable(out, rows, all); err != nil {
				return err
			}
			if slices.ContainsFunc(rows, func(r runSummary) bool { return r.Unverified }) {
				fmt.Fprintf(cmd.ErrOrStderr(), "(unverified) %s: its journal is under %s, not in the state directory\n", runreport.Unverified, journal.RunsDir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&workDir, "workdir", ".", "work dir whose runs to list")
	cmd.Flags().BoolVar(&all, "all", false, "list the runs of every work dir")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	tf.register(cmd.Flags(), temporalClient)
	cmd.Flags().IntVar(&limit, "limit", 100, "most runs to list (with --temporal)")
	return cmd
}

// writeRunsTable prints the runs as a table, with the work dir of each
// when all lists every work dir's runs.
func writeRunsTable(out io.Writer, rows []runSummary, all bool) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "RUN\tAGENT\tSTATUS\tREASON\tITER\tTOKENS\tCOST"
	if all {
		header += "\tWORKDIR"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		// A journal under a work dir is the agent's to write:
		// its words are printed with controls made visible.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t$%.4f", runreport.VisibleControls(r.RunID), runreport.VisibleControls(r.Agent),
			r.Status, runreport.VisibleControls(r.Reason), r.Iterations, r.Tokens, r.Cost)
		if all {
			fmt.Fprintf(tw, "\t%s", runreport.VisibleControls(r.WorkDir))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// newestFirst summarizes runs, the latest started first. Run ids order
// runs by the second they started in, and a random suffix after it; the
// journal's first event gives the sub-second order within a second. A run
// whose journal has no event is placed by its folder's modification time.
func newestFirst(runs []journal.Run) []runSummary {
	rows := make([]runSummary, len(runs))
	at := make(map[string]time.Time, len(runs))
	for i, r := range runs {
		rows[i] = summarizeRun(r)
		at[r.Path] = rows[i].Started
		if at[r.Path].IsZero() {
			at[r.Path] = r.Started
		}
	}
	slices.SortStableFunc(rows, func(a, b runSummary) int {
		if c := at[b.Journal].Compare(at[a.Journal]); c != 0 {
			return c
		}
		return cmp.Compare(b.RunID, a.RunID)
	})
	return rows
}

// firstEvent is the first event of the journal at path; false when it has
// none or it cannot be read.
func firstEvent(path string) (journal.Event, bool) {
	var ev journal.Event
	f, err := os.Open(path)
	if err != nil {
		return ev, false
	}
	defer f.Close()
	if err := json.NewDecoder(f).Decode(&ev); err != nil {
		return journal.Event{}, false
	}
	return ev, true
}

func summarizeRun(r journal.Run) runSummary {
	s := summarizeJournal(r)
	if r.Legacy {
		s.Unverified = true
		s.Status += " (unverified)"
	}
	return s
}

// summarizeJournal is summarizeRun's row, whatever the journal's place.
func summarizeJournal(r journal.Run) runSummary {
	s := runSummary{RunID: r.ID, Journal: r.Path, WorkDir: r.WorkDir, Status: "unreadable"}
	if ev, ok := firstEvent(r.Path); ok {
		s.Started = ev.Time
		if runreport.IsPipelineStart(ev) {
			return summarizePipelineRun(r, s)
		}
		if workflow.IsStart(ev) {
			return summarizeWorkflowRun(r, s)
		}
	}
	rec, err := agent.LoadRun(r.ID, r.Path)
	if err != nil {
		return s
	}
	if rec.Start != nil {
		s.Agent = rec.Start.Agent
		s.WorkDir = rec.Start.WorkDir
	} else if st, ok := journal.ReadStarted(r.Path); ok {
		// Killed before its run.start: the agent it was started with.
		s.Agent = st.Agent
	}
	s.Iterations = len(rec.Iterations)
	switch {
	case errors.Is(rec.Integrity.Err(), journal.ErrBrokenChain):
		s.Status = "tampered"
	case rec.Integrity.Err() != nil:
		s.Status = "damaged"
	case rec.Start == nil && rec.Result == nil:
		s.Status = "empty"
	case rec.Result == nil:
		s.Status = "unfinished"
	case rec.Result.Success:
		s.Status = "completed"
	default:
		s.Status = "not completed"
	}
	if rec.Result != nil {
		s.Reason, s.Cost, s.Tokens, s.Iterations = rec.Result.CompletionReason, rec.Result.CostUSD, rec.Result.Usage.Total(), rec.Result.Iterations
		return s
	}
	// No result (killed or still running): what its finished iterations
	// used, as `capstan show` counts them.
	s.Iterations = 0
	for _, it := range rec.Iterations {
		if !it.Finished {
			continue
		}
		s.Iterations++
		if it.Summary != nil {
			s.Tokens += it.Summary.Usage.Total()
			s.Cost += it.Summary.CostUSD
		}
	}
	return s
}

// summarizePipelineRun is summarizeRun for the journal of `capstan
// pipeline run`, which is no agent run record: its account
// (the status of the pipeline, no iterations, tokens or cost) comes from
// runreport, as show's does.
func summarizePipelineRun(r journal.Run, s runSummary) runSummary {
	s.Agent = "pipeline"
	_, integrity, err := journal.ReadChecked(r.Path)
	switch {
	case err != nil:
		return s
	case errors.Is(integrity.Err(), journal.ErrBrokenChain):
		s.Status = "tampered"
		return s
	case integrity.Err() != nil:
		s.Status = "damaged"
		return s
	}
	run, err := runreport.Load(r.ID, r.Path)
	if err != nil {
		return s
	}
	switch o := run.Outcome; {
	case o == nil:
		s.Status = "unfinished"
	case o.Success:
		s.Status, s.Reason = "completed", o.CompletionReason
	default:
		s.Status, s.Reason = "not completed", o.CompletionReason
	}
	return s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// redactRecordedBaseURL hides a key in the base URL and endpoint of rec's
// options: runs refuse such a URL now, but a run recorded before they did
// may hold one.
func redactRecordedBaseURL(rec *agent.RunRecord) {
	if rec.Start == nil || rec.Start.Options == nil {
		return
	}
	opts := *rec.Start.Options
	for _, u := range []*string{&opts.BaseURL, &opts.Endpoint} {
		if *u != "" && llm.CheckBaseURL("", *u) != nil {
			*u = llm.RedactedBaseURL(*u)
		}
	}
	start := *rec.Start
	start.Options = &opts
	rec.Start = &start
}

// markUnverified is v (a JSON object) with "unverified": true and
// "unverifiedReason" (the banner) added when its journal is kept inside
// the work dir, which the agent could write; v itself otherwise.
func markUnverified(v any, legacy bool) any {
	if !legacy {
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return v
	}
	fields["unverified"] = json.RawMessage("true")
	reason, _ := json.Marshal(runreport.Unverified)
	fields["unverifiedReason"] = reason
	return fields
}

func newShowCmd() *cobra.Command {
	var workDir string
	var asJSON bool
	var view reportFlags
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show one run (found by id from any directory) as a chronological account: per iteration the prompt, the model's text and tool calls in order, the verdict, tokens and cost",
		Long: `Show one run as a chronological account. Per iteration: where the prompt
came from, the model's text and its tool calls in the order they happened
(with offsets and durations), the completion check, each validator's result
and failure pattern with the end of a failed validator's output, the retry
prompt sent next, the verdict, tokens and cost.

--format md writes GitHub Markdown for a pull request comment or a CI job
summary (for example >> "$GITHUB_STEP_SUMMARY"). capstan report RUN --html
writes the same account as one self-contained HTML page.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeRunIDs(&workDir),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, isPipeline, legacy, err := loadShownRun(workDir, args[0])
			if err != nil {
				return err
			}
			view.unverified = legacy
			out := cmd.OutOrStdout()
			if acct, ok, err := loadWorkflowAccount(rec); err != nil {
				return err
			} else if ok && asJSON {
				if err := writeJSON(out, markUnverified(acct, legacy)); err != nil {
					return withExit(exitInternal, err)
				}
			} else if asJSON && isPipeline {
				acct, err := runreport.Load(rec.ID, rec.Journal)
				if err != nil {
					return withExit(exitInternal, err)
				}
				if err := writeJSON(out, markUnverified(acct, legacy)); err != nil {
					return withExit(exitInternal, err)
				}
			} else if asJSON {
				redactRecordedBaseURL(rec)
				if err := writeJSON(out, markUnverified(rec, legacy)); err != nil {
					return withExit(exitInternal, err)
				}
			} else {
				for _, note := range rec.Integrity.Notes() {
					fmt.Fprintf(out, "journal: %s\n", note)
				}
				if err := view.write(out, rec.ID, rec.Journal); err != nil {
					return err
				}
				if view.format == "text" {
					// The definition the run was pinned to, and on resume
					// whether the agent folder had changed.
					printDefinitions(out, rec.Definitions)
					// The protected files' digests the verdict checks against,
					// and the model's own "cannot be done" declaration.
					printProtected(out, rec.ProtectBaseline)
					printProtected(out, rec.StepBaseline)
					printTestChange(out, rec.ID, rec.TestChange)
					if r := rec.Result; r != nil {
						printCannotComplete(out, r.CannotComplete)
						if r.Verdict != "" {
							fmt.Fprintf(out, "closure verdict: %s\n", r.Verdict)
						}
					}
				}
			}
			// A forged or damaged record is shown, but never as a clean one.
			if err := journalProblem(rec); err != nil {
				return withExit(exitInternal, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&workDir, "workdir", ".", "also find runs an older capstan kept under <workdir>/.capstan/runs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run record as JSON")
	view.register(cmd.Flags(), "text")
	return cmd
}
