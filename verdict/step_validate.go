package verdict

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

// validate checks the registry's step graph — every reference names a
// step of the right kind, every policy can be followed — and reports every
// broken rule at once (errors.Join): an *agentdir.RuleError with the rule's
// problem code where agentdir.Codes has one, CONFIG_INVALID otherwise, each
// with the registry file, the JSON pointer and a hint. `capstan validate`
// reports them through the agent layer's build check.
func (m *Machine) validate() error {
	c := &graphChecker{m: m, parents: map[string]string{}}
	if len(m.reg.Steps) == 0 {
		c.bad("/steps", "declare at least one step", "the registry has no steps")
		return errors.Join(c.errs...)
	}
	c.stepHint = "use one of the step ids (known: " + strings.Join(m.ids(), ", ") + ")"
	if !c.exists(m.reg.EntryStep) {
		c.rule("SR-ENTRY-STEP", "/entryStep", "set entryStep to one of the step ids (known: "+strings.Join(m.ids(), ", ")+")",
			"entryStep %q is not a step", m.reg.EntryStep)
	} else if m.reg.Steps[m.reg.EntryStep].Type == TypeSubStep {
		c.bad("/entryStep", "start at a normal or gateway step", "entryStep %q is a subStep", m.reg.EntryStep)
	}
	for _, id := range m.ids() {
		s := m.reg.Steps[id]
		p := agentdir.JoinPointer("steps", id)
		c.checkType(id, p, s)
		c.checkCheck(id, p, s)
		c.checkRetry(id, p, s)
		c.checkEscalation(p, s)
		c.checkSubSteps(id, p, s)
		c.checkStructuredGate(id, p, s)
		if s.Sequential != nil && !*s.Sequential {
			c.rule("SR-SUBSTEP-PARALLEL", p+"/sequential", "remove sequential or set it to true; run parallel work as separate agents",
				"parallel sub-steps are out of scope; sub-steps always run in order")
		}
	}
	return errors.Join(c.errs...)
}

// graphChecker collects the broken rules of a registry's step graph.
type graphChecker struct {
	m        *Machine
	errs     []error
	stepHint string            // the hint of a reference to no step
	parents  map[string]string // sub-step → the step it belongs to
}

// rule records a broken rule with a problem code.
func (c *graphChecker) rule(code, ptr, hint, format string, args ...any) {
	c.errs = append(c.errs, agentdir.Rule(code, c.m.opts.File, ptr, hint, format, args...))
}

// bad records a broken rule without a code of its own (CONFIG_INVALID).
func (c *graphChecker) bad(ptr, hint, format string, args ...any) {
	c.errs = append(c.errs, c.m.bad(ptr, hint, format, args...))
}

// exists reports whether id is a step.
func (c *graphChecker) exists(id string) bool { _, ok := c.m.reg.Steps[id]; return ok }

// checkType checks a step's type; a gateway needs a check to route by.
func (c *graphChecker) checkType(id, p string, s agentdir.Step) {
	switch s.Type {
	case "", TypeNormal, TypeSubStep:
	case TypeGateway:
		if s.Check == nil {
			c.rule("SR-GATEWAY-CHECK", p, "add a check whose onPass/onFail route to the next steps",
				"gateway step %q has no check; a gateway makes no model call and routes only by its check", id)
		}
	default:
		c.bad(p+"/type", `use "normal", "gateway" or "subStep"`, "step %q has unknown type %q", id, s.Type)
	}
}

// checkCheck checks the transitions of a step's check.
func (c *graphChecker) checkCheck(id, p string, s agentdir.Step) {
	if s.Check == nil {
		return
	}
	for _, tr := range []struct {
		key string
		t   agentdir.Transition
	}{{"onPass", s.Check.OnPass}, {"onFail", s.Check.OnFail}} {
		tp := p + "/check/" + tr.key
		if tr.t.Next != "" && !c.exists(tr.t.Next) {
			c.rule("SR-TRANSITION-TARGET", tp+"/next", c.stepHint, "%s.next %q is not a step", tr.key, tr.t.Next)
		}
		if tr.t.Escalate && s.Escalation == nil {
			c.rule("SR-TRANSITION-ESCALATE", tp+"/escalate", "add an escalation section to the step",
				"%s escalates but step %q has no escalation", tr.key, id)
		}
		if tr.t.Retry && s.Type == TypeGateway {
			c.bad(tp+"/retry", "a gateway makes no model call to retry", "gateway %q cannot retry", id)
		}
	}
}

// checkRetry checks a step's retry policy: what happens when its retries
// run out, and its count.
func (c *graphChecker) checkRetry(id, p string, s agentdir.Step) {
	r := s.Retry
	if r == nil {
		return
	}
	switch r.OnExhausted {
	case "", "error", "skip":
	case "fallback":
		if r.FallbackStep == "" {
			c.rule("SR-RETRY-FALLBACK", p+"/retry/fallbackStep", "set fallbackStep to the step to run when retries are exhausted",
				"onExhausted is fallback but fallbackStep is not set")
		} else if !c.exists(r.FallbackStep) {
			c.rule("SR-RETRY-FALLBACK-TARGET", p+"/retry/fallbackStep", c.stepHint, "fallbackStep %q is not a step", r.FallbackStep)
		}
	default:
		c.bad(p+"/retry/onExhausted", `use "error", "fallback" or "skip"`, "unknown onExhausted %q", r.OnExhausted)
	}
	if r.OnExhausted == "skip" && s.Check != nil && s.Check.OnPass.Retry {
		c.bad(p+"/check/onPass/retry", "onExhausted skip takes onPass, which must not retry; route onPass elsewhere or use another onExhausted",
			"step %q skips to onPass when retries run out, but onPass retries", id)
	}
	if r.MaxRetries != nil && *r.MaxRetries < 0 {
		c.bad(p+"/retry/maxRetries", "use 0 or more", "maxRetries is negative")
	}
}

// checkEscalation checks where a step's escalation goes and how the flow
// returns from it.
func (c *graphChecker) checkEscalation(p string, s agentdir.Step) {
	e := s.Escalation
	if e == nil {
		return
	}
	ep := p + "/escalation"
	switch e.NotificationMethod {
	case "", "in_agent":
		if !c.exists(e.EscalateTo) {
			c.rule("SR-ESCALATE-TARGET", ep+"/escalateTo", c.stepHint,
				"escalateTo %q is not a step (notificationMethod in_agent jumps to a step)", e.EscalateTo)
		}
	case "webhook":
		if u, err := url.Parse(e.WebhookURL); e.WebhookURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.rule("SR-ESCALATE-WEBHOOK", ep+"/webhookUrl", "set webhookUrl to an absolute http(s) URL",
				"notificationMethod webhook needs an http(s) webhookUrl, got %q", e.WebhookURL)
		}
	case "log":
	default:
		c.bad(ep+"/notificationMethod", `use "in_agent", "webhook" or "log"`, "unknown notificationMethod %q", e.NotificationMethod)
	}
	switch e.ReturnFlow {
	case "", "resume", "abort", "restart":
	default:
		c.bad(ep+"/returnFlow", `use "resume", "abort" or "restart"`, "unknown returnFlow %q", e.ReturnFlow)
	}
}

// checkSubSteps checks that a step's sub-steps are steps of type subStep,
// without sub-steps of their own, each with one parent.
func (c *graphChecker) checkSubSteps(id, p string, s agentdir.Step) {
	for i, sub := range s.SubSteps {
		sp := fmt.Sprintf("%s/subSteps/%d", p, i)
		switch {
		case !c.exists(sub):
			c.rule("SR-SUBSTEP-MISSING", sp, c.stepHint, "sub-step %q is not a step", sub)
		case c.m.reg.Steps[sub].Type != TypeSubStep:
			c.bad(sp, `set "type": "subStep" on it`, "sub-step %q of %q is not of type subStep", sub, id)
		case len(c.m.reg.Steps[sub].SubSteps) > 0:
			c.bad(sp, "sub-steps do not nest", "sub-step %q has sub-steps of its own", sub)
		}
		if other, dup := c.parents[sub]; dup {
			c.bad(sp, "give each sub-step one parent", "sub-step %q belongs to %q and %q", sub, other, id)
		} else {
			c.parents[sub] = id
		}
	}
}

// checkStructuredGate checks a step routed by intent: a normal step,
// without a check, whose transitions name steps.
func (c *graphChecker) checkStructuredGate(id, p string, s agentdir.Step) {
	if s.StructuredGate == nil {
		return
	}
	if s.Check != nil {
		c.bad(p+"/check", "route the step either by its check or by its structuredGate, not both",
			"step %q has both a check and a structuredGate", id)
	}
	if s.Type == TypeGateway || s.Type == TypeSubStep {
		c.bad(p+"/structuredGate", "a step routed by intent runs its own prompt; make it a normal step",
			"%s step %q cannot route by a structuredGate", s.Type, id)
	}
	for _, intent := range sortedKeys(s.Transitions) {
		for _, t := range s.Transitions[intent].Steps() {
			if !c.exists(t) {
				c.rule("SR-TRANSITION-TARGET", p+"/transitions/"+intent, c.stepHint, "transitions.%s: %q is not a step", intent, t)
			}
		}
	}
}

// bad is a CONFIG_INVALID error of the registry at ptr, for what the run
// finds that validate cannot (a transition to a step restored from an
// older journal).
func (m *Machine) bad(ptr, hint, format string, args ...any) error {
	return &agenterr.Error{Code: agenterr.CodeConfigurationValidation, Layer: agenterr.LayerConfiguration,
		Message: fmt.Sprintf(format, args...), File: m.opts.File, Pointer: ptr, Hint: hint}
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
