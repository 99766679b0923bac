package agentdir

import (
	"fmt"
	"slices"
	"strings"
)

// flowStep checks a step's intent routing: stepKind, structuredGate,
// transitions and inputs.
func (c *checker) flowStep(id, ptr string, st Step) {
	s := c.regSrc
	g := st.StructuredGate
	kind := st.Kind()
	if g == nil {
		if len(st.Transitions) > 0 {
			c.report(s, "SR-TRANSITION-INTENT", SeverityError, ptr+"/transitions",
				"add a structuredGate that says where the intent is in the step's answer, or remove transitions",
				"step %q has transitions but no structuredGate, so no intent is ever read", id)
		}
		if c.routedByIntent() && kind != "" && st.Check == nil && st.Type != "gateway" && st.Type != "subStep" && len(st.SubSteps) == 0 {
			c.report(s, "SR-GATE-MISSING", SeverityError, ptr,
				"add a structuredGate, transitions and an outputSchemaRef, as the other steps have",
				"step %q (a %s step) has neither a structuredGate nor a check: once entered, the flow would never leave it", id, kind)
		}
	} else {
		c.gate(id, ptr, st, kind)
	}
	for _, name := range sortedKeys(st.Inputs) {
		in := st.Inputs[name]
		p := JoinPointer("steps", id, "inputs", name, "from")
		from, _, ok := in.Source()
		switch {
		case in.From == "":
			if len(in.Default) == 0 || string(in.Default) == "null" {
				c.report(s, "SR-INPUT-FROM", SeverityError, JoinPointer("steps", id, "inputs", name),
					`add from ("<stepId>.<key>"), or a default`, "input %q has neither from nor a default, so it never has a value", name)
			}
		case !ok:
			c.report(s, "SR-INPUT-FROM", SeverityError, p, `write from as "<stepId>.<key>", e.g. "initial.issue.summary"`,
				"input %q: from %q is not <stepId>.<key>", name, in.From)
		case c.reg.Steps[from].StructuredGate == nil:
			if _, exists := c.reg.Steps[from]; !exists {
				c.report(s, "SR-INPUT-FROM", SeverityError, p, c.stepHint, "input %q: from names unknown step %q", name, from)
			} else {
				c.report(s, "SR-INPUT-FROM", SeverityError, p, "take inputs from a step routed by a structuredGate (its answer is recorded)",
					"input %q: step %q has no structuredGate, so its output is not recorded", name, from)
			}
		}
	}
}

// routedByIntent is c.reg.RoutedByIntent(), computed once per Validate
// (it walks every step, and flowStep asks it for each step without a gate).
func (c *checker) routedByIntent() bool {
	if c.routed == 0 {
		c.routed = -1
		if c.reg.RoutedByIntent() {
			c.routed = 1
		}
	}
	return c.routed == 1
}

// gate checks a step's structuredGate and transitions.
func (c *checker) gate(id, ptr string, st Step, kind string) {
	s := c.regSrc
	g := st.StructuredGate
	gp := ptr + "/structuredGate"
	if st.Check != nil {
		c.report(s, "SR-GATE-CHECK", SeverityError, ptr+"/check",
			"route the step either by its check or by its structuredGate; remove one",
			"step %q has both a check and a structuredGate", id)
	}
	if st.Type == "gateway" || st.Type == "subStep" {
		c.report(s, "SR-GATE-CHECK", SeverityError, ptr+"/type",
			"a step routed by intent runs its own prompt; remove type or set it to normal",
			"a %s step cannot route by a structuredGate", st.Type)
	}
	if st.OutputSchemaRef == nil {
		c.report(s, "SR-GATE-SCHEMA", SeverityError, gp,
			"add an outputSchemaRef whose schema has the intent property: the intent is read only from the structured answer",
			"step %q has a structuredGate but no outputSchemaRef", id)
	}
	if strings.TrimSpace(g.IntentField) == "" {
		c.report(s, "SR-GATE-FIELD", SeverityError, gp+"/intentField", `set intentField, e.g. "next_action.action"`,
			"structuredGate has no intentField: the intent cannot be found in the answer")
	}
	if !strings.HasPrefix(g.IntentSchemaRef, "#/") {
		c.report(s, "SR-GATE-FIELD", SeverityError, gp+"/intentSchemaRef",
			`point at the intent's enum in the step's schema, e.g. "#/properties/next_action/properties/action"`,
			"intentSchemaRef %q is not a JSON pointer starting with #/", g.IntentSchemaRef)
	}
	if len(g.AllowedIntents) == 0 {
		c.report(s, "SR-GATE-FIELD", SeverityError, gp+"/allowedIntents", "list the intents the step may emit",
			"allowedIntents is empty")
	}
	c.gateIntents(gp, g, kind)
	if g.TargetMode != "" {
		c.report(s, "SR-INERT-FIELD", SeverityWarning, gp+"/targetMode", "remove it; jump targets come from targetField",
			"targetMode has no effect")
	}
	jump := slices.Contains(g.AllowedIntents, IntentJump)
	switch {
	case jump && g.TargetField == "":
		c.report(s, "SR-GATE-FIELD", SeverityError, gp+"/targetField", `set targetField, e.g. "next_action.details.target"`,
			"jump is allowed but targetField is not set: a jump would have no target")
	case !jump && g.TargetField != "":
		c.report(s, "SR-INERT-FIELD", SeverityWarning, gp+"/targetField", "allow jump, or remove targetField",
			"targetField has no effect: jump is not in allowedIntents")
	}
	handoffKeys := map[string]bool{}
	for _, f := range g.HandoffFields {
		handoffKeys[f[strings.LastIndex(f, ".")+1:]] = true
	}
	c.transitions(id, ptr, st, handoffKeys)
}

// gateIntents checks that a gate's allowed intents and its fallback
// intent suit the kind of step it routes.
func (c *checker) gateIntents(gp string, g *StructuredGate, kind string) {
	s := c.regSrc
	allowedForKind := func(intent string) bool {
		if intent == IntentAbort {
			return true
		}
		if kind == "" {
			return intent != IntentClosing
		}
		return slices.Contains(kindIntents[kind], intent)
	}
	kindHint := func() string {
		if kind == "" {
			return `set stepKind ("work", "verification" or "closure"); closing needs a closure step`
		}
		return fmt.Sprintf("a %s step may emit %s (and abort)", kind, intentList(kindIntents[kind]))
	}
	for i, intent := range g.AllowedIntents {
		p := fmt.Sprintf("%s/allowedIntents/%d", gp, i)
		if !slices.Contains(Intents(), intent) {
			continue // the JSON Schema reports it
		}
		if !allowedForKind(intent) {
			c.report(s, "SR-GATE-INTENT", SeverityError, p, kindHint(),
				"intent %q is not allowed for a %s step", intent, kindName(kind))
		}
	}
	if g.FallbackIntent != "" {
		p := gp + "/fallbackIntent"
		switch {
		case !slices.Contains(g.AllowedIntents, g.FallbackIntent):
			c.report(s, "SR-GATE-INTENT", SeverityError, p, "use one of allowedIntents "+intentList(g.AllowedIntents),
				"fallbackIntent %q is not in allowedIntents", g.FallbackIntent)
		case g.IsFailFast():
			c.report(s, "SR-INERT-FIELD", SeverityWarning, p,
				`set "failFast": false to use it, or remove it`,
				"fallbackIntent has no effect while failFast is true (the default): an answer without a readable allowed intent gets a format retry prompt, up to the step's onFailure attempts (default 3), and then the run stops with STEP_INTENT")
		}
	}
}

// transitions checks a routed step's transitions against its gate.
func (c *checker) transitions(id, ptr string, st Step, handoffKeys map[string]bool) {
	s := c.regSrc
	g := st.StructuredGate
	for _, intent := range sortedKeys(st.Transitions) {
		t := st.Transitions[intent]
		p := JoinPointer("steps", id, "transitions", intent)
		if !slices.Contains(Intents(), intent) {
			c.report(s, "SR-TRANSITION-INTENT", SeverityError, p, "use one of the intents "+intentList(Intents()),
				"transitions key %q is not an intent", intent)
			continue
		}
		switch intent {
		case IntentJump, IntentAbort:
			c.report(s, "SR-INERT-FIELD", SeverityWarning, p,
				"remove it: jump goes to the answer's target, abort ends the run",
				"transitions.%s has no effect", intent)
			continue
		}
		if !slices.Contains(g.AllowedIntents, intent) {
			c.report(s, "SR-INERT-FIELD", SeverityWarning, p, "add the intent to allowedIntents, or remove the transition",
				"transitions.%s is never taken: %s is not in allowedIntents", intent, intent)
		}
		if t.Fallback != "" {
			c.report(s, "SR-INERT-FIELD", SeverityWarning, p+"/fallback", "remove it; an unknown target is an error, not a fallback",
				"transitions.%s.fallback has no effect", intent)
		}
		if t.Condition != "" {
			if !handoffKeys[t.Condition] {
				c.report(s, "SR-TRANSITION-CONDITION", SeverityError, p+"/condition",
					"list the value's path in structuredGate.handoffFields (the condition names its last segment)",
					"condition %q names no handoff value of the step", t.Condition)
			}
			if len(t.Targets) == 0 {
				c.report(s, "SR-TRANSITION-CONDITION", SeverityError, p+"/targets",
					`map the condition's values to steps, with "default" for any other value`,
					"a conditional transition needs targets")
			}
			for _, k := range sortedKeys(t.Targets) {
				c.transitionTarget(JoinPointer("steps", id, "transitions", intent, "targets", k), intent, t.Targets[k])
			}
			if t.Target != nil || t.Terminal {
				c.report(s, "SR-TRANSITION-CONDITION", SeverityError, p+"/target",
					"use either target or condition with targets", "transitions.%s has both target and condition", intent)
			}
			continue
		}
		if len(t.Targets) > 0 {
			c.report(s, "SR-TRANSITION-CONDITION", SeverityError, p+"/targets",
				"add condition (the handoff value that selects the target), or use target", "targets without condition")
			continue
		}
		if t.Target == nil && !t.Terminal {
			c.report(s, "SR-TRANSITION-TARGET", SeverityError, p, `set "target": "<step id>" (or null for closing)`,
				"transitions.%s has no target", intent)
			continue
		}
		c.transitionTarget(p+"/target", intent, t.Target)
	}
	c.missingTransitions(id, ptr, st)
}

// transitionTarget checks one transition target: a step that exists, or
// null (terminal) for closing alone.
func (c *checker) transitionTarget(p, intent string, t *string) {
	s := c.regSrc
	if t == nil {
		if intent != IntentClosing {
			c.report(s, "SR-TRANSITION-TERMINAL", SeverityError, p,
				"name the next step; only closing (from a closure step) ends the flow",
				"transitions.%s is null (terminal), which only closing may be", intent)
		}
		return
	}
	if intent == IntentClosing {
		c.report(s, "SR-TRANSITION-TERMINAL", SeverityError, p, `closing ends the flow: write "closing": {"target": null}`,
			"transitions.closing names step %q; closing is terminal", *t)
		return
	}
	if _, ok := c.reg.Steps[*t]; !ok {
		c.report(s, "SR-TRANSITION-TARGET", SeverityError, p, c.stepHint, "transitions.%s: %q is not a step", intent, *t)
	}
}

// missingTransitions reports allowed intents that need a transition and
// have none (next without a default next step, handoff, escalate).
func (c *checker) missingTransitions(id, ptr string, st Step) {
	s := c.regSrc
	g := st.StructuredGate
	for i, intent := range g.AllowedIntents {
		if _, has := st.Transitions[intent]; has {
			continue
		}
		switch intent {
		case IntentHandoff, IntentEscalate:
		case IntentNext:
			if d, ok := DefaultNext(id); ok {
				if _, exists := c.reg.Steps[d]; exists {
					continue
				}
			}
		default:
			continue
		}
		c.report(s, "SR-TRANSITION-MISSING", SeverityError, fmt.Sprintf("%s/structuredGate/allowedIntents/%d", ptr, i),
			fmt.Sprintf(`add "transitions": {%q: {"target": "<step id>"}}`, intent),
			"intent %q is allowed but has no transition", intent)
	}
}

// validationSteps checks the registry's validationSteps and marks the
// validators they use in refs.
func (c *checker) validationSteps(refs map[string]bool) {
	s := c.regSrc
	for _, key := range sortedKeys(c.reg.ValidationSteps) {
		vs := c.reg.ValidationSteps[key]
		ptr := JoinPointer("validationSteps", key)
		for i, cc := range vs.ValidationConditions {
			refs[cc.Validator] = true
			if _, ok := c.reg.Validators[cc.Validator]; !ok {
				c.report(s, "SR-CONDITION-VALIDATOR", SeverityError, fmt.Sprintf("%s/validationConditions/%d/validator", ptr, i),
					"define it under validators, or fix the name"+known(c.validatorNames), "validator %q does not exist", cc.Validator)
			}
		}
		if vs.StepID != "" && vs.StepID != key {
			c.report(s, "SR-STEP-ID", SeverityError, ptr+"/stepId", fmt.Sprintf("set stepId to %q or remove it", key),
				"stepId %q differs from the validation step's key %q (the key names the step it verifies)", vs.StepID, key)
		}
		if vs.OutputSchemaRef != nil {
			c.report(s, "SR-INERT-FIELD", SeverityWarning, ptr+"/outputSchemaRef",
				"remove it; the closure step's own outputSchemaRef checks its answer",
				"a validation step's outputSchemaRef has no effect")
		}
		if vs.OnFailure != nil && len(vs.ValidationConditions) == 0 {
			c.report(s, "SR-IGNORED-FIELD", SeverityError, ptr+"/onFailure", "add validationConditions, or remove onFailure",
				"onFailure has no effect without validationConditions")
		}
		st, ok := c.reg.Steps[key]
		switch {
		case !ok:
			c.reportKey(s, "SR-VALIDATION-STEP", SeverityWarning, ptr,
				"key the validation step by the id of the closure step it verifies"+known(c.stepIDs),
				"validation step %q verifies no step (no step has that id), so its conditions never run", key)
		case len(st.CompletionConditions) > 0:
			c.report(s, "SR-VALIDATION-DUPLICATE", SeverityError, ptr,
				"keep one: the step's completionConditions or this validation step",
				"step %q has completionConditions and a validation step; only one can verify it", key)
		case st.StructuredGate != nil && st.Kind() != KindClosure:
			c.reportKey(s, "SR-VALIDATION-STEP", SeverityWarning, ptr,
				"bind it to the closure step (only a closure step's closing is verified)",
				"validation step %q verifies a %s step, whose intents never claim completion, so its conditions never run", key, kindName(st.Kind()))
		}
	}
}

func kindName(kind string) string {
	if kind == "" {
		return "kind-less"
	}
	return kind
}
