package agentdir

import (
	"fmt"
	"slices"
	"strings"
)

// Reachable returns the steps a run of reg can enter, starting from its
// entry step (the entryStepMapping target of the agent's verdict type, or
// entryStep), along the registry's routes (RouteTargets: check
// transitions, retry fallbacks, in-agent escalations, sub-steps, intent
// transitions and initial.X → continuation.X for next); a step allowed to
// "jump" reaches every step. It returns nil when the entry step is not a
// step. The runtime builds only these steps and Validate reports problems
// of the others as warnings.
func Reachable(reg *Registry) map[string]bool {
	if reg == nil {
		return nil
	}
	if _, ok := reg.Steps[reg.EntryStep]; !ok {
		return nil
	}
	return ReachableFrom(reg, reg.EntryStep)
}

// ReachableFrom is Reachable starting from the given steps. The routes
// are the registry's own (RouteTargets); a step whose structuredGate
// allows "jump" reaches every step, the target being the model's choice.
func ReachableFrom(reg *Registry, entries ...string) map[string]bool {
	seen := map[string]bool{}
	var queue []string
	for _, e := range entries {
		if _, ok := reg.Steps[e]; ok && !seen[e] {
			seen[e] = true
			queue = append(queue, e)
		}
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		next := reg.RouteTargets(id)
		if g := reg.Steps[id].StructuredGate; g != nil && slices.Contains(g.AllowedIntents, IntentJump) {
			next = append(next, sortedKeys(reg.Steps)...)
		}
		for _, n := range next {
			if _, ok := reg.Steps[n]; ok && !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return seen
}

// unreachableWhy says why step id (not in Reachable) does not run: it
// is reached only from the entry of another verdict type, or from no entry
// at all.
func (c *checker) unreachableWhy(id string) string {
	if c.otherEntries == nil {
		c.otherEntries = map[string]string{}
		for _, vt := range sortedKeys(c.reg.EntryStepMapping) {
			t := c.reg.EntryStepMapping[vt]
			if _, ok := c.reg.Steps[t]; !ok || t == c.reg.EntryStep {
				continue
			}
			for s := range ReachableFrom(c.reg, t) {
				if _, seen := c.otherEntries[s]; !seen {
					c.otherEntries[s] = vt
				}
			}
		}
	}
	if vt, ok := c.otherEntries[id]; ok {
		return fmt.Sprintf("step %q is reached only from the entry of verdict type %s (entryStepMapping), not from this agent's entry step %q", id, vt, c.reg.EntryStep)
	}
	return fmt.Sprintf("step %q cannot be reached from the entry step %q", id, c.reg.EntryStep)
}

// runReaches reports whether a run from the entry step enters the step a
// registry pointer (/steps/<id>/…) lies in (true when unknown).
func (c *checker) runReaches(ptr string) bool {
	rest, ok := strings.CutPrefix(ptr, "/steps/")
	if !ok || c.reachableSteps() == nil {
		return true
	}
	id, _, _ := strings.Cut(rest, "/")
	return c.reachableSteps()[unescapePointer(id)]
}

// reachableSteps is Reachable(c.reg), computed once per Validate.
func (c *checker) reachableSteps() map[string]bool {
	if !c.reachDone {
		c.reach, c.reachDone = Reachable(c.reg), true
	}
	return c.reach
}

// demoteUnreachable turns the errors about steps no run can enter into
// warnings that say so: a folder with dead steps still runs.
func (c *checker) demoteUnreachable() {
	seen := c.reachableSteps()
	if seen == nil {
		return
	}
	for i, p := range c.problems {
		if p.Severity != SeverityError || p.File != c.regSrc.file {
			continue
		}
		rest, ok := strings.CutPrefix(p.Pointer, "/steps/")
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(rest, "/")
		id = unescapePointer(id)
		if _, exists := c.reg.Steps[id]; !exists || seen[id] {
			continue
		}
		p.Severity = SeverityWarning
		p.Message = fmt.Sprintf("%s, so this does not stop a run: %s", c.unreachableWhy(id), p.Message)
		c.problems[i] = p
	}
}

// unescapePointer undoes escapePointer on one token.
func unescapePointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}
