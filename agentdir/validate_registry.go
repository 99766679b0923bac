package agentdir

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

func (c *checker) registry() {
	r := c.reg
	s := c.regSrc
	if r.EntryStep == "" && len(r.EntryStepMapping) == 0 && len(r.Steps) > 1 {
		c.report(s, "SR-ENTRY-STEP", SeverityError, "/entryStep", "set entryStep to one of the step ids"+known(c.stepIDs),
			"entryStep is not set and the registry has %d steps: capstan cannot tell which one runs first", len(r.Steps))
	}
	if vt := VerdictType(c.def); r.EntryStep == "" && len(r.EntryStepMapping) > 0 && (vt != "" || !c.completionTypeMistyped()) {
		c.report(s, "SR-ENTRY-STEP", SeverityError, "/entryStepMapping",
			fmt.Sprintf("add \"%s\": \"<step id>\" to entryStepMapping, or set entryStep", vt),
			"entryStepMapping has no entry for the agent's verdict type %q and entryStep is not set", vt)
	}
	refs := map[string]bool{} // validators referenced
	c.completionRefs(c.def.Runner.Completion, refs)
	parents := map[string]bool{} // steps listed as subSteps
	for _, id := range c.stepIDs {
		st := r.Steps[id]
		ptr := JoinPointer("steps", id)
		c.step(id, ptr, st)
		for _, cc := range st.CompletionConditions {
			refs[cc.Validator] = true
		}
		for _, sub := range st.SubSteps {
			parents[sub] = true
		}
	}
	for _, id := range c.stepIDs {
		if r.Steps[id].Type == "subStep" && !parents[id] {
			c.reportKey(s, "SR-SUBSTEP-ORPHAN", SeverityWarning, JoinPointer("steps", id),
				"list it in a parent step's subSteps, or change its type",
				"step %q has type subStep but no step lists it in subSteps, so it never runs", id)
		}
	}
	c.subStepCycles()
	c.validationSteps(refs)
	usedPatterns := map[string]bool{}
	for _, name := range c.validatorNames {
		v := r.Validators[name]
		c.validator(name, v)
		usedPatterns[v.FailurePattern] = true
		if !refs[name] {
			c.reportKey(s, "SR-VALIDATOR-UNUSED", SeverityWarning, JoinPointer("validators", name),
				"reference it from a step's completionConditions, a validation step's validationConditions or runner.completion.validators, or remove it",
				"validator %q is never used, so it never runs", name)
		}
	}
	for _, name := range sortedKeys(r.CompletionPatterns) {
		if !usedPatterns[name] {
			c.reportKey(s, "SR-PATTERN-UNUSED", SeverityWarning, JoinPointer("completionPatterns", name),
				"name it as a validator's failurePattern, or remove it",
				"completion pattern %q is not the failurePattern of any validator", name)
		}
	}
	c.reachability()
}

func (c *checker) completionRefs(comp Completion, refs map[string]bool) {
	for _, v := range comp.Validators {
		refs[v] = true
	}
	for _, sub := range comp.Conditions {
		c.completionRefs(sub, refs)
	}
}

// LacksPromptCoordinates reports whether the step runs a prompt of its
// own (it is no gateway, has no runner and no sub-steps) but lacks c2 or
// c3, so that no prompt file can be named for it (SR-STEP-PROMPT).
func (st Step) LacksPromptCoordinates() bool {
	return st.Type != "gateway" && st.Runner == nil && len(st.SubSteps) == 0 && (st.C2 == "" || st.C3 == "")
}

func (c *checker) step(id, ptr string, st Step) {
	s := c.regSrc
	c.protectGlobs(s, "SR-PROTECT-GLOB", ptr+"/protect", st.Protect)
	if st.StepID != "" && st.StepID != id {
		c.report(s, "SR-STEP-ID", SeverityError, ptr+"/stepId",
			fmt.Sprintf("set stepId to %q or remove it", id),
			"stepId %q differs from the step's key %q", st.StepID, id)
	}
	c.stepRunner(id, ptr, st)
	if st.LacksPromptCoordinates() {
		c.report(s, "SR-STEP-PROMPT", SeverityError, ptr,
			"set c2 and c3: the prompt is {base}/{c1}/{c2}/{c3}/f_{edition}.md",
			"step %q runs a prompt but has no c2/c3", id)
	}
	if st.Model != "" {
		c.model(s, "SR", ptr+"/model", st.Model)
	}
	if st.Fallback != "" {
		if msg := LexicalInside(st.Fallback); msg != "" {
			c.report(s, "SR-PATH-OUTSIDE", SeverityError, ptr+"/fallback",
				"use a path relative to the prompts base that stays inside it", "fallback %q %s", st.Fallback, msg)
		}
	}
	if ch := st.Check; ch != nil {
		c.stepCheck(ptr+"/check", ch)
	}
	c.ignoredRetryFields(ptr, st)
	for i, cc := range st.CompletionConditions {
		if _, ok := c.reg.Validators[cc.Validator]; !ok {
			c.report(s, "SR-CONDITION-VALIDATOR", SeverityError, fmt.Sprintf("%s/completionConditions/%d/validator", ptr, i),
				"define it under validators, or fix the name"+known(c.validatorNames),
				"validator %q does not exist", cc.Validator)
		}
	}
	// onFailure bounds completion attempts (step conditions and the run's
	// validators) and format retries (outputSchemaRef).
	if st.OnFailure != nil && len(c.reg.VerificationOf(id, st).Conditions) == 0 && len(c.def.Runner.Completion.Validators) == 0 && st.OutputSchemaRef == nil {
		c.report(s, "SR-IGNORED-FIELD", SeverityError, ptr+"/onFailure",
			"add completionConditions (or runner.completion.validators, or an outputSchemaRef), or remove onFailure",
			"onFailure has no effect: the step has no completionConditions, no outputSchemaRef, and runner.completion has no validators")
	}
	if ref := st.OutputSchemaRef; ref != nil {
		c.schemaRef(ptr+"/outputSchemaRef", ref)
	}
	for i, uv := range st.UVVariables {
		if st.suppliesInput(uv) {
			continue
		}
		c.uvVariable(fmt.Sprintf("%s/uvVariables/%d", ptr, i), uv)
	}
	c.flowStep(id, ptr, st)
}

// stepCheck checks a step's check: the fields its type needs, fields of
// other types, and that each outcome sets exactly one transition.
func (c *checker) stepCheck(cp string, ch *StepCheck) {
	s := c.regSrc
	need := func(ok bool, field, format string) {
		if !ok {
			c.report(s, "SR-CHECK-FIELD", SeverityError, cp+"/"+field, "add "+field, format, ch.Type)
		}
	}
	ignored := func(set bool, field, usedBy string) {
		if set {
			c.report(s, "SR-IGNORED-FIELD", SeverityError, cp+"/"+field, "remove it, or change type to "+usedBy,
				"%s has no effect on a %s check", field, ch.Type)
		}
	}
	switch ch.Type {
	case "keyword":
		need(nonBlank(ch.Keywords), "keywords", "a %s check needs at least one non-empty keyword")
	case "action":
		need(nonBlank(ch.Actions), "actions", "an %s check needs at least one tool name in actions")
	case "prompt":
		need(strings.TrimSpace(ch.Prompt) != "", "prompt", "a %s check needs the judging prompt")
	}
	if ch.Type != "" {
		ignored(len(ch.Keywords) > 0 && ch.Type != "keyword", "keywords", "keyword")
		ignored(len(ch.Actions) > 0 && ch.Type != "action", "actions", "action")
		ignored(ch.Prompt != "" && ch.Type != "prompt", "prompt", "prompt")
	}
	for _, tr := range []struct {
		key string
		t   Transition
	}{{"onPass", ch.OnPass}, {"onFail", ch.OnFail}} {
		tp := cp + "/" + tr.key
		n := 0
		for _, b := range []bool{tr.t.Next != "", tr.t.Complete, tr.t.Retry, tr.t.Escalate} {
			if b {
				n++
			}
		}
		if n != 1 {
			c.report(s, "SR-TRANSITION-AMBIGUOUS", SeverityError, tp,
				"set exactly one of next, complete, retry, escalate",
				"%s sets %d of next/complete/retry/escalate; exactly one is required", tr.key, n)
		}
	}
}

// ignoredRetryFields reports a step's retry and escalation fields that
// have no effect with the other fields set.
func (c *checker) ignoredRetryFields(ptr string, st Step) {
	s := c.regSrc
	if rp := st.Retry; rp != nil {
		p := ptr + "/retry"
		if rp.OnExhausted != "fallback" && rp.FallbackStep != "" {
			c.report(s, "SR-IGNORED-FIELD", SeverityError, p+"/fallbackStep",
				"set onExhausted to \"fallback\", or remove fallbackStep",
				"fallbackStep has no effect unless onExhausted is fallback")
		}
	}
	if es := st.Escalation; es != nil {
		p := ptr + "/escalation"
		if es.WebhookURL != "" && es.NotificationMethod != "webhook" {
			c.report(s, "SR-IGNORED-FIELD", SeverityError, p+"/webhookUrl",
				"set notificationMethod to \"webhook\", or remove webhookUrl",
				"webhookUrl has no effect unless notificationMethod is webhook")
		}
	}
}

// suppliesInput reports whether one of the step's inputs fills {uv-name}.
func (st Step) suppliesInput(name string) bool {
	for in, spec := range st.Inputs {
		if spec.Variable(in) == name {
			return true
		}
	}
	return false
}

func (c *checker) schemaRef(ptr string, ref *SchemaRef) {
	if ref.File == "" {
		return // the schema reports the missing key
	}
	if msg := LexicalInside(ref.File); msg != "" {
		c.report(c.regSrc, "SR-PATH-OUTSIDE", SeverityError, ptr+"/file",
			"name a file inside the agent's schemas/ folder, e.g. \"issue.schema.json\"", "schema file %q %s", ref.File, msg)
		return
	}
	dir := c.def.Runner.SchemasDir
	if dir == "" {
		dir = DefaultSchemasDir
	}
	c.file(c.regSrc, "SR", ptr+"/file", filepath.ToSlash(filepath.Join(dir, ref.File)), false, "SR-SCHEMA-FILE",
		"create the schema file under the agent's "+dir+"/ folder, or fix the file name")
}

func (c *checker) uvVariable(ptr, uv string) {
	s := c.regSrc
	if p, ok := c.def.Parameters[uv]; ok {
		if !p.Required && (len(p.Default) == 0 || string(p.Default) == "null") {
			then := fmt.Sprintf("a run must pass %s (PARAM_MISSING otherwise)", p.Flag(uv))
			if !c.runReaches(ptr) {
				then = fmt.Sprintf("runs from the entry step %q do not reach the step, so they do not need %s", c.reg.EntryStep, p.Flag(uv))
			}
			c.report(s, "PA-UV-OPTIONAL", SeverityWarning, ptr,
				fmt.Sprintf("make parameter %q required or give it a default", uv),
				"{uv-%s} is needed by this step but parameter %q is optional and has no default: %s", uv, uv, then)
		}
		return
	}
	if slices.Contains(c.opts.BuiltinVariables, uv) {
		return
	}
	hint := fmt.Sprintf("add parameter %q to agent.json (it supplies {uv-%s} from --%s)", uv, uv, strings.ReplaceAll(uv, "_", "-"))
	if trimmed, ok := strings.CutPrefix(uv, "uv-"); ok {
		if _, exists := c.def.Parameters[trimmed]; exists {
			hint = fmt.Sprintf("write %q: uvVariables name variables without the uv- prefix", trimmed)
		}
	}
	c.report(s, "PA-UV-UNSUPPLIED", SeverityError, ptr, hint, "no parameter supplies {uv-%s}", uv)
}

// validator checks what the validators' builder
// (verify.NewCompletionValidator) does not read: whether a test
// command is protected and lists each test, whether the pattern's params
// are extracted (warnings), and that a schema file exists in the agent
// folder. The rules of the fields the builder reads (the field the type
// needs, successWhen, the path, the handler, the schema resolving, the
// failure pattern, the extractors) are checked by the builder itself,
// which validate runs through the agent layer's checks.
func (c *checker) validator(name string, v Validator) {
	s := c.regSrc
	ptr := JoinPointer("validators", name)
	if v.Type == "command" && strings.TrimSpace(v.Command) != "" {
		if !c.protectsAnything() && RunsTests(v.Command) {
			c.report(s, "SR-TESTS-UNPROTECTED", SeverityWarning, ptr+"/command",
				"protect the tests and what configures them in agent.json, e.g. \"runner\": {\"verification\": {\"protect\": [\"**/*_test.go\", \"**/go.mod\"]}}",
				"validator %q runs tests (%s) but nothing is protected: the model can pass it by editing, skipping or deleting tests", name, v.Command)
		}
		if fixed, runner := VerboseTestCommand(v.Command); fixed != "" && c.def.Runner.Verification.TestBaselineOn() {
			c.report(s, "SR-TESTS-NOT-VERBOSE", SeverityWarning, ptr+"/command",
				"set \"command\": "+jsonText(fixed),
				"validator %q runs %s without listing each test: capstan cannot tell which tests were lost or skipped since the run started, %s", name, runner, knownWithout(runner))
		}
	}
	if v.Schema != nil && v.Type != "command" { // on a command validator it is SR-IGNORED-FIELD
		c.schemaRef(ptr+"/schema", v.Schema)
	}
	// A Go validator returns its own params.
	if pat, ok := c.reg.CompletionPatterns[v.FailurePattern]; ok && v.Type != "custom" {
		for _, param := range pat.Params {
			if _, ok := v.ExtractParams[param]; !ok {
				c.report(s, "SR-PATTERN-PARAM", SeverityWarning, ptr+"/extractParams",
					fmt.Sprintf("add %q to extractParams, or drop it from the pattern's params", param),
					"failure pattern %q needs param %q but validator %q does not extract it; the retry prompt gets it empty",
					v.FailurePattern, param, name)
			}
		}
	}
}

// subStepCycles reports every step that (transitively) contains itself
// through subSteps.
func (c *checker) subStepCycles() {
	steps := c.reg.Steps
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	reported := map[string]bool{}
	var stack []string
	var visit func(id string)
	visit = func(id string) {
		color[id] = grey
		stack = append(stack, id)
		for _, sub := range steps[id].SubSteps {
			if _, ok := steps[sub]; !ok {
				continue
			}
			switch color[sub] {
			case white:
				visit(sub)
			case grey:
				i := slices.Index(stack, sub)
				cycle := append(slices.Clone(stack[i:]), sub)
				if !reported[sub] {
					reported[sub] = true
					c.report(c.regSrc, "SR-SUBSTEP-CYCLE", SeverityError, JoinPointer("steps", sub, "subSteps"),
						"break the cycle: a step cannot contain itself",
						"sub-step cycle: %s", strings.Join(cycle, " → "))
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
	}
	for _, id := range c.stepIDs {
		if color[id] == white {
			visit(id)
		}
	}
}

// reachability warns about steps that no path from entryStep reaches.
func (c *checker) reachability() {
	seen := c.reachableSteps()
	if seen == nil {
		return
	}
	for _, id := range c.stepIDs {
		if !seen[id] && c.reg.Steps[id].Type != "subStep" {
			c.reportKey(c.regSrc, "SR-STEP-UNREACHABLE", SeverityWarning, JoinPointer("steps", id),
				"add a transition to it (check.onPass/onFail.next, fallbackStep, escalateTo, subSteps, transitions, entryStepMapping), or remove it",
				"%s", c.unreachableWhy(id))
		}
	}
}
