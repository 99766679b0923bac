package workflow

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
)

// Problem codes of a workflow file. Errors stop `workflow run`; warnings
// say why a field has no effect.
const (
	CodeRead         = "WF-READ"
	CodeJSON         = "WF-JSON"
	CodeDuplicateKey = "WF-DUPLICATE-KEY"
	CodeRequired     = "WF-REQUIRED"
	CodeType         = "WF-TYPE"
	CodeEmpty        = "WF-EMPTY"
	CodePhaseType    = "WF-PHASE-TYPE"
	CodePhaseAgent   = "WF-PHASE-AGENT"
	CodePhasePrio    = "WF-PHASE-PRIORITY"
	CodeRole         = "WF-ROLE"
	CodeRefAgent     = "WF-REF-AGENT"
	CodeRefPhase     = "WF-REF-PHASE"
	CodeRule         = "WF-RULE"
	CodeCloseCond    = "WF-CLOSE-CONDITION"
	CodeLabelSpec    = "WF-LABEL-SPEC"
	CodeHandoff      = "WF-HANDOFF"
	// Warnings.
	CodeUnknownField      = "WF-UNKNOWN-FIELD"
	CodeInert             = "WF-INERT"
	CodeTemplateUnused    = "WF-TEMPLATE-UNUSED"
	CodeAgentUnused       = "WF-AGENT-UNUSED"
	CodeHandoffUnreached  = "WF-HANDOFF-UNREACHABLE"
	CodePhaseNoLabel      = "WF-PHASE-NO-LABEL"
	CodeFallbackUndefined = "WF-FALLBACK-UNDEFINED"
)

func (p *parser) validate(w *Workflow) {
	for _, id := range w.PhaseIDs {
		ph := w.Phases[id]
		ptr := "/phases/" + escape(id)
		switch ph.Type {
		case Actionable:
			if ph.Agent == "" {
				p.errorf(CodePhaseAgent, ptr, "actionable phase %s names no agent to dispatch", id)
			} else if _, ok := w.Agents[ph.Agent]; !ok && len(w.AgentIDs) > 0 {
				p.errorf(CodeRefAgent, ptr+"/agent", "phase %s dispatches agent %q, which agents does not define", id, ph.Agent)
			}
			if !ph.HasPriority {
				p.errorf(CodePhasePrio, ptr, "actionable phase %s has no priority (lower wins when an issue has labels of several phases)", id)
			}
		case Terminal, Blocking:
			if ph.HasPriority {
				p.warnf(CodeInert, ptr+"/priority", "phase %s is %s: priority ranks actionable phases only and has no effect here", id, ph.Type)
			}
			if ph.Agent != "" {
				p.warnf(CodeInert, ptr+"/agent", "phase %s is %s: no agent is dispatched in it, so agent has no effect", id, ph.Type)
			}
		}
	}
	for i, lp := range w.LabelMapping {
		if _, ok := w.Phases[lp.Phase]; !ok && len(w.PhaseIDs) > 0 {
			p.errorf(CodeRefPhase, "/labelMapping/"+escape(lp.Label), "label %q maps to phase %q, which phases does not define", lp.Label, lp.Phase)
		}
		_ = i
	}
	p.agentRefs(w)
	p.labelSpecs(w)
	p.templates(w)
	p.handoffRefs(w)
	p.rulesInert(w)
	if pr := w.Prioritizer; pr != nil {
		if pr.DefaultLabel != "" && !slices.Contains(pr.Labels, pr.DefaultLabel) {
			p.warnf(CodeInert, "/prioritizer/defaultLabel", "defaultLabel %q is not one of prioritizer.labels: issues without a priority label sort after every labelled one, as unlabelled ones would", pr.DefaultLabel)
		}
	}
}

// targets lists the phases an agent can move an issue to, with the
// outcomes that lead there (sorted for stable messages).
// anyOtherOutcome stands for the outcomes an agent's fallbackPhase takes.
const anyOtherOutcome = "(any other outcome)"

func targets(a *Agent) map[string][]string {
	out := map[string][]string{}
	add := func(phase, outcome string) {
		if phase != "" {
			out[phase] = append(out[phase], outcome)
		}
	}
	if a.Role == Transformer {
		add(a.OutputPhase, "success")
		for _, k := range sortedKeys(a.FallbackPhases) {
			add(a.FallbackPhases[k], k)
		}
	} else {
		for _, k := range sortedKeys(a.OutputPhases) {
			add(a.OutputPhases[k], k)
		}
	}
	add(a.FallbackPhase, anyOtherOutcome)
	return out
}

func (p *parser) agentRefs(w *Workflow) {
	dispatched := map[string]bool{}
	for _, ph := range w.Phases {
		if ph.Type == Actionable {
			dispatched[ph.Agent] = true
		}
	}
	for _, id := range w.AgentIDs {
		a := w.Agents[id]
		ptr := "/agents/" + escape(id)
		check := func(phase, field string) {
			if _, ok := w.Phases[phase]; !ok && phase != "" && len(w.PhaseIDs) > 0 {
				p.errorf(CodeRefPhase, ptr+"/"+field, "agent %s's %s names phase %q, which phases does not define", id, strings.ReplaceAll(field, "/", "."), phase)
			}
		}
		check(a.FallbackPhase, "fallbackPhase")
		switch a.Role {
		case Transformer:
			check(a.OutputPhase, "outputPhase")
			for _, k := range sortedKeys(a.FallbackPhases) {
				check(a.FallbackPhases[k], "fallbackPhases/"+escape(k))
			}
			if a.OutputPhases != nil {
				p.warnf(CodeInert, ptr+"/outputPhases", "agent %s is a transformer: its outcome is success or failed, routed by outputPhase and fallbackPhase(s); outputPhases is read for validators only", id)
			}
		case Validator:
			for _, k := range sortedKeys(a.OutputPhases) {
				check(a.OutputPhases[k], "outputPhases/"+escape(k))
			}
			if a.OutputPhase != "" {
				p.warnf(CodeInert, ptr+"/outputPhase", "agent %s is a validator: its verdict is routed by outputPhases; outputPhase is read for transformers only", id)
			}
			if a.FallbackPhases != nil {
				p.warnf(CodeInert, ptr+"/fallbackPhases", "agent %s is a validator: a verdict outputPhases does not list goes to fallbackPhase; fallbackPhases is read for transformers only", id)
			}
		}
		if a.FallbackPhase == "" && a.Role != "" {
			p.warnf(CodeFallbackUndefined, ptr, "agent %s has no fallbackPhase: an outcome its phases do not list stops the issue with status failed (climpt throws there too)", id)
		}
		if a.HasCondition && !a.CloseOnComplete {
			p.errorf(CodeCloseCond, ptr+"/closeCondition", "agent %s sets closeCondition without closeOnComplete: true", id)
		}
		if a.HasCondition && a.Role == Validator && a.OutputPhases != nil {
			if _, ok := a.OutputPhases[a.CloseCondition]; !ok {
				p.errorf(CodeCloseCond, ptr+"/closeCondition", "agent %s closes on verdict %q, which is not a key of its outputPhases (%s)", id, a.CloseCondition, strings.Join(sortedKeys(a.OutputPhases), ", "))
			}
		}
		if a.CloseOnComplete {
			terminal := false
			for phase, outcomes := range targets(a) {
				if ph := w.Phases[phase]; ph != nil && ph.Type == Terminal && (!a.HasCondition || slices.Contains(outcomes, a.CloseCondition) || slices.Contains(outcomes, anyOtherOutcome)) {
					terminal = true
				}
			}
			if !terminal && len(w.PhaseIDs) > 0 {
				p.warnf(CodeInert, ptr+"/closeOnComplete", "agent %s never closes its issue: the issue is closed only on a move to a terminal phase (by the closeCondition outcome when set), and no outcome of this agent leads to one", id)
			}
		}
		if !dispatched[id] && (w.Prioritizer == nil || w.Prioritizer.Agent != id) {
			p.warnf(CodeAgentUnused, ptr, "agent %s is dispatched by no actionable phase, so nothing runs it", id)
		}
	}
	// A phase an agent can move to, with no label to mark it.
	labelled := map[string]bool{}
	for _, lp := range w.LabelMapping {
		labelled[lp.Phase] = true
	}
	for _, id := range w.PhaseIDs {
		if labelled[id] {
			continue
		}
		for _, aid := range w.AgentIDs {
			if _, ok := targets(w.Agents[aid])[id]; ok {
				p.warnf(CodePhaseNoLabel, "/phases/"+escape(id), "no label of labelMapping names phase %s: a move there (agent %s) removes the workflow labels and adds none, and the issue's next cycle finds no phase (blocked)", id, aid)
				break
			}
		}
	}
}

func (p *parser) labelSpecs(w *Workflow) {
	if w.Labels == nil {
		return
	}
	required := map[string]bool{}
	for _, lp := range w.LabelMapping {
		required[lp.Label] = true
	}
	if w.Prioritizer != nil {
		for _, l := range w.Prioritizer.Labels {
			required[l] = true
		}
	}
	declared := map[string]bool{}
	for _, l := range w.Labels {
		declared[l.Name] = true
		if !required[l.Name] {
			p.errorf(CodeLabelSpec, "/labels/"+escape(l.Name), "label %q is declared but neither labelMapping nor prioritizer.labels uses it (climpt rejects such a file too)", l.Name)
		}
	}
	var missing []string
	for l := range required {
		if !declared[l] {
			missing = append(missing, l)
		}
	}
	sort.Strings(missing)
	for _, l := range missing {
		p.errorf(CodeLabelSpec, "/labels", "labels declares no color and description for %q, which the workflow uses; once labels is present it must declare every label of labelMapping and prioritizer.labels", l)
	}
}

// templateKeys are the commentTemplates keys a move of agent with
// outcome looks up, in order: <agent><Outcome> then <agent>To<Outcome>,
// the outcome's first letter upper-cased and the rest kept as it is.
func templateKeys(agent, outcome string) []string {
	c := outcome
	if c != "" {
		c = strings.ToUpper(c[:1]) + c[1:]
	}
	return []string{agent + c, agent + "To" + c}
}

func (p *parser) templates(w *Workflow) {
	reachable := map[string]bool{}
	for _, id := range w.AgentIDs {
		for _, outcomes := range targets(w.Agents[id]) {
			for _, o := range outcomes {
				if o == anyOtherOutcome {
					continue
				}
				for _, k := range templateKeys(id, o) {
					reachable[k] = true
				}
			}
		}
		if w.Agents[id].Role == Transformer {
			for _, k := range templateKeys(id, "failed") {
				reachable[k] = true
			}
		}
	}
	for _, key := range sortedKeys(w.CommentTemplates) {
		if reachable[key] {
			continue
		}
		hint := "name the template <agent id><Outcome> (the outcome with its first letter upper-cased, e.g. detailerHandoff-impl for outcome handoff-impl)"
		if guess := closestTemplateKey(w, key); guess != "" {
			hint = fmt.Sprintf("rename it to %q to post it on that move", guess)
		}
		p.add(agentdir.SeverityWarning, CodeTemplateUnused, "/handoff/commentTemplates/"+escape(key), hint,
			"comment template %q is never posted: a move looks up <agent><Outcome> and <agent>To<Outcome> with the outcome as written (first letter upper-cased), and no agent/outcome of this workflow gives %q (climpt posts nothing there either)", key, key)
	}
}

// closestTemplateKey finds the key a template meant: the agent and
// outcome whose key differs from key only by hyphens and case.
func closestTemplateKey(w *Workflow, key string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "")) }
	for _, id := range w.AgentIDs {
		for _, outcomes := range targets(w.Agents[id]) {
			for _, o := range outcomes {
				for _, k := range templateKeys(id, o) {
					if norm(k) == norm(key) && k != key {
						return k
					}
				}
			}
		}
	}
	return ""
}

func (p *parser) handoffRefs(w *Workflow) {
	for i, h := range w.Handoffs {
		ptr := fmt.Sprintf("/handoffs/%d/when", i)
		a, ok := w.Agents[h.FromAgent]
		dispatched := false
		for _, ph := range w.Phases {
			if ph.Type == Actionable && ph.Agent == h.FromAgent {
				dispatched = true
			}
		}
		switch {
		case h.FromAgent == "":
		case !ok || !dispatched:
			p.warnf(CodeHandoffUnreached, ptr+"/fromAgent", "handoff %s fires when agent %s ends, but no actionable phase of this workflow dispatches %s: it never fires in this workflow", h.ID, h.FromAgent, h.FromAgent)
		default:
			found := false
			for _, outcomes := range targets(a) {
				if slices.Contains(outcomes, h.Outcome) {
					found = true
				}
			}
			if !found && a.FallbackPhase == "" {
				p.warnf(CodeHandoffUnreached, ptr+"/outcome", "handoff %s fires on outcome %q of agent %s, which no phase of the agent routes", h.ID, h.Outcome, h.FromAgent)
			}
		}
	}
}

func (p *parser) rulesInert(w *Workflow) {
	const why = "capstan's model clients wait out a provider's rate limit themselves (retry-after, bounded); a dispatched run that still hits it ends recoverable and the issue stops with status failed"
	if w.Rules.RateLimitThreshold != nil {
		p.warnf(CodeInert, "/rules/rateLimitThreshold", "rules.rateLimitThreshold has no effect: %s (climpt's loader drops it too)", why)
	}
	if w.Rules.RateLimitPollIntervalMs != nil {
		p.warnf(CodeInert, "/rules/rateLimitPollIntervalMs", "rules.rateLimitPollIntervalMs has no effect: %s (climpt's loader drops it too)", why)
	}
}

// checkExpr checks a payloadFrom expression's form.
func checkExpr(s string) string {
	switch {
	case len(s) >= 2 && strings.HasPrefix(s, "'") && strings.HasSuffix(s, "'"):
		return ""
	case strings.Contains(s, "${payload."):
		return ""
	case s == "$.workflow.context.now", s == "$.workflow.id":
		return ""
	case s == "$.agent.result" || strings.HasPrefix(s, "$.agent.result."):
		return ""
	}
	return fmt.Sprintf("%q must be $.agent.result.PATH, $.workflow.context.now, $.workflow.id, a 'quoted literal' or a text holding ${payload.KEY}", s)
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
