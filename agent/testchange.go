package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

// ReasonTestChangeRequested: the run stopped until a human approves or
// rejects the model's request to change protected files.
const ReasonTestChangeRequested = verdict.ReasonTestChangeRequested

// TestChangeRecord is a run's latest request to change protected files and
// what was decided, as its journal says.
type TestChangeRecord struct {
	Request  *event.TestChangeRequest  `json:"request"`
	Decision *event.TestChangeDecision `json:"decision,omitempty"`
	// Delivered is true once a run continued after the decision (the model
	// was told).
	Delivered bool `json:"delivered,omitempty"`
}

// Pending reports whether the request waits for a decision.
func (t *TestChangeRecord) Pending() bool { return t != nil && t.Request != nil && t.Decision == nil }

// markDelivered notes that a run continued after the decision, if there
// is one: the model was told.
func (t *TestChangeRecord) markDelivered() {
	if t != nil && t.Decision != nil {
		t.Delivered = true
	}
}

// testChanges is the verdict stage's handler of test-change requests under
// the agent's runner.verification.testChanges policy.
type testChanges struct {
	a      *Agent
	policy string
}

// testChangeHandler is the stage's handler; nil when nothing is protected
// (a request then means nothing).
func (a *Agent) testChangeHandler() verdict.TestChangeHandler {
	if a.protection.guard == nil {
		return nil
	}
	return &testChanges{a: a, policy: a.spec.Runner.Verification.TestChangesPolicy()}
}

// asksProtectedChange reports whether the policy lets the model change
// protected files with Write and Edit (it must make the change it asks
// for).
func (a *Agent) asksProtectedChange() bool {
	return a.spec.Runner.Verification.TestChangesPolicy() != agentdir.TestChangesRefuse
}

// RequestTestChange implements verdict.TestChangeHandler.
func (t *testChanges) RequestTestChange(ctx context.Context, iteration int, asks []verdict.TestChangeAsk) (verdict.Verdict, error) {
	a := t.a
	paths := make([]string, len(asks))
	var reasons []string
	for i, ask := range asks {
		paths[i] = ask.File
		if ask.Reason != "" {
			reasons = append(reasons, ask.File+": "+ask.Reason)
		}
	}
	reason := strings.Join(reasons, "; ")
	if t.policy == agentdir.TestChangesRefuse {
		return testChangeRetry("refused", "this agent accepts no changes to its protected files (runner.verification.testChanges is refuse)",
			"Your request to change "+strings.Join(paths, ", ")+" is refused: this agent accepts no changes to its protected files. "+
				"Restore every protected file exactly to its content at the start of the run, then make the checks pass by changing the code under test. "+
				"If the task cannot be done without changing them, end your answer with a line starting "+verify.CannotCompleteMarker+" and your reason."), nil
	}
	req, invalid, err := a.protection.guard.Request(iteration, paths, reason)
	if err != nil {
		return verdict.Verdict{}, err
	}
	if len(invalid) > 0 || len(req.Files) == 0 {
		return testChangeRetry("invalid", "the request names files it cannot cover: "+strings.Join(invalid, "; "),
			"Your request to change protected files was not accepted, and nothing was decided:\n\n- "+strings.Join(invalid, "\n- ")+
				"\n\nA request covers only protected files you have changed: change the file first, then end your answer with one line per file:\n\n"+
				"    "+verify.TestChangeMarker+" <file> <reason>\n"), nil
	}
	a.emit.Emit(req)
	if t.policy == agentdir.TestChangesHuman {
		err := agenterr.New(agenterr.CodeTestChangeRequested, agenterr.LayerCompletion, false,
			"the model asks to change protected files (%s): %s", strings.Join(req.Paths(), ", "), orNone(reason))
		err.Hint = "read the diff (capstan show " + a.runID + "), then approve it with: capstan approve " + a.runID +
			" or reject it with: capstan reject " + a.runID + " --reason TEXT"
		a.flow.testChange = req
		return verdict.Verdict{Action: verdict.Stop, Err: err, Reason: err.Message, CompletionReason: ReasonTestChangeRequested}, nil
	}
	// hiddenTests: the hidden tests, which the model never saw, decide.
	g := a.hiddenCheck
	if g == nil {
		return verdict.Verdict{}, agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"runner.verification.testChanges is hiddenTests but the run has no hidden tests to decide with")
	}
	var runs []event.ValidatorRun
	for _, c := range a.testConditions() {
		runs = append(runs, event.ValidatorRun{Validator: c.Validator})
	}
	vr, err := g.CheckOutputs(ctx, runs)
	if err != nil {
		return verdict.Verdict{}, err
	}
	d := &event.TestChangeDecision{Iteration: iteration, By: "hidden tests", Files: req.Files}
	if vr.Valid {
		d.Decision, d.Reason = verify.TestChangeApproved, "the hidden tests pass with the change"
	} else {
		d.Decision = verify.TestChangeRejected
		d.Reason = fmt.Sprintf("%v of %v hidden tests do not pass", vr.Params["hiddenFailed"], vr.Params["hiddenTotal"])
	}
	a.applyTestChange(d)
	a.emit.Emit(d)
	p := TestChangePrompt(req, d)
	return testChangeRetry(d.Decision, d.Reason, p), nil
}

// applyTestChange makes an approved decision's files the guard's baseline.
func (a *Agent) applyTestChange(d *event.TestChangeDecision) {
	if d == nil || d.Decision != verify.TestChangeApproved || a.protection.guard == nil {
		return
	}
	verify.AcceptChanges(a.protection.guard.Baseline, d.Files)
	verify.AcceptChanges(a.protection.guard.Step, d.Files)
	if a.protection.resumed != nil {
		verify.AcceptChanges(a.protection.resumed, d.Files)
	}
}

// testChangeRetry is the verdict that tells the model what became of its
// request (pattern test-change-<outcome>).
func testChangeRetry(outcome, reason, text string) verdict.Verdict {
	return verdict.Verdict{Action: verdict.Retry, Reason: "test change request " + outcome + ": " + reason,
		Retry: &event.RetryPromptEvent{Kind: "test-change", Pattern: "test-change-" + outcome,
			Source: "test-change:" + outcome, Attempt: 1, Max: 1, Text: text}}
}

// TestChangePrompt is what the model is told of a decision on its request.
func TestChangePrompt(req *event.TestChangeRequest, d *event.TestChangeDecision) string {
	files := strings.Join(req.Paths(), ", ")
	if d.Decision == verify.TestChangeApproved {
		return "Your request to change " + files + " was approved by " + d.By + orEmpty(d.Reason, " (", ")") + ". " +
			"These files, as you changed them, are now what they are checked against. Every other protected file is still checked against its content at the start of the run, " +
			"and any further change to a protected file fails verification unless it is requested and approved in the same way. " +
			"Continue the task; when it is done, declare completion as before."
	}
	return "Your request to change " + files + " was rejected by " + d.By + orEmpty(d.Reason, ": ", "") + ". " +
		"Restore each of these files exactly to its content at the start of the run (in the diff below, '-' lines are the original, '+' lines your change), " +
		"then make the checks pass by changing the code under test, not the tests.\n\n" + req.Diff()
}

func orNone(s string) string {
	if s == "" {
		return "(no reason given)"
	}
	return s
}

func orEmpty(s, before, after string) string {
	if s == "" {
		return ""
	}
	return before + s + after
}

// resumeTestChange prepares a resumed run for its last test-change
// request: refused while undecided; once decided, the decision is the
// next iteration's prompt (unless a run already continued after it).
func (a *Agent) resumeTestChange(r *RunRecord) error {
	t := r.TestChange
	if t.Pending() {
		e := agenterr.New(agenterr.CodeTestChangeUndecided, agenterr.LayerLifecycle, false,
			"run %s waits for a decision on the model's request to change %s", r.ID, strings.Join(t.Request.Paths(), ", "))
		e.Hint = "approve it with: capstan approve " + r.ID + " or reject it with: capstan reject " + r.ID + " --reason TEXT; then resume"
		return e
	}
	if t == nil || t.Decision == nil || t.Delivered {
		return nil
	}
	d := t.Decision
	a.flow.pending = &event.PendingPrompt{Text: TestChangePrompt(t.Request, d), Source: "test-change:" + d.Decision,
		Kind: "test-change", Pattern: "test-change-" + d.Decision, Attempt: 1, Max: 1}
	return nil
}
