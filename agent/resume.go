package agent

import "github.com/capstan-dev/capstan/event"

// restore rebuilds the runtime context of a recorded run: every finished
// iteration's summary, the carry, the session and the step. An iteration
// the run was killed in is run again.
func (a *Agent) restore(r *RunRecord) error {
	for _, it := range r.Iterations {
		if !it.Finished || it.Summary == nil {
			break
		}
		a.rc.Summaries = append(a.rc.Summaries, *it.Summary)
		a.rc.Carry = event.UpdateCarry(a.rc.Carry, it.Summary)
	}
	a.rc.Iteration = len(a.rc.Summaries)
	a.rc.Unrecorded, a.rc.UnreportedResponses = r.UnrecordedUsage, r.UnreportedResponses
	a.rc.UnrecordedCostUSD = r.rewoundCostUSD
	for model, u := range r.unrecordedByModel {
		// Each killed iteration's usage is priced at the model that billed
		// it: a step's own model, or the run's ("").
		if model == "" {
			model = a.model
		}
		if cost := a.costFunc(model); cost != nil {
			a.rc.UnrecordedCostUSD += cost(u)
		}
	}
	// Each model continues its own session: the run's model in the loop's
	// context, steps' own models in the flow.
	for _, s := range a.rc.Summaries {
		if m := a.reg.Steps[s.StepID].Model; m != "" && m != a.model {
			a.flow.setSession(m, s.SessionID)
		} else {
			a.rc.SessionID = s.SessionID
		}
	}
	if st := r.stepState; st != nil && a.rc.Iteration > 0 {
		if err := a.flow.machine.Restore(st.State); err != nil {
			return err
		}
		a.flow.pending = st.Pending
	}
	return nil
}
