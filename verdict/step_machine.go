package verdict

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// Step types of a step's "type".
const (
	TypeNormal  = "normal"
	TypeGateway = "gateway"
	TypeSubStep = "subStep"
)

// DefaultLoopLimit is how many times in a row one step may be entered
// before the run stops as looping (STEP_LOOP_LIMIT), when the registry sets
// no stepLoopLimit.
const DefaultLoopLimit = 10

// DefaultMaxRetries is a retry policy's maxRetries when unset.
const DefaultMaxRetries = 3

// Move kinds.
const (
	MoveNext     = "next"     // to check.onPass/onFail.next
	MoveRetry    = "retry"    // the same step again, same prompt
	MoveStay     = "stay"     // a step without check: no transition
	MoveComplete = "complete" // a completing transition: the step flow is done
	MoveFallback = "fallback" // retries exhausted, onExhausted fallback
	MoveSkip     = "skip"     // retries exhausted, onExhausted skip (took onPass)
	MoveEscalate = "escalate" // in_agent escalation: to escalateTo
	MoveResume   = "resume"   // back to the escalating step
	MoveRestart  = "restart"  // back to the entry step
	MoveAbort    = "abort"    // escalation with returnFlow abort: the run ends
	MoveSubStep  = "subStep"  // to the parent's next sub-step
)

// Options configure a Machine.
type MachineOptions struct {
	// AgentName and RunID identify the run in webhook escalations.
	AgentName string
	RunID     string
	// Emitter receives step.transition and escalation events.
	Emitter event.Emitter
	// Notifier delivers webhook escalations (default: a WebhookNotifier).
	Notifier Notifier
	// File names steps_registry.json in errors.
	File string
}

// Outcome is the result of running the current step once.
type StepOutcome struct {
	// Passed is the step check's verdict.
	Passed bool
	// Reason explains it (journaled, sent with escalations).
	Reason string
	// Iteration is the loop iteration that ran the step.
	Iteration int
}

// Machine walks the steps of steps_registry.json: it knows the current
// step, applies each step's transitions, and counts entries and retries.
type Machine struct {
	reg   *agentdir.Registry // read-only
	opts  MachineOptions
	limit int
	st    event.StepState
}

// NewMachine validates the registry's step graph and returns a machine at
// its entry step (or the entry's first sub-step). Errors are CONFIG_INVALID
// with the registry file and the pointer of the bad reference.
//
// The machine keeps reg and never changes it: machines may share one.
func NewMachine(reg *agentdir.Registry, opts MachineOptions) (*Machine, error) {
	if opts.Emitter == nil {
		opts.Emitter = event.Discard
	}
	if opts.Notifier == nil {
		opts.Notifier = &WebhookNotifier{}
	}
	if opts.File == "" {
		opts.File = agentdir.DefaultRegistryFile
	}
	m := &Machine{reg: reg, opts: opts, limit: reg.StepLoopLimit}
	if m.limit <= 0 {
		m.limit = DefaultLoopLimit
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	m.st = event.StepState{Visits: map[string]int{}}
	m.enterStep(reg.EntryStep)
	return m, nil
}

func sortedKeys[V any](mp map[string]V) []string {
	return slices.Sorted(maps.Keys(mp))
}

func (m *Machine) ids() []string {
	ids := make([]string, 0, len(m.reg.Steps))
	for id := range m.reg.Steps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Current returns the current step's id and definition.
func (m *Machine) Current() (string, agentdir.Step) {
	return m.st.Current, m.reg.Steps[m.st.Current]
}

// Parent returns the parent step whose sub-steps are running, or "".
func (m *Machine) Parent() string {
	if m.st.Parent == nil {
		return ""
	}
	return m.st.Parent.Step
}

// IsGateway reports whether the current step is a gateway (routed without
// a model call, see RouteGateways).
func (m *Machine) IsGateway() bool {
	return m.reg.Steps[m.st.Current].Type == TypeGateway && !m.IsTerminal()
}

// IsTerminal reports whether the step flow has ended: completed or aborted.
func (m *Machine) IsTerminal() bool { return m.st.Completed || m.st.Aborted }

// Completed reports whether a completing transition was taken.
func (m *Machine) Completed() bool { return m.st.Completed }

// Aborted reports whether an escalation aborted the run.
func (m *Machine) Aborted() bool { return m.st.Aborted }

// AbortError is the error a loop ends the run with after an escalation
// aborted it (Aborted() is true): STEP_ABORTED, not recoverable.
func (m *Machine) AbortError() error {
	return agenterr.New(agenterr.CodeStepAborted, agenterr.LayerStep, false,
		"escalation at step %q ended the run (returnFlow abort)", m.st.Current)
}

// Visits returns how many times each step was entered (a copy).
func (m *Machine) Visits() map[string]int { return maps.Clone(m.st.Visits) }

// Snapshot returns a copy of the machine's state.
func (m *Machine) Snapshot() event.StepState {
	s := m.st
	s.Visits = maps.Clone(m.st.Visits)
	if s.Parent != nil {
		p := *s.Parent
		s.Parent = &p
	}
	if s.Return != nil {
		r := *s.Return
		s.Return = &r
	}
	if s.Outputs != nil {
		// The inner maps are never changed in place (record replaces them).
		s.Outputs = maps.Clone(s.Outputs)
	}
	return s
}

// Fork makes f a tentative copy of the machine whose transitions report
// to em instead of the machine's own emitter, and returns f (a new machine
// when f is nil; a caller that forks every iteration passes the same f
// again, so forking allocates nothing but the copied state). The verdict
// of an iteration evaluates the step check on a fork and, once it decided
// that the iteration stands, makes the fork's state the machine's with
// Commit; a fork that is dropped leaves the machine untouched, so nothing
// is ever rolled back. em nil drops the fork's events.
func (m *Machine) Fork(f *Machine, em event.Emitter) *Machine {
	if em == nil {
		em = event.Discard
	}
	if f == nil {
		f = &Machine{}
	}
	*f = *m
	f.opts.Emitter = em
	f.st = m.Snapshot()
	return f
}

// Commit makes the state of f, a Fork of m, the state of m.
func (m *Machine) Commit(f *Machine) {
	m.st = f.st
}

// Restore replaces the machine's state with s (from Snapshot, possibly
// through JSON). Steps s names must exist in the registry.
func (m *Machine) Restore(s event.StepState) error {
	check := func(what, id string) error {
		if _, ok := m.reg.Steps[id]; !ok {
			return agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerStep, false,
				"restored step state names unknown %s %q (the registry changed since the snapshot)", what, id)
		}
		return nil
	}
	if err := check("current step", s.Current); err != nil {
		return err
	}
	if s.Parent != nil {
		if err := check("parent step", s.Parent.Step); err != nil {
			return err
		}
		if n := len(m.reg.Steps[s.Parent.Step].SubSteps); s.Parent.Index < 0 || s.Parent.Index >= n {
			return agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerStep, false,
				"restored sub-step index %d out of range for %q", s.Parent.Index, s.Parent.Step)
		}
	}
	if s.Return != nil {
		if err := check("escalating step", s.Return.From); err != nil {
			return err
		}
	}
	m.st = s
	m.st.Visits = maps.Clone(s.Visits)
	if m.st.Visits == nil {
		m.st.Visits = map[string]int{}
	}
	return nil
}

// enterStep makes id current, descending into its first sub-step when it
// has sub-steps. It counts visits and consecutive runs.
func (m *Machine) enterStep(id string) {
	if id == m.st.LastEntered {
		m.st.Consecutive++
	} else {
		m.st.Consecutive = 1
	}
	m.st.LastEntered = id
	m.st.Current = id
	m.st.Retries = 0
	m.st.Visits[id]++
	m.st.Parent = nil
	if subs := m.reg.Steps[id].SubSteps; len(subs) > 0 {
		m.st.Parent = &event.ParentState{Step: id}
		m.st.Current = subs[0]
		m.st.Visits[subs[0]]++
	}
}

// Transition applies the outcome of running the current step once and
// returns the move taken:
//   - a check's onPass/onFail with "complete" completes the step flow;
//     with "next" goes there (loops A→B→A are allowed and counted);
//     with "retry" runs the same step again with the same prompt, under its
//     retry policy (maxRetries default 3; when used up, onExhausted error →
//     STEP_RETRY_EXHAUSTED, fallback → fallbackStep, skip → onPass);
//     with "escalate" runs the step's escalation.
//   - a step without check stays (the agent's completion handler decides).
//   - entering the same step back to back more than stepLoopLimit times
//     (retries excluded) is the LoopError STEP_LOOP_LIMIT.
//   - a sub-step that passes moves to the next sub-step; when all passed
//     the parent passes, when one fails the parent fails, and the parent's
//     check transitions apply.
func (m *Machine) Transition(ctx context.Context, o StepOutcome) (event.StepMove, error) {
	if m.st.Aborted {
		return event.StepMove{}, m.AbortError()
	}
	if m.st.Completed {
		return event.StepMove{}, agenterr.New(agenterr.CodeStepFlowEnded, agenterr.LayerStep, false,
			"step flow already completed at %q", m.st.Current)
	}
	from := m.st.Current
	mv, err := m.transition(ctx, o)
	if err != nil {
		return event.StepMove{}, err
	}
	mv.From, mv.Passed, mv.Reason = from, o.Passed, o.Reason
	if mv.To == "" {
		mv.To = m.st.Current
	}
	m.opts.Emitter.Emit(mv)
	return mv, nil
}

func (m *Machine) transition(ctx context.Context, o StepOutcome) (event.StepMove, error) {
	cur := m.st.Current
	step := m.reg.Steps[cur]
	if p := m.st.Parent; p != nil {
		parent := m.reg.Steps[p.Step]
		t, has := pick(step, o.Passed)
		if has && t.Retry {
			mv, handled, err := m.retry(cur, step)
			if err != nil || handled {
				return mv, err
			}
			// skip: the sub-step counts as passed
			o.Passed = true
		}
		if o.Passed {
			if p.Index+1 < len(parent.SubSteps) {
				p.Index++
				m.st.Current = parent.SubSteps[p.Index]
				m.st.Retries = 0
				m.st.Visits[m.st.Current]++
				return event.StepMove{Kind: MoveSubStep}, nil
			}
		}
		// The parent passes (all sub-steps passed) or fails (this one failed).
		m.st.Parent = nil
		m.st.Current = p.Step
		m.st.Retries = p.Retries
		mv, err := m.resolve(ctx, p.Step, parent, o)
		if err == nil && !m.IsTerminal() && m.st.Current == p.Step && m.st.Parent == nil {
			// The parent stays or retries: it runs its sub-steps again.
			m.st.Parent = &event.ParentState{Step: p.Step, Retries: m.st.Retries}
			m.st.Retries = 0
			m.st.Current = parent.SubSteps[0]
			m.st.Visits[m.st.Current]++
			mv.To = m.st.Current
		}
		return mv, err
	}
	return m.resolve(ctx, cur, step, o)
}

// pick returns the transition of step's check for passed.
func pick(s agentdir.Step, passed bool) (agentdir.Transition, bool) {
	if s.Check == nil {
		return agentdir.Transition{}, false
	}
	if passed {
		return s.Check.OnPass, true
	}
	return s.Check.OnFail, true
}

func (m *Machine) resolve(ctx context.Context, id string, s agentdir.Step, o StepOutcome) (event.StepMove, error) {
	t, has := pick(s, o.Passed)
	if !has {
		if len(s.SubSteps) > 0 {
			// A parent without check runs its sub-steps again.
			if err := m.enter(id); err != nil {
				return event.StepMove{}, err
			}
		}
		return event.StepMove{Kind: MoveStay}, nil
	}
	if t.Retry {
		mv, handled, err := m.retry(id, s)
		if err != nil || handled {
			return mv, err
		}
		// onExhausted skip: take onPass.
		t = s.Check.OnPass
		if t.Retry {
			return event.StepMove{}, m.bad("/steps/"+id+"/check/onPass", "onExhausted skip takes onPass, which must not retry",
				"step %q: retries exhausted, skip would retry again", id)
		}
		mv, err = m.follow(ctx, id, s, t, o)
		if mv.Kind == MoveNext {
			mv.Kind = MoveSkip
		}
		return mv, err
	}
	return m.follow(ctx, id, s, t, o)
}

// follow takes a non-retry transition t out of step id.
func (m *Machine) follow(ctx context.Context, id string, s agentdir.Step, t agentdir.Transition, o StepOutcome) (event.StepMove, error) {
	if t.Complete {
		m.st.Completed = true
		m.st.Return = nil
		return event.StepMove{Kind: MoveComplete, Complete: true}, nil
	}
	if r := m.st.Return; r != nil && r.Target == id && !t.Escalate {
		// The in_agent escalation step has run: apply its return flow.
		m.st.Return = nil
		return m.applyReturn(r.Flow, r.From)
	}
	if t.Escalate {
		return m.escalate(ctx, id, s, o)
	}
	if t.Next != "" {
		if err := m.enter(t.Next); err != nil {
			return event.StepMove{}, err
		}
		return event.StepMove{Kind: MoveNext}, nil
	}
	return event.StepMove{Kind: MoveStay}, nil
}

// enter moves to id through a transition, enforcing STEP_LOOP_LIMIT.
func (m *Machine) enter(id string) error {
	if _, ok := m.reg.Steps[id]; !ok {
		return m.bad("/steps", "name an existing step", "transition to unknown step %q", id)
	}
	if id == m.st.LastEntered && m.st.Consecutive+1 > m.limit {
		return agenterr.New(agenterr.CodeStepLoopLimit, agenterr.LayerLoop, false,
			"step %q ran %d times in a row (stepLoopLimit %d)", id, m.st.Consecutive, m.limit)
	}
	m.enterStep(id)
	return nil
}

// retry handles a retry transition. handled is false only when retries are
// exhausted and onExhausted is skip (the caller takes onPass).
func (m *Machine) retry(id string, s agentdir.Step) (mv event.StepMove, handled bool, err error) {
	max := DefaultMaxRetries
	onExhausted, fallback := "error", ""
	if r := s.Retry; r != nil {
		if r.MaxRetries != nil {
			max = *r.MaxRetries
		}
		if r.OnExhausted != "" {
			onExhausted = r.OnExhausted
		}
		fallback = r.FallbackStep
	}
	if m.st.Retries < max {
		m.st.Retries++
		return event.StepMove{Kind: MoveRetry, To: id}, true, nil
	}
	switch onExhausted {
	case "fallback":
		m.st.Parent = nil
		if err := m.enter(fallback); err != nil {
			return event.StepMove{}, true, err
		}
		return event.StepMove{Kind: MoveFallback}, true, nil
	case "skip":
		m.st.Retries = 0
		return event.StepMove{}, false, nil
	default:
		return event.StepMove{}, true, &agenterr.Error{Code: agenterr.CodeStepRetryExhausted, Layer: agenterr.LayerStep,
			Message: fmt.Sprintf("step %q still fails after %d retries", id, max),
			Hint:    "raise retry.maxRetries or set retry.onExhausted to fallback or skip"}
	}
}

func (m *Machine) applyReturn(flow, from string) (event.StepMove, error) {
	switch flow {
	case "abort":
		m.st.Aborted = true
		return event.StepMove{Kind: MoveAbort, Aborted: true}, nil
	case "restart":
		if err := m.enter(m.reg.EntryStep); err != nil {
			return event.StepMove{}, err
		}
		return event.StepMove{Kind: MoveRestart}, nil
	default: // resume
		if err := m.enter(from); err != nil {
			return event.StepMove{}, err
		}
		return event.StepMove{Kind: MoveResume}, nil
	}
}

func (m *Machine) escalate(ctx context.Context, id string, s agentdir.Step, o StepOutcome) (event.StepMove, error) {
	e := s.Escalation
	method, flow := e.NotificationMethod, e.ReturnFlow
	if method == "" {
		method = "in_agent"
	}
	if flow == "" {
		flow = "resume"
	}
	m.opts.Emitter.Emit(event.EscalationEvent{Step: id, EscalateTo: e.EscalateTo, Method: method,
		ReturnFlow: flow, Reason: o.Reason, Iteration: o.Iteration})
	switch method {
	case "in_agent":
		m.st.Return = &event.ReturnState{Flow: flow, From: id, Target: e.EscalateTo}
		if err := m.enter(e.EscalateTo); err != nil {
			return event.StepMove{}, err
		}
		return event.StepMove{Kind: MoveEscalate}, nil
	case "webhook":
		n := Notification{Agent: m.opts.AgentName, RunID: m.opts.RunID, Step: id, EscalateTo: e.EscalateTo,
			Reason: o.Reason, Iteration: o.Iteration}
		if err := m.opts.Notifier.Notify(ctx, *e, n); err != nil {
			return event.StepMove{}, err
		}
	}
	// webhook and log: the notification is out; continue per returnFlow.
	return m.applyReturn(flow, id)
}
