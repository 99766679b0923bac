package verdict

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"

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

// StepMove is defined with the run's events, which carry it.
type StepMove = event.StepMove

// State is the machine's full state; Snapshot and Restore move it in and
// out (for resume). It marshals to JSON.
type StepState struct {
	Current string         `json:"current"`
	Visits  map[string]int `json:"visits"`
	// LastEntered is the step last entered through a transition (the
	// parent, while sub-steps run); Consecutive counts how many times in a
	// row it was entered (retries and sub-step moves excluded).
	LastEntered string `json:"lastEntered"`
	Consecutive int    `json:"consecutive"`
	Retries     int    `json:"retries"`
	Completed   bool   `json:"completed,omitempty"`
	Aborted     bool   `json:"aborted,omitempty"`
	// Parent is set while the sub-steps of a parent step run.
	Parent *ParentState `json:"parent,omitempty"`
	// Return is set while an in_agent escalation's target step runs.
	Return *ReturnState `json:"return,omitempty"`
	// Outputs are, per step routed by intent, the top-level values of its
	// last structured output and its handoff values (step inputs read
	// them).
	Outputs map[string]map[string]any `json:"outputs,omitempty"`
}

// ParentState tracks a parent step's sub-steps.
type ParentState struct {
	Step  string `json:"step"`
	Index int    `json:"index"`
	// Retries counts the parent's own retries (re-runs of all sub-steps).
	Retries int `json:"retries,omitempty"`
}

// ReturnState says where an in_agent escalation goes afterwards.
type ReturnState struct {
	Flow   string `json:"flow"`   // resume | abort | restart
	From   string `json:"from"`   // the escalating step
	Target string `json:"target"` // the escalation step
}

// Machine walks the steps of steps_registry.json: it knows the current
// step, applies each step's transitions, and counts entries and retries.
type Machine struct {
	reg   *agentdir.Registry // read-only
	opts  MachineOptions
	limit int
	st    StepState
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
	m.st = StepState{Visits: map[string]int{}}
	m.enterStep(reg.EntryStep)
	return m, nil
}

// validate checks the registry's step graph — every reference names a
// step of the right kind, every policy can be followed — and reports every
// broken rule at once (errors.Join): an *agentdir.RuleError with the rule's
// problem code where agentdir.Codes has one, CONFIG_INVALID otherwise, each
// with the registry file, the JSON pointer and a hint. `capstan validate`
// reports them through the agent layer's build check.
func (m *Machine) validate() error {
	var errs []error
	rule := func(code, ptr, hint, format string, args ...any) {
		errs = append(errs, agentdir.Rule(code, m.opts.File, ptr, hint, format, args...))
	}
	bad := func(ptr, hint, format string, args ...any) {
		errs = append(errs, &agenterr.Error{Code: agenterr.CodeConfigurationValidation, Layer: agenterr.LayerConfiguration,
			Message: fmt.Sprintf(format, args...), File: m.opts.File, Pointer: ptr, Hint: hint})
	}
	if len(m.reg.Steps) == 0 {
		bad("/steps", "declare at least one step", "the registry has no steps")
		return errors.Join(errs...)
	}
	stepHint := "use one of the step ids (known: " + strings.Join(m.ids(), ", ") + ")"
	exists := func(id string) bool { _, ok := m.reg.Steps[id]; return ok }
	if !exists(m.reg.EntryStep) {
		rule("SR-ENTRY-STEP", "/entryStep", "set entryStep to one of the step ids (known: "+strings.Join(m.ids(), ", ")+")",
			"entryStep %q is not a step", m.reg.EntryStep)
	} else if m.reg.Steps[m.reg.EntryStep].Type == TypeSubStep {
		bad("/entryStep", "start at a normal or gateway step", "entryStep %q is a subStep", m.reg.EntryStep)
	}
	parents := map[string]string{}
	for _, id := range m.ids() {
		s := m.reg.Steps[id]
		p := agentdir.JoinPointer("steps", id)
		switch s.Type {
		case "", TypeNormal, TypeSubStep:
		case TypeGateway:
			if s.Check == nil {
				rule("SR-GATEWAY-CHECK", p, "add a check whose onPass/onFail route to the next steps",
					"gateway step %q has no check; a gateway makes no model call and routes only by its check", id)
			}
		default:
			bad(p+"/type", `use "normal", "gateway" or "subStep"`, "step %q has unknown type %q", id, s.Type)
		}
		if c := s.Check; c != nil {
			for _, tr := range []struct {
				key string
				t   agentdir.Transition
			}{{"onPass", c.OnPass}, {"onFail", c.OnFail}} {
				tp := p + "/check/" + tr.key
				if tr.t.Next != "" && !exists(tr.t.Next) {
					rule("SR-TRANSITION-TARGET", tp+"/next", stepHint, "%s.next %q is not a step", tr.key, tr.t.Next)
				}
				if tr.t.Escalate && s.Escalation == nil {
					rule("SR-TRANSITION-ESCALATE", tp+"/escalate", "add an escalation section to the step",
						"%s escalates but step %q has no escalation", tr.key, id)
				}
				if tr.t.Retry && s.Type == TypeGateway {
					bad(tp+"/retry", "a gateway makes no model call to retry", "gateway %q cannot retry", id)
				}
			}
		}
		if r := s.Retry; r != nil {
			switch r.OnExhausted {
			case "", "error", "skip":
			case "fallback":
				if r.FallbackStep == "" {
					rule("SR-RETRY-FALLBACK", p+"/retry/fallbackStep", "set fallbackStep to the step to run when retries are exhausted",
						"onExhausted is fallback but fallbackStep is not set")
				} else if !exists(r.FallbackStep) {
					rule("SR-RETRY-FALLBACK-TARGET", p+"/retry/fallbackStep", stepHint, "fallbackStep %q is not a step", r.FallbackStep)
				}
			default:
				bad(p+"/retry/onExhausted", `use "error", "fallback" or "skip"`, "unknown onExhausted %q", r.OnExhausted)
			}
			if r.OnExhausted == "skip" && s.Check != nil && s.Check.OnPass.Retry {
				bad(p+"/check/onPass/retry", "onExhausted skip takes onPass, which must not retry; route onPass elsewhere or use another onExhausted",
					"step %q skips to onPass when retries run out, but onPass retries", id)
			}
			if r.MaxRetries != nil && *r.MaxRetries < 0 {
				bad(p+"/retry/maxRetries", "use 0 or more", "maxRetries is negative")
			}
		}
		if e := s.Escalation; e != nil {
			ep := p + "/escalation"
			switch e.NotificationMethod {
			case "", "in_agent":
				if !exists(e.EscalateTo) {
					rule("SR-ESCALATE-TARGET", ep+"/escalateTo", stepHint,
						"escalateTo %q is not a step (notificationMethod in_agent jumps to a step)", e.EscalateTo)
				}
			case "webhook":
				if u, err := url.Parse(e.WebhookURL); e.WebhookURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					rule("SR-ESCALATE-WEBHOOK", ep+"/webhookUrl", "set webhookUrl to an absolute http(s) URL",
						"notificationMethod webhook needs an http(s) webhookUrl, got %q", e.WebhookURL)
				}
			case "log":
			default:
				bad(ep+"/notificationMethod", `use "in_agent", "webhook" or "log"`, "unknown notificationMethod %q", e.NotificationMethod)
			}
			switch e.ReturnFlow {
			case "", "resume", "abort", "restart":
			default:
				bad(ep+"/returnFlow", `use "resume", "abort" or "restart"`, "unknown returnFlow %q", e.ReturnFlow)
			}
		}
		for i, sub := range s.SubSteps {
			sp := fmt.Sprintf("%s/subSteps/%d", p, i)
			switch {
			case !exists(sub):
				rule("SR-SUBSTEP-MISSING", sp, stepHint, "sub-step %q is not a step", sub)
			case m.reg.Steps[sub].Type != TypeSubStep:
				bad(sp, `set "type": "subStep" on it`, "sub-step %q of %q is not of type subStep", sub, id)
			case len(m.reg.Steps[sub].SubSteps) > 0:
				bad(sp, "sub-steps do not nest", "sub-step %q has sub-steps of its own", sub)
			}
			if other, dup := parents[sub]; dup {
				bad(sp, "give each sub-step one parent", "sub-step %q belongs to %q and %q", sub, other, id)
			} else {
				parents[sub] = id
			}
		}
		if s.StructuredGate != nil {
			if s.Check != nil {
				bad(p+"/check", "route the step either by its check or by its structuredGate, not both",
					"step %q has both a check and a structuredGate", id)
			}
			if s.Type == TypeGateway || s.Type == TypeSubStep {
				bad(p+"/structuredGate", "a step routed by intent runs its own prompt; make it a normal step",
					"%s step %q cannot route by a structuredGate", s.Type, id)
			}
			for _, intent := range sortedKeys(s.Transitions) {
				for _, t := range s.Transitions[intent].Steps() {
					if !exists(t) {
						rule("SR-TRANSITION-TARGET", p+"/transitions/"+intent, stepHint, "transitions.%s: %q is not a step", intent, t)
					}
				}
			}
		}
		if s.Sequential != nil && !*s.Sequential {
			rule("SR-SUBSTEP-PARALLEL", p+"/sequential", "remove sequential or set it to true; run parallel work as separate agents",
				"parallel sub-steps are out of scope; sub-steps always run in order")
		}
	}
	return errors.Join(errs...)
}

// bad is a CONFIG_INVALID error of the registry at ptr, for what the run
// finds that validate cannot (a transition to a step restored from an
// older journal).
func (m *Machine) bad(ptr, hint, format string, args ...any) error {
	return &agenterr.Error{Code: agenterr.CodeConfigurationValidation, Layer: agenterr.LayerConfiguration,
		Message: fmt.Sprintf(format, args...), File: m.opts.File, Pointer: ptr, Hint: hint}
}

func sortedKeys[V any](mp map[string]V) []string {
	return slices.Sorted(maps.Keys(mp))
}

// intentReason describes an interpretation for the journal.
func intentReason(in IntentInterpretation) string {
	r := "intent " + in.Intent
	if in.Fallback {
		r += " (fallback: " + in.Reason + ")"
	} else if in.Reason != "" {
		r += ": " + in.Reason
	}
	return r
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
func (m *Machine) Snapshot() StepState {
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
func (m *Machine) Restore(s StepState) error {
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
		m.st.Parent = &ParentState{Step: id}
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
func (m *Machine) Transition(ctx context.Context, o StepOutcome) (StepMove, error) {
	if m.st.Aborted {
		return StepMove{}, m.AbortError()
	}
	if m.st.Completed {
		return StepMove{}, agenterr.New(agenterr.CodeStepFlowEnded, agenterr.LayerStep, false,
			"step flow already completed at %q", m.st.Current)
	}
	from := m.st.Current
	mv, err := m.transition(ctx, o)
	if err != nil {
		return StepMove{}, err
	}
	mv.From, mv.Passed, mv.Reason = from, o.Passed, o.Reason
	if mv.To == "" {
		mv.To = m.st.Current
	}
	m.opts.Emitter.Emit(mv)
	return mv, nil
}

func (m *Machine) transition(ctx context.Context, o StepOutcome) (StepMove, error) {
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
				return StepMove{Kind: MoveSubStep}, nil
			}
		}
		// The parent passes (all sub-steps passed) or fails (this one failed).
		m.st.Parent = nil
		m.st.Current = p.Step
		m.st.Retries = p.Retries
		mv, err := m.resolve(ctx, p.Step, parent, o)
		if err == nil && !m.IsTerminal() && m.st.Current == p.Step && m.st.Parent == nil {
			// The parent stays or retries: it runs its sub-steps again.
			m.st.Parent = &ParentState{Step: p.Step, Retries: m.st.Retries}
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

func (m *Machine) resolve(ctx context.Context, id string, s agentdir.Step, o StepOutcome) (StepMove, error) {
	t, has := pick(s, o.Passed)
	if !has {
		if len(s.SubSteps) > 0 {
			// A parent without check runs its sub-steps again.
			if err := m.enter(id); err != nil {
				return StepMove{}, err
			}
		}
		return StepMove{Kind: MoveStay}, nil
	}
	if t.Retry {
		mv, handled, err := m.retry(id, s)
		if err != nil || handled {
			return mv, err
		}
		// onExhausted skip: take onPass.
		t = s.Check.OnPass
		if t.Retry {
			return StepMove{}, m.bad("/steps/"+id+"/check/onPass", "onExhausted skip takes onPass, which must not retry",
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
func (m *Machine) follow(ctx context.Context, id string, s agentdir.Step, t agentdir.Transition, o StepOutcome) (StepMove, error) {
	if t.Complete {
		m.st.Completed = true
		m.st.Return = nil
		return StepMove{Kind: MoveComplete, Complete: true}, nil
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
			return StepMove{}, err
		}
		return StepMove{Kind: MoveNext}, nil
	}
	return StepMove{Kind: MoveStay}, nil
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
func (m *Machine) retry(id string, s agentdir.Step) (mv StepMove, handled bool, err error) {
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
		return StepMove{Kind: MoveRetry, To: id}, true, nil
	}
	switch onExhausted {
	case "fallback":
		m.st.Parent = nil
		if err := m.enter(fallback); err != nil {
			return StepMove{}, true, err
		}
		return StepMove{Kind: MoveFallback}, true, nil
	case "skip":
		m.st.Retries = 0
		return StepMove{}, false, nil
	default:
		return StepMove{}, true, &agenterr.Error{Code: agenterr.CodeStepRetryExhausted, Layer: agenterr.LayerStep,
			Message: fmt.Sprintf("step %q still fails after %d retries", id, max),
			Hint:    "raise retry.maxRetries or set retry.onExhausted to fallback or skip"}
	}
}

func (m *Machine) applyReturn(flow, from string) (StepMove, error) {
	switch flow {
	case "abort":
		m.st.Aborted = true
		return StepMove{Kind: MoveAbort, Aborted: true}, nil
	case "restart":
		if err := m.enter(m.reg.EntryStep); err != nil {
			return StepMove{}, err
		}
		return StepMove{Kind: MoveRestart}, nil
	default: // resume
		if err := m.enter(from); err != nil {
			return StepMove{}, err
		}
		return StepMove{Kind: MoveResume}, nil
	}
}

func (m *Machine) escalate(ctx context.Context, id string, s agentdir.Step, o StepOutcome) (StepMove, error) {
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
		m.st.Return = &ReturnState{Flow: flow, From: id, Target: e.EscalateTo}
		if err := m.enter(e.EscalateTo); err != nil {
			return StepMove{}, err
		}
		return StepMove{Kind: MoveEscalate}, nil
	case "webhook":
		n := Notification{Agent: m.opts.AgentName, RunID: m.opts.RunID, Step: id, EscalateTo: e.EscalateTo,
			Reason: o.Reason, Iteration: o.Iteration}
		if err := m.opts.Notifier.Notify(ctx, *e, n); err != nil {
			return StepMove{}, err
		}
	}
	// webhook and log: the notification is out; continue per returnFlow.
	return m.applyReturn(flow, id)
}

// StepEvaluation is the result of Evaluate: the step check and the
// transitions it caused (the step's own, then any gateway hops), in that
// order.
type StepEvaluation struct {
	Check CheckResult `json:"check"`
	Moves []StepMove  `json:"moves"`
	// Intent is what the step's structuredGate read (routed steps only).
	Intent *IntentInterpretation `json:"intent,omitempty"`
}

// StepComplete reports whether any move completed the step flow.
func (e StepEvaluation) StepComplete() bool {
	for _, mv := range e.Moves {
		if mv.Complete {
			return true
		}
	}
	return false
}

// Evaluate is the step half of a verdict (Stage.Decide) after an iteration
// ran the current step: the step check (step keywords, which decide the
// transition), then the transition and any gateways it leads to. The
// agent's completion handler (completion keywords, which decide the run)
// runs after it in Stage.Decide, told whether the moves completed the
// flow; both read the same response independently, so a keyword present
// in both makes both react. A step with a structuredGate is routed by the
// intent of its structured answer instead of a check (see route).
func (m *Machine) Evaluate(ctx context.Context, checker *Checker, in CheckInput, o StepOutcome) (StepEvaluation, error) {
	var ev StepEvaluation
	id, s := m.Current()
	if s.StructuredGate != nil && !m.IsTerminal() {
		return m.evaluateRouted(id, s, in)
	}
	if s.Check != nil {
		r, err := checker.Check(ctx, s.Check, in)
		if err != nil {
			return ev, err
		}
		ev.Check = r
	} else {
		ev.Check = CheckResult{Passed: true, Reason: "step has no check"}
	}
	o.Passed = ev.Check.Passed
	if o.Reason == "" {
		o.Reason = ev.Check.Reason
	}
	mv, err := m.Transition(ctx, o)
	if err != nil {
		return ev, err
	}
	ev.Moves = append(ev.Moves, mv)
	hops, err := m.RouteGateways(ctx, checker, in, o.Iteration)
	ev.Moves = append(ev.Moves, hops...)
	return ev, err
}

// evaluateRouted is Evaluate for a step routed by its structuredGate: the
// intent read from the structured output (never the text) takes the
// transition; the step's answer is recorded for later steps' inputs.
func (m *Machine) evaluateRouted(id string, s agentdir.Step, in CheckInput) (StepEvaluation, error) {
	var ev StepEvaluation
	it, err := InterpretIntent(id, s.StructuredGate, in.Structured)
	if err != nil {
		return ev, err
	}
	ev.Intent = &it
	ev.Check = CheckResult{Type: "intent", Passed: it.Intent != agentdir.IntentAbort && !it.Fallback, Reason: intentReason(it)}
	m.record(id, in.Structured, it.Handoff)
	mv, err := m.route(id, s, it)
	if err != nil {
		return ev, err
	}
	mv.From, mv.Passed, mv.Reason = id, ev.Check.Passed, ev.Check.Reason
	if mv.To == "" {
		mv.To = m.st.Current
	}
	m.opts.Emitter.Emit(mv)
	ev.Moves = append(ev.Moves, mv)
	return ev, nil
}

// RouteGateways routes through gateway steps without model calls: while
// the current step is a gateway, its check is evaluated on in (the
// previous iteration's response and actions) and its transition taken.
// More hops than there are steps means gateways route in a cycle, which is
// STEP_LOOP_LIMIT.
func (m *Machine) RouteGateways(ctx context.Context, checker *Checker, in CheckInput, iteration int) ([]StepMove, error) {
	var moves []StepMove
	for hops := 0; m.IsGateway(); hops++ {
		if hops > len(m.reg.Steps) {
			return moves, agenterr.New(agenterr.CodeStepLoopLimit, agenterr.LayerLoop, false,
				"gateways route in a cycle (at %q after %d hops)", m.st.Current, hops)
		}
		_, s := m.Current()
		r, err := checker.Check(ctx, s.Check, in)
		if err != nil {
			return moves, err
		}
		mv, err := m.Transition(ctx, StepOutcome{Passed: r.Passed, Reason: r.Reason, Iteration: iteration})
		if err != nil {
			return moves, err
		}
		moves = append(moves, mv)
	}
	return moves, nil
}
