package agent

import (
	"strings"
	"testing"
)

// A routed flow loops on its work step by design: without stepLoopLimit
// in the registry no consecutive-entry limit applies (the budgets bound
// it), so eleven repeats — one more than the default limit of 10 — then
// a handoff complete; with stepLoopLimit 3 the fourth entry stops the run
// with step_loop_limit. Both go through the loaded folder (defaults
// applied), as a run does.
func TestRoutedFlowStepLoopLimitIsTheRegistrys(t *testing.T) {
	in := func(xs ...string) []string { return xs }
	reg := func(limit int) map[string]any {
		r := map[string]any{
			"agentId": "loop", "c1": "steps", "entryStep": "initial.work",
			"steps": map[string]any{
				"initial.work": flowStepDef("initial.work", "work", "flow.schema.json", in("repeat", "handoff"),
					map[string]any{"repeat": to("initial.work"), "handoff": to("closure.work")}, nil),
				"closure.work": flowStepDef("closure.work", "closure", "flow.schema.json", in("closing", "repeat"),
					map[string]any{"closing": to(nil), "repeat": to("closure.work")}, nil),
			},
		}
		if limit > 0 {
			r["stepLoopLimit"] = limit
		}
		return r
	}
	schemas := map[string]any{
		"initial.work": stepSchema(in("repeat", "handoff"), nil),
		"closure.work": stepSchema(in("closing", "repeat"), nil),
	}
	script := "turns:\n" + strings.Repeat("  - structured: {next_action: {action: repeat}}\n", 11) +
		"  - structured: {next_action: {action: handoff}}\n  - structured: {next_action: {action: closing}}\n"
	res := runToEnd(t, load(t, routedAgent(t, reg(0), schemas, nil, script)), BuildOptions{WorkDir: t.TempDir(), MaxIterations: 20})
	if !res.Success || res.Iterations != 13 {
		t.Fatalf("without stepLoopLimit: %+v %+v", res, res.Error)
	}
	res = runToEnd(t, load(t, routedAgent(t, reg(3), schemas, nil, script)), BuildOptions{WorkDir: t.TempDir(), MaxIterations: 20})
	if res.Success || res.CompletionReason != ReasonStepLoopLimit || !strings.Contains(res.Reason, "stepLoopLimit 3") {
		t.Fatalf("with stepLoopLimit 3: %+v %+v", res, res.Error)
	}
}
