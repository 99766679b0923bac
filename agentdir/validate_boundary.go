package agentdir

import (
	"fmt"
	"strings"
)

// IssueParam is the parameter that names the GitHub issue a run works on;
// runner.integrations.github acts on it.
const IssueParam = "issue"

// RepositoryParam is the parameter that names the GitHub repository
// (OWNER/NAME) of the gh calls capstan makes for a run.
const RepositoryParam = "repository"

// FollowsIssue reports whether the agent's completion waits on a GitHub
// issue's state (an externalState completion on an issue, alone or inside
// a composite): for such agents closing the issue is the natural end, so
// the GitHub integration closes it by default.
func (d *Definition) FollowsIssue() bool {
	var walk func(c Completion) bool
	walk = func(c Completion) bool {
		if c.Type == "externalState" {
			res := strings.Trim(string(c.Options["resource"]), `"`)
			return res == "" || res == "issue"
		}
		for _, sub := range c.Conditions {
			if walk(sub) {
				return true
			}
		}
		return false
	}
	return walk(d.Runner.Completion)
}

// integrations checks runner.integrations.
func (c *checker) integrations() {
	g := c.def.Runner.Integrations.GitHub
	if g == nil {
		return
	}
	a := c.agentSrc
	const ptr = "/runner/integrations/github"
	if !g.Enabled {
		if g.DefaultClosureAction != "" || g.Labels.Completion != nil {
			c.report(a, "AC-GITHUB-DISABLED", SeverityWarning, ptr+"/enabled",
				"set enabled to true for capstan to label and close the issue, or remove defaultClosureAction and labels.completion",
				"runner.integrations.github is disabled: defaultClosureAction and labels.completion have no effect")
		}
		return
	}
	if _, ok := c.def.Parameters[IssueParam]; !ok {
		c.report(a, "AC-GITHUB-NO-ISSUE", SeverityWarning, ptr,
			`declare a parameter "issue" (the issue number, e.g. {"type": "number", "required": true}); capstan acts on that issue`,
			"runner.integrations.github has no issue to act on: the agent has no %q parameter, so capstan makes no GitHub calls", IssueParam)
	}
	if len(g.Labels.Named) > 0 {
		keys := sortedKeys(g.Labels.Named)
		c.report(a, "AC-GITHUB-LABELS-INERT", SeverityWarning, ptr+"/labels/"+escapePointer(keys[0]),
			"use them in your prompts; only labels.completion is applied by capstan (after the run completes)",
			"labels %s only name labels: capstan does not add or remove them", strings.Join(keys, ", "))
	}
}

// stepRunner checks a subprocess step (a step with runner).
func (c *checker) stepRunner(id, ptr string, st Step) {
	r := st.Runner
	if r == nil {
		return
	}
	s := c.regSrc
	p := ptr + "/runner"
	if strings.TrimSpace(r.Command) == "" {
		c.report(s, "SR-RUNNER-COMMAND", SeverityError, p+"/command", `name the program to run, e.g. "./scripts/merge.sh"`,
			"subprocess step %q has no command", id)
	}
	for field, set := range map[string]bool{"model": st.Model != "", "uvVariables": len(st.UVVariables) > 0, "subSteps": len(st.SubSteps) > 0} {
		if set {
			c.report(s, "SR-IGNORED-FIELD", SeverityError, ptr+"/"+field, "remove "+field+", or remove runner to make it a model step",
				"%s has no effect on subprocess step %q: it runs its command and calls no model", field, id)
		}
	}
	if st.Type == "gateway" {
		c.report(s, "SR-RUNNER-GATEWAY", SeverityError, ptr+"/type", "remove type, or remove runner",
			"step %q is a gateway, which runs nothing, and a subprocess step", id)
	}
	for i, arg := range append([]string{r.Command}, r.Args...) {
		ap := p + "/command"
		if i > 0 {
			ap = fmt.Sprintf("%s/args/%d", p, i-1)
		}
		for _, name := range ContextRefs(arg) {
			prm, ok := c.def.Parameters[name]
			switch {
			case !ok:
				c.report(s, "SR-RUNNER-CONTEXT", SeverityError, ap,
					"declare parameter "+name+" in agent.json, or use one of"+known(sortedKeys(c.def.Parameters)),
					"${context.%s} names no parameter", name)
			case !prm.Required && len(prm.Default) == 0:
				c.report(s, "SR-RUNNER-CONTEXT-OPTIONAL", SeverityWarning, ap,
					fmt.Sprintf("make parameter %s required or give it a default", name),
					"${context.%s} has no value when %s is not given: the step then fails", name, prm.Flag(name))
			}
		}
	}
}

// commandsOnly reports whether every step is a subprocess step: such an
// agent sends no prompts (and needs no prompts folder or model).
func (r *Registry) commandsOnly() bool {
	if len(r.Steps) == 0 {
		return false
	}
	for _, st := range r.Steps {
		if st.Runner == nil {
			return false
		}
	}
	return true
}
