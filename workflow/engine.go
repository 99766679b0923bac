package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/event"
)

// Statuses of an issue's run (and of a batch: the worst of its issues).
const (
	StatusCompleted         = "completed"
	StatusBlocked           = "blocked"
	StatusCycleExceeded     = "cycle_exceeded"
	StatusPhaseRepetition   = "phase_repetition_exceeded"
	StatusDryRun            = "dry-run"
	StatusFailed            = "failed"
	unknownPhase            = "unknown"
	compensationCommentScan = 20
)

// Command is the command a workflow journal's run.start names.
const Command = "workflow run"

// Dispatch is one agent run the workflow asks for.
type Dispatch struct {
	Agent *Agent
	Issue int
	// Params are the payload keys and issue, as parameter values; the
	// dispatcher passes those the agent declares.
	Params map[string]string
}

// Dispatcher runs agents.
type Dispatcher interface {
	Dispatch(ctx context.Context, d Dispatch) (event.WorkflowOutcome, error)
}

// Runner drives issues through a workflow.
type Runner struct {
	Workflow *Workflow
	Issues   Issues
	Dispatch Dispatcher
	// Events is the workflow run's journal.
	Events event.Emitter
	DryRun bool
	// Sleep waits between cycles (rules.cycleDelayMs); default a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock of $.workflow.context.now.
	Now func() time.Time
	// Handoffs writes handoff artifacts and payloads; nil when the
	// workflow has none.
	Handoffs *HandoffEmitter
	// Lock takes the issue's lock; nil takes none. It returns a release
	// function, or ok false when another run holds the issue.
	Lock func(issue int) (release func(), ok bool, err error)
}

func (r *Runner) emit(p event.Payload) {
	if r.Events != nil {
		r.Events.Emit(p)
	}
}

func (r *Runner) sleep(ctx context.Context, ms int64) error {
	if ms <= 0 {
		return nil
	}
	if r.Sleep != nil {
		return r.Sleep(ctx, time.Duration(ms)*time.Millisecond)
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// resolve finds the issue's phase from its labels: a terminal or
// blocking label first (the first in the issue's order), else the
// actionable phase of lowest priority (ties: the smaller phase id).
func (w *Workflow) resolve(labels []string) (*Phase, bool) {
	for _, l := range labels {
		if ph := w.phaseOfLabel(l); ph != nil && (ph.Type == Terminal || ph.Type == Blocking) {
			return ph, true
		}
	}
	var best *Phase
	for _, l := range labels {
		ph := w.phaseOfLabel(l)
		if ph == nil || ph.Type != Actionable {
			continue
		}
		if best == nil || ph.Priority < best.Priority || (ph.Priority == best.Priority && ph.ID < best.ID) {
			best = ph
		}
	}
	return best, best != nil
}

// noPhaseError says that an issue with these labels is in no phase, and
// which labels would start it.
func (w *Workflow) noPhaseError(labels []string) string {
	var start []string
	for _, lp := range w.LabelMapping {
		if ph := w.Phases[lp.Phase]; ph != nil && ph.Type == Actionable {
			start = append(start, fmt.Sprintf("%s (phase %s)", w.withPrefix(lp.Label), ph.ID))
		}
	}
	has := "it has no labels"
	if len(labels) > 0 {
		has = "its labels are " + strings.Join(labels, ", ")
	}
	return fmt.Sprintf("no label of the issue names a phase of the workflow (%s); give it the label of the phase to start in: %s", has, strings.Join(start, ", "))
}

// OutcomeOf is the agent's outcome for a run: a transformer's success or
// failed (its verdict, when it has fallbackPhases and one), a
// validator's verdict.
func (a *Agent) OutcomeOf(o event.WorkflowOutcome) (string, error) {
	binary := "failed"
	if o.Success {
		binary = "success"
	}
	if a.Role == Validator {
		if o.Verdict == "" {
			why := "completed without a verdict in its closure step's answer"
			if !o.Success {
				why = "did not complete (" + o.Reason + ")"
			}
			return "", fmt.Errorf("validator agent %s must end with a verdict, but its run %s %s", a.ID, o.RunID, why)
		}
		return o.Verdict, nil
	}
	if a.FallbackPhases != nil && o.Verdict != "" {
		return o.Verdict, nil
	}
	return binary, nil
}

// Target is the phase an outcome moves the issue to.
func (a *Agent) Target(outcome string) (string, error) {
	if a.Role == Transformer {
		if outcome == "success" {
			return a.OutputPhase, nil
		}
		if p, ok := a.FallbackPhases[outcome]; ok {
			return p, nil
		}
	} else if p, ok := a.OutputPhases[outcome]; ok {
		return p, nil
	}
	if a.FallbackPhase == "" {
		return "", fmt.Errorf("agent %s ended with outcome %q, which its phases do not route, and it has no fallbackPhase", a.ID, outcome)
	}
	return a.FallbackPhase, nil
}

// labelChanges are the labels a move to target removes (every workflow
// label the issue has but the one it adds; on a terminal move the
// prioritizer's labels too) and adds (the first label mapping to target,
// in file order).
func (w *Workflow) labelChanges(current []string, target string) (remove, add []string) {
	strip := map[string]bool{}
	for _, lp := range w.LabelMapping {
		strip[lp.Label] = true
	}
	if ph := w.Phases[target]; ph != nil && ph.Type == Terminal && w.Prioritizer != nil {
		for _, l := range w.Prioritizer.Labels {
			strip[l] = true
		}
	}
	for _, lp := range w.LabelMapping {
		if lp.Phase == target {
			add = append(add, w.withPrefix(lp.Label))
			break
		}
	}
	for _, l := range current {
		// A move to the phase the issue is in keeps its label (climpt
		// adds and then removes it, leaving the issue with no phase).
		if bare, ok := w.stripPrefix(l); ok && strip[bare] && !slices.Contains(add, l) {
			remove = append(remove, l)
		}
	}
	return remove, add
}

// Template is the comment template of a move of agent with outcome, and
// its key; "" when none.
func (w *Workflow) Template(agent, outcome string) (key, body string) {
	for _, k := range templateKeys(agent, outcome) {
		if t, ok := w.CommentTemplates[k]; ok {
			return k, t
		}
	}
	return "", ""
}

// RenderTemplate replaces {name} with vars[name] (non-strings as JSON);
// unknown names stay as written.
func RenderTemplate(t string, vars map[string]any) string {
	return substitute(t, "{", func(name string) (string, bool) {
		v, ok := vars[name]
		if !ok || !isWord(name) {
			return "", false
		}
		return valueText(v), true
	})
}

// substitute replaces each open+NAME+"}" in t by lookup(NAME); a name
// lookup does not know stays as written.
func substitute(t, open string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for {
		i := strings.Index(t, open)
		if i < 0 {
			break
		}
		j := strings.IndexByte(t[i+len(open):], '}')
		if j < 0 {
			break
		}
		end := i + len(open) + j
		if v, ok := lookup(t[i+len(open) : end]); ok {
			b.WriteString(t[:i])
			b.WriteString(v)
			t = t[end+1:]
			continue
		}
		b.WriteString(t[:i+len(open)])
		t = t[i+len(open):]
	}
	b.WriteString(t)
	return b.String()
}

func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// CompensationMarker is the text a compensation comment carries so that
// it is posted once per issue and cycle.
func CompensationMarker(issue, cycle int) string {
	return fmt.Sprintf("capstan-compensation:subject-%d:cycle-%d", issue, cycle)
}

// RunIssue drives one issue until a terminal or blocking phase, a limit,
// or a failure.
func (r *Runner) RunIssue(ctx context.Context, issue int) (res event.WorkflowIssueResult) {
	res = event.WorkflowIssueResult{Issue: issue, FinalPhase: unknownPhase, Status: StatusBlocked, History: []event.WorkflowTransition{}}
	r.emit(event.WorkflowIssueStartEvent{Issue: issue, DryRun: r.DryRun})
	defer func() {
		res.Cycles = len(res.History)
		r.emit(res)
	}()
	if r.Lock != nil {
		release, ok, err := r.Lock(issue)
		if err != nil {
			res.Status, res.Error = StatusFailed, err.Error()
			return res
		}
		if !ok {
			res.Error = fmt.Sprintf("issue %d is being run by another workflow run", issue)
			return res
		}
		defer release()
	}
	w := r.Workflow
	var payload map[string]any
	for {
		labels, err := r.Issues.Labels(ctx, issue)
		if err != nil {
			res.Status, res.Error = StatusFailed, err.Error()
			return res
		}
		ph, ok := w.resolve(labels)
		if !ok {
			res.FinalPhase, res.Status = unknownPhase, StatusBlocked
			res.Error = w.noPhaseError(labels)
			r.emit(event.WorkflowPhaseEvent{Issue: issue, Labels: labels, Phase: unknownPhase})
			return res
		}
		res.FinalPhase = ph.ID
		r.emit(event.WorkflowPhaseEvent{Issue: issue, Labels: labels, Phase: ph.ID, Type: ph.Type})
		switch ph.Type {
		case Terminal:
			res.Status = StatusCompleted
			return res
		case Blocking:
			res.Status = StatusBlocked
			return res
		}
		a := w.Agents[ph.Agent]
		if n := w.Rules.MaxConsecutivePhases; n > 0 && len(res.History) >= n {
			tail := res.History[len(res.History)-n:]
			if !slices.ContainsFunc(tail, func(t event.WorkflowTransition) bool { return t.To != tail[len(tail)-1].To }) {
				res.Status = StatusPhaseRepetition
				res.Error = fmt.Sprintf("the last %d moves all went to phase %s (rules.maxConsecutivePhases)", n, tail[0].To)
				return res
			}
		}
		if len(res.History) >= w.Rules.MaxCycles {
			res.Status = StatusCycleExceeded
			res.Error = fmt.Sprintf("%d moves made (rules.maxCycles %d)", len(res.History), w.Rules.MaxCycles)
			return res
		}
		if r.DryRun {
			p := r.plan(issue, ph, a, labels)
			r.emit(p)
			res.Status, res.Plan = StatusDryRun, &p
			return res
		}
		params := map[string]string{}
		for k, v := range payload {
			params[k] = valueText(v)
		}
		params["issue"] = fmt.Sprint(issue)
		r.emit(event.WorkflowDispatchEvent{Issue: issue, Phase: ph.ID, Agent: a.ID, Directory: a.Directory, Params: params})
		out, err := r.Dispatch.Dispatch(ctx, Dispatch{Agent: a, Issue: issue, Params: params})
		if err != nil {
			res.Status, res.Error = StatusFailed, fmt.Sprintf("dispatching agent %s: %v", a.ID, err)
			r.emit(event.WorkflowOutcomeEvent{Issue: issue, Agent: a.ID, Error: &res.Error})
			return res
		}
		outcome, oerr := a.OutcomeOf(out)
		oerrText := errText(oerr)
		r.emit(event.WorkflowOutcomeEvent{Issue: issue, Agent: a.ID, Outcome: &outcome, Run: &out, Error: &oerrText})
		if oerr != nil {
			res.Status, res.Error = StatusFailed, oerr.Error()
			return res
		}
		if r.Handoffs != nil {
			p, err := r.Handoffs.Emit(ctx, issue, a.ID, outcome, out.Handoff)
			if err != nil {
				res.Status, res.Error = StatusFailed, err.Error()
				return res
			}
			if p != nil {
				payload = p
			}
		}
		target, err := a.Target(outcome)
		if err != nil {
			res.Status, res.Error = StatusFailed, err.Error()
			return res
		}
		remove, add := w.labelChanges(labels, target)
		r.emit(event.WorkflowTransitionEvent{Issue: issue, From: ph.ID, To: target, Agent: a.ID, Outcome: outcome, Remove: remove, Add: add})
		tph := w.Phases[target]
		closeIt := tph.Type == Terminal && a.CloseOnComplete && (!a.HasCondition || a.CloseCondition == outcome)
		cycle := len(res.History) + 1
		if err := r.apply(ctx, issue, cycle, ph.ID, target, a.ID, outcome, remove, add, out.Handoff, closeIt); err != nil {
			res.Status, res.FinalPhase, res.Error = StatusBlocked, ph.ID, err.Error()
			return res
		}
		res.Closed = res.Closed || closeIt
		res.History = append(res.History, event.WorkflowTransition{From: ph.ID, To: target, Agent: a.ID, Outcome: outcome, RunID: out.RunID})
		res.FinalPhase = target
		switch tph.Type {
		case Terminal:
			res.Status = StatusCompleted
			return res
		case Blocking:
			res.Status = StatusBlocked
			return res
		}
		if err := r.sleep(ctx, w.Rules.CycleDelayMs); err != nil {
			res.Status, res.Error = StatusFailed, err.Error()
			return res
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// PlanText is a dry run's plan in words, one line per outcome.
func PlanText(p event.WorkflowPlan) []string {
	out := []string{fmt.Sprintf("phase %s: would dispatch agent %s", p.Phase, p.Agent)}
	for _, m := range p.Moves {
		what := "outcome " + m.Outcome
		if m.Outcome == anyOtherOutcome {
			what = "any other outcome"
		}
		t := fmt.Sprintf("  %s → %s: remove [%s], add [%s]", what, m.To, strings.Join(m.Remove, ", "), strings.Join(m.Add, ", "))
		if m.Template != "" {
			t += ", comment " + m.Template
		}
		if m.Close {
			t += ", close the issue"
		}
		out = append(out, t)
	}
	return out
}

func (r *Runner) plan(issue int, ph *Phase, a *Agent, labels []string) event.WorkflowPlan {
	p := event.WorkflowPlan{Issue: issue, Phase: ph.ID, Agent: a.ID, Labels: labels}
	outcomes := map[string]string{}
	for phase, os := range targets(a) {
		for _, o := range os {
			outcomes[o] = phase
		}
	}
	if a.Role == Transformer {
		if _, ok := outcomes["failed"]; !ok && a.FallbackPhase != "" {
			outcomes["failed"] = a.FallbackPhase
		}
	}
	keys := make([]string, 0, len(outcomes))
	for k := range outcomes {
		keys = append(keys, k)
	}
	// The named outcomes in order, then the fallback for all the others.
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == anyOtherOutcome) != (keys[j] == anyOtherOutcome) {
			return keys[j] == anyOtherOutcome
		}
		return keys[i] < keys[j]
	})
	for _, o := range keys {
		to := outcomes[o]
		rm, add := r.Workflow.labelChanges(labels, to)
		key, _ := r.Workflow.Template(a.ID, o)
		tph := r.Workflow.Phases[to]
		p.Moves = append(p.Moves, event.WorkflowPlanMove{Outcome: o, To: to, Remove: rm, Add: add, Template: key,
			Close: tph != nil && tph.Type == Terminal && a.CloseOnComplete && (!a.HasCondition || a.CloseCondition == o)})
	}
	return p
}

// compensation undoes one applied step of a move.
type compensation struct {
	label string
	run   func(ctx context.Context) error
}

// apply changes the issue for one move as a unit, in climpt's order: add
// the new labels, remove the old ones, post the handoff comment, close.
// When a step fails, the steps done are undone last first (labels put
// back; a failed close leaves a marker comment asking for a human, once
// per issue and cycle) and the error is returned.
func (r *Runner) apply(ctx context.Context, issue, cycle int, from, to, agent, outcome string, remove, add []string, handoff map[string]any, closeIt bool) error {
	var undo []compensation
	at := func(name string) context.Context {
		return WithStep(ctx, Step{Issue: issue, Phase: from, Cycle: cycle, Name: name})
	}
	step := func(name string, do func(context.Context) error, comp *compensation) error {
		err := do(at(name))
		r.emit(event.WorkflowStepEvent{Issue: issue, Cycle: &cycle, Step: name, OK: err == nil, Error: errText(err)})
		if err == nil && comp != nil {
			undo = append(undo, *comp)
		}
		return err
	}
	restore := compensation{label: "restore-labels", run: func(ctx context.Context) error {
		return r.Issues.EditLabels(ctx, issue, add, remove)
	}}
	var err error
	if len(add) > 0 {
		err = step("add-labels", func(ctx context.Context) error { return r.Issues.EditLabels(ctx, issue, nil, add) },
			&compensation{label: "remove-added-labels", run: func(ctx context.Context) error { return r.Issues.EditLabels(ctx, issue, add, nil) }})
	}
	if err == nil && len(remove) > 0 {
		err = step("remove-labels", func(ctx context.Context) error { return r.Issues.EditLabels(ctx, issue, remove, nil) },
			&compensation{label: "restore-removed-labels", run: func(ctx context.Context) error { return r.Issues.EditLabels(ctx, issue, nil, remove) }})
	}
	if err == nil && r.Workflow.HandoffSection {
		// With no matching template the step does nothing, but its
		// compensation is registered all the same, as climpt does.
		key, tmpl := r.Workflow.Template(agent, outcome)
		err = step("comment", func(ctx context.Context) error {
			if key == "" {
				return nil
			}
			return r.Issues.Comment(ctx, issue, RenderTemplate(tmpl, handoff))
		}, &restore)
	}
	if err == nil && closeIt {
		marker := CompensationMarker(issue, cycle)
		undo = append(undo, compensation{label: "compensation-comment", run: func(ctx context.Context) error {
			if recent, err := r.Issues.RecentComments(ctx, issue, compensationCommentScan); err == nil {
				for _, c := range recent {
					if strings.Contains(c, marker) {
						return nil
					}
				}
			}
			body := fmt.Sprintf("capstan could not close this issue on the move from phase %s to %s; its labels were put back. Please check it by hand.\n\n<sub>%s</sub>", from, to, marker)
			return r.Issues.Comment(ctx, issue, body)
		}})
		err = step("close", func(ctx context.Context) error { return r.Issues.Close(ctx, issue) }, nil)
	}
	if err == nil {
		return nil
	}
	var errs []error
	for i := len(undo) - 1; i >= 0; i-- {
		c := undo[i]
		cerr := c.run(at(c.label))
		r.emit(event.WorkflowCompensationEvent{Issue: issue, Cycle: cycle, Compensation: c.label, OK: cerr == nil, Error: errText(cerr)})
		if cerr != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.label, cerr))
		}
	}
	e := fmt.Errorf("the move from %s to %s failed and was undone: %w", from, to, err)
	if len(errs) > 0 {
		e = fmt.Errorf("the move from %s to %s failed (%w) and undoing it failed too: %w", from, to, err, errors.Join(errs...))
	}
	return e
}
