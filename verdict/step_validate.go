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
