package scaleout

import (
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Histories recorded from a dev server (temporal workflow show -o json):
// a completed run pinned by capstan.AcquireWorker (runs started before
// the first iteration pinned the run), a completed run pinned by its
// first iteration, a run whose worker was killed (it moved), the two
// executions of a run that continued as new, and an issue workflow
// (capstan workflow run --temporal) whose third agent's worker was killed
// (re-recorded by TestWorkflowTemporalKilledWorker with
// CAPSTAN_RECORD_HISTORIES=DIR). Replaying them with the
// current workflow code fails when a change breaks determinism: such a
// change needs workflow.GetVersion, or running workflows break.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil || len(files) < 6 {
		t.Fatalf("recorded histories: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Run, workflow.RegisterOptions{Name: WorkflowName})
			r.RegisterWorkflowWithOptions(IssueWorkflow, workflow.RegisterOptions{Name: IssueWorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(quietLogger, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}

// A workflow that schedules its activities differently from the recorded
// history must fail the replay: the test above guards something.
func TestReplayDetectsADeterminismBreak(t *testing.T) {
	changed := func(ctx workflow.Context, in RunInput) (string, error) {
		// Pins the run twice before its first iteration.
		if _, err := acquire(ctx); err != nil {
			return "", err
		}
		return acquire(ctx)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: WorkflowName})
	err := r.ReplayWorkflowHistoryFromJSONFile(quietLogger, filepath.Join("testdata", "histories", "completed.json"))
	if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
		t.Fatalf("replaying a changed workflow: %v, want a nondeterminism error", err)
	}
}
