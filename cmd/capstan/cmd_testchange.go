package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/verify"
)

// exitTestChangeRequested is the exit code of a run that stopped until a
// human approves or rejects the model's request to change protected files.
const exitTestChangeRequested = 5

func newApproveCmd() *cobra.Command { return newDecideCmd(verify.TestChangeApproved) }
func newRejectCmd() *cobra.Command  { return newDecideCmd(verify.TestChangeRejected) }

// newDecideCmd is capstan approve / capstan reject.
func newDecideCmd(decision string) *cobra.Command {
	var workDir, by, reason string
	verb, short := "approve", "Approve the model's request to change protected files (its diff becomes their baseline); then resume the run"
	long := `Approve the request with which a run's model asked to change protected files
(REQUEST_TEST_CHANGE, under runner.verification.testChanges "human"). The run
stopped for it (exit 5; capstan show RUN prints the diff). Exactly the files
the request names, with the content the diff shows, become those files'
baseline; every other protected file, and any later change, is checked as
before. The decision, with the diff, who and when, is appended to the run's
journal; continue the run with capstan resume RUN: the model is told.`
	if decision == verify.TestChangeRejected {
		verb, short = "reject", "Reject the model's request to change protected files; on resume the model is told to restore them and fix the code"
		long = `Reject the request with which a run's model asked to change protected files
(REQUEST_TEST_CHANGE, under runner.verification.testChanges "human"). The
decision, with --reason, who and when, is appended to the run's journal;
continue the run with capstan resume RUN: the model is told the change was
rejected and must restore the files and fix the code instead. The files'
baseline stays what it was: a change to them still fails verification.`
	}
	cmd := &cobra.Command{
		Use:               verb + " RUN",
		Short:             short,
		Long:              long,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeRunIDs(&workDir),
		RunE: func(cmd *cobra.Command, args []string) error {
			return decideTestChange(cmd.OutOrStdout(), workDir, args[0], decision, by, reason)
		},
	}
	cmd.Flags().StringVar(&workDir, "workdir", ".", "also find runs an older capstan kept under <workdir>/.capstan/runs (refused: such a journal is not trusted)")
	cmd.Flags().StringVar(&by, "by", "", "who decides, as journaled (default: the current user)")
	if decision == verify.TestChangeRejected {
		cmd.Flags().StringVar(&reason, "reason", "", "why, as the model is told")
	} else {
		cmd.Flags().StringVar(&reason, "reason", "", "why, as journaled")
	}
	return cmd
}

// decideTestChange journals a human's decision on the run's pending
// request, under the work dir's lock (no run of it is live).
func decideTestChange(out io.Writer, workDir, id, decision, by, reason string) error {
	rec, legacy, err := loadRun(workDir, id)
	if err != nil {
		return err
	}
	verb := "approve"
	if decision == verify.TestChangeRejected {
		verb = "reject"
	}
	if legacy {
		return withExit(exitUsage, fmt.Errorf("%s: run %s's journal %s is kept under its work dir, which the agent can write: a decision on it would rest on what the agent could have forged; run the agent again with a current capstan",
			verb, rec.ID, rec.Journal))
	}
	if err := journalProblem(rec); err != nil {
		return withExit(exitInternal, fmt.Errorf("%s: %w; nothing was decided", verb, err))
	}
	if rec.Temporal != nil {
		return withExit(exitUsage, fmt.Errorf("%s: run %s runs on Temporal; test-change requests are decided for local runs only", verb, rec.ID))
	}
	t := rec.TestChange
	switch {
	case t == nil || t.Request == nil:
		return withExit(exitUsage, fmt.Errorf("%s: run %s made no request to change protected files; see it with: capstan show %s", verb, rec.ID, rec.ID))
	case t.Decision != nil:
		return withExit(exitUsage, fmt.Errorf("%s: run %s's request (iteration %d) was already %s by %s; continue it with: capstan resume %s",
			verb, rec.ID, t.Request.Iteration, t.Decision.Decision, t.Decision.By, rec.ID))
	case rec.Result == nil || rec.Result.CompletionReason != agent.ReasonTestChangeRequested:
		return withExit(exitUsage, fmt.Errorf("%s: run %s is not waiting for a decision (it has not stopped for its request); see it with: capstan show %s", verb, rec.ID, rec.ID))
	}
	// The work dir's lock: no run of this work dir is live while the
	// decision is journaled (a model's background process cannot decide
	// for a run that is still going).
	lock, err := lockWorkDir(rec.Start.WorkDir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if by == "" {
		by = currentUser()
	}
	d := event.TestChangeDecision{Iteration: t.Request.Iteration, Decision: decision, By: by, At: time.Now().UTC(), Reason: reason, Files: t.Request.Files}
	w, err := journal.Append(rec.Journal)
	if err != nil {
		return withExit(exitInternal, fmt.Errorf("%s: %w; nothing was decided", verb, err))
	}
	w.SetPosition(t.Request.Iteration, rec.Result.StepID)
	event.Journal{Writer: w}.Emit(&d)
	if err := w.Close(); err != nil {
		return withExit(exitInternal, fmt.Errorf("%s: journal %s: %w", verb, rec.Journal, err))
	}
	fmt.Fprintf(out, "%s by %s: the request of run %s (iteration %d) to change %s\n", decision, by, rec.ID, t.Request.Iteration, strings.Join(t.Request.Paths(), ", "))
	fmt.Fprintln(out, indent(t.Request.Diff()))
	if decision == verify.TestChangeApproved {
		if stale := staleApproved(rec.Start.WorkDir, t.Request); len(stale) > 0 {
			fmt.Fprintf(out, "note: %s now differs from the approved content in the work dir; it fails verification until it matches the diff above\n", strings.Join(stale, ", "))
		}
	}
	fmt.Fprintf(out, "continue with: capstan resume %s\n", rec.ID)
	return nil
}

// staleApproved are the approved files whose content in the work dir is
// no longer the approved one.
func staleApproved(workDir string, req *event.TestChangeRequest) []string {
	b := &event.ProtectBaseline{Globs: req.Paths(), Files: map[string]event.ProtectedFile{}}
	for _, f := range req.Files {
		if f.Kind != verify.Deleted {
			b.Files[f.Path] = f.File
		}
	}
	changes, err := verify.CheckProtected(b, workDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range changes {
		out = append(out, c.Path)
	}
	return out
}

// currentUser names the user who decides.
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "unknown user"
}

// printTestChange prints a run's request to change protected files and
// what was decided, with the commands that decide or continue it.
func printTestChange(w io.Writer, runID string, t *agent.TestChangeRecord) {
	if t == nil || t.Request == nil {
		return
	}
	r := t.Request
	fmt.Fprintf(w, "test change requested in iteration %d: %s\n", r.Iteration, strings.Join(r.Paths(), ", "))
	if r.Reason != "" {
		fmt.Fprintf(w, "reason:\n%s\n", indent(r.Reason))
	}
	fmt.Fprintf(w, "requested change:\n%s\n", indent(r.Diff()))
	if len(r.Unrequested) > 0 {
		fmt.Fprintf(w, "also changed, not requested (never approved by this request): %s\n", strings.Join(r.Unrequested, ", "))
	}
	switch d := t.Decision; {
	case d == nil:
		fmt.Fprintf(w, "waiting for a decision;\n   approve with: capstan approve %s\n   or reject with: capstan reject %s --reason TEXT\n", runID, runID)
	case t.Delivered:
		fmt.Fprintf(w, "%s by %s%s%s\n", d.Decision, d.By, decidedAt(d), orEmptyText(d.Reason))
	default:
		fmt.Fprintf(w, "%s by %s%s%s; continue with: capstan resume %s\n", d.Decision, d.By, decidedAt(d), orEmptyText(d.Reason), runID)
	}
}

func decidedAt(d *event.TestChangeDecision) string {
	if d.At.IsZero() {
		return ""
	}
	return " at " + d.At.Format(time.RFC3339)
}

func orEmptyText(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}
