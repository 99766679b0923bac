package agent

import (
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/iteration"
)

// restore rebuilds the runtime context of a recorded run: every finished
// iteration's summary, the carry, the session and the step. An iteration
// the run was killed in is run again.
func (a *Agent) restore(r *RunRecord) error {
	if r.Result != nil && r.Result.Success {
		e := agenterr.New(agenterr.CodeAlreadyStopped, agenterr.LayerLifecycle, false, "run %s already completed", r.ID)
		e.Hint = "start a new run with capstan run"
		return e
	}
	for _, it := range r.Iterations {
		if !it.Finished || it.Summary == nil {
			break
		}
		a.rc.Summaries = append(a.rc.Summaries, *it.Summary)
		a.rc.Carry = iteration.UpdateCarry(a.rc.Carry, it.Summary)
	}
	a.rc.Iteration = len(a.rc.Summaries)
	if n := len(a.rc.Summaries); n > 0 {
		last := a.rc.Summaries[n-1]
		a.rc.SessionID = last.SessionID
		if last.StepID != "" {
			a.flow.step = last.StepID
		}
	}
	return nil
}
