package event

import (
	"encoding/json"
	"testing"
)

// TestOncePerRunPayloadsJSON holds the journal's JSON of the payloads a
// run writes once or outside its iterations (run.end, github.call,
// verify.clean, agent.run, pipeline.violation, protect.baseline and the
// workflow run's events) and their kinds: the encoding they had before
// they moved into this package, key for key.
func TestOncePerRunPayloadsJSON(t *testing.T) {
	call := GitHubCallEvent{Args: []string{"issue", "close", "12"}, ExitCode: 1, Output: "no", Error: "exit status 1", DurationMs: 7}
	cycle := 2
	outcome, msg := "success", "boom"
	res := &RunResult{Success: false, CompletionReason: "error", Reason: "r", Iterations: 2, SessionID: "s", RunID: "run-1",
		Agent: "a", Model: "m", StepID: "work", Usage: Usage{InputTokens: 3, OutputTokens: 4}, CostUSD: 0.5, UsageUnreported: 1, DurationMs: 9,
		TestBaselineMs: 1, Journal: "j.jsonl", Error: &ResultError{Code: "X", Message: "m", Recoverable: true, Hint: "h"},
		Warnings: []string{"w"}, DefinitionDigest: "d", Verdict: "approved", Sandboxed: true, Handoff: map[string]any{"k": "v"},
		GitHub: &GitHubOutcome{Issue: "12", Action: "close", ActionSource: "config", AddLabels: []string{"done"},
			RemoveLabels: []string{"wip"}, Calls: []GitHubCallEvent{call}, OK: false, Skipped: "s"}}
	cases := []struct {
		p    Payload
		kind Kind
		want string
	}{
		{res, KindRunEnd, `{"success":false,"completionReason":"error","reason":"r","iterations":2,"sessionId":"s","runId":"run-1","agent":"a","model":"m","stepId":"work","usage":{"input_tokens":3,"output_tokens":4},"cost":0.5,"usageUnreported":1,"durationMs":9,"testBaselineMs":1,"journal":"j.jsonl","error":{"code":"X","message":"m","recoverable":true,"hint":"h"},"warnings":["w"],"definitionDigest":"d","verdict":"approved","sandboxed":true,"handoff":{"k":"v"},"github":{"issue":"12","action":"close","actionSource":"config","addLabels":["done"],"removeLabels":["wip"],"calls":[{"args":["issue","close","12"],"exitCode":1,"output":"no","error":"exit status 1","durationMs":7}],"ok":false,"skipped":"s"}}`},
		{call, KindGitHubCall, `{"args":["issue","close","12"],"exitCode":1,"output":"no","error":"exit status 1","durationMs":7}`},
		{&CleanRunEvent{Validator: "tests", Command: "go test", Passed: false, Differences: []string{"d"}, Output: "o", DurationMs: 3}, KindCleanRun,
			`{"validator":"tests","command":"go test","passed":false,"differences":["d"],"output":"o","durationMs":3}`},
		{AgentRunEvent{Dir: "agents/a", Result: &RunResult{RunID: "r"}}, KindAgentRun,
			`{"dir":"agents/a","result":{"success":false,"completionReason":"","iterations":0,"runId":"r","agent":"","model":"","usage":{"input_tokens":0,"output_tokens":0},"cost":0,"durationMs":0,"sandboxed":false}}`},
		{PipelineViolation{AgentID: "a", Kind: ViolationNamespace, Key: "k", Message: "m"}, KindPipelineViolation,
			`{"agent_id":"a","kind":"namespace","key":"k","message":"m"}`},
		{&ProtectBaseline{Step: "s", Globs: []string{"*_test.go"}, Files: map[string]ProtectedFile{}}, KindProtectBaseline,
			`{"step":"s","globs":["*_test.go"],"files":{}}`},
		{WorkflowStart{Command: "workflow run", Workflow: "w", WorkDir: "d", Issues: "i", Store: "s", DryRun: true, Stub: true, Temporal: "t"}, KindRunStart,
			`{"command":"workflow run","workflow":"w","workDir":"d","issues":"i","store":"s","dryRun":true,"stubDispatch":true,"temporal":"t"}`},
		{WorkflowEnd{Success: true, Status: "done", Issues: []WorkflowIssueResult{{Issue: 1, Status: "done", FinalPhase: "p", Cycles: 1,
			History: []WorkflowTransition{{From: "a", To: "b", Agent: "g", Outcome: "success", RunID: "r"}}, Closed: true, Error: "e",
			Plan: &WorkflowPlan{Issue: 1, Phase: "p", Agent: "g", Labels: []string{"l"}, Moves: []WorkflowPlanMove{{Outcome: "o", To: "t", Remove: []string{"x"}, Add: []string{"y"}, Template: "c", Close: true}}}}},
			Skipped: []int{3}, Error: "e", Prioritized: &WorkflowPrioritizeResult{Issues: []int{1}, RunID: "r", Assignments: []WorkflowAssignment{{Issue: 1, Priority: "P1"}}, Changed: []int{1}}}, KindRunEnd,
			`{"success":true,"status":"done","issues":[{"issue":1,"status":"done","finalPhase":"p","cycles":1,"history":[{"from":"a","to":"b","agent":"g","outcome":"success","runId":"r"}],"closed":true,"error":"e","plan":{"issue":1,"phase":"p","agent":"g","labels":["l"],"moves":[{"outcome":"o","to":"t","remove":["x"],"add":["y"],"comment":"c","close":true}]}}],"skipped":[3],"error":"e","prioritized":{"issues":[1],"runId":"r","assignments":[{"issue":1,"priority":"P1"}],"changed":[1]}}`},
		{WorkflowIssueResult{Issue: 1, History: []WorkflowTransition{}}, KindWorkflowIssueEnd, `{"issue":1,"status":"","finalPhase":"","cycles":0,"history":[]}`},
		{WorkflowPlan{Issue: 1}, KindWorkflowPlan, `{"issue":1,"phase":"","agent":"","labels":null,"moves":null}`},
		{WorkflowPrioritizeResult{}, KindWorkflowPrioritize, `{"issues":null,"assignments":null,"changed":null}`},
		{WorkflowIssueStartEvent{DryRun: true, Issue: 4}, KindWorkflowIssueStart, `{"dryRun":true,"issue":4}`},
		{WorkflowPhaseEvent{Issue: 4, Labels: []string{"l"}, Phase: "p", Type: "actionable"}, KindWorkflowPhase, `{"issue":4,"labels":["l"],"phase":"p","type":"actionable"}`},
		{WorkflowDispatchEvent{Agent: "a", Directory: "d", Issue: 4, Params: map[string]string{"k": "v"}, Phase: "p"}, KindWorkflowDispatch,
			`{"agent":"a","directory":"d","issue":4,"params":{"k":"v"},"phase":"p"}`},
		{WorkflowOutcomeEvent{Agent: "a", Error: &msg, Issue: 4, Outcome: &outcome, Run: &WorkflowOutcome{RunID: "r", Journal: "j", Success: true, Reason: "completed", Verdict: "v", Handoff: map[string]any{"k": 1.0}, Error: "e"}}, KindWorkflowOutcome,
			`{"agent":"a","error":"boom","issue":4,"outcome":"success","run":{"runId":"r","journal":"j","success":true,"completionReason":"completed","verdict":"v","handoff":{"k":1},"error":"e"}}`},
		{WorkflowTransitionEvent{Add: []string{"a"}, Agent: "g", From: "f", Issue: 4, Outcome: "o", Remove: []string{"r"}, To: "t"}, KindWorkflowTransition,
			`{"add":["a"],"agent":"g","from":"f","issue":4,"outcome":"o","remove":["r"],"to":"t"}`},
		{WorkflowStepEvent{Cycle: &cycle, Error: "e", Issue: 4, OK: true, Step: "comment"}, KindWorkflowStep, `{"cycle":2,"error":"e","issue":4,"ok":true,"step":"comment"}`},
		{WorkflowCompensationEvent{Compensation: "c", Cycle: 2, Error: "e", Issue: 4, OK: true}, KindWorkflowCompensation, `{"compensation":"c","cycle":2,"error":"e","issue":4,"ok":true}`},
		{WorkflowHandoffEvent{Artifact: "a", Handoff: "h", Issue: 4, Persisted: true}, KindWorkflowHandoff, `{"artifact":"a","handoff":"h","issue":4,"persisted":true}`},
		{WorkflowLabelSyncEvent{DryRun: true, Labels: []WorkflowLabelSync{{Name: "n", Action: "created", Error: "e"}}}, KindWorkflowLabelSync,
			`{"dryRun":true,"labels":[{"name":"n","action":"created","error":"e"}]}`},
	}
	for _, c := range cases {
		if k := c.p.EventKind(); k != c.kind {
			t.Errorf("%T: kind %q, want %q", c.p, k, c.kind)
		}
		b, err := json.Marshal(c.p)
		if err != nil {
			t.Fatalf("%T: %v", c.p, err)
		}
		if string(b) != c.want {
			t.Errorf("%T encodes as\n%s\nwant\n%s", c.p, b, c.want)
		}
	}
}
