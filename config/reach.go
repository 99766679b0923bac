package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Reachable returns the steps a run of reg can enter, starting from its
// entry step (the entryStepMapping target of the agent's verdict type, or
// entryStep): through check transitions, retry fallbacks, in-agent
// escalations, sub-steps, and climpt's routing (transitions' target,
// targets and fallback; a step allowed to "jump" reaches every step, its
// target being the model's choice; initial.X reaches continuation.X, the
// route climpt takes for "next" when a step has no transition for it). It
// returns nil when
// the entry step is not a step. The runtime builds only these steps and
// Validate reports problems of the others as warnings.
func Reachable(reg *Registry) map[string]bool {
	if reg == nil {
		return nil
	}
	if _, ok := reg.Steps[reg.EntryStep]; !ok {
		return nil
	}
	return ReachableFrom(reg, reg.EntryStep)
}

// ReachableFrom is Reachable starting from the given steps.
func ReachableFrom(reg *Registry, entries ...string) map[string]bool {
	routes := climptRoutes(reg)
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
		st := reg.Steps[id]
		var next []string
		if st.Check != nil {
			next = append(next, st.Check.OnPass.Next, st.Check.OnFail.Next)
		}
		if st.Retry != nil {
			next = append(next, st.Retry.FallbackStep)
		}
		if st.Escalation != nil && (st.Escalation.NotificationMethod == "" || st.Escalation.NotificationMethod == "in_agent") {
			next = append(next, st.Escalation.EscalateTo)
		}
		next = append(next, st.SubSteps...)
		r := routes[id]
		if r.jump {
			next = append(next, sortedKeys(reg.Steps)...)
		}
		next = append(next, r.targets...)
		if rest, ok := strings.CutPrefix(id, "initial."); ok && !r.hasNext {
			next = append(next, "continuation."+rest)
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

// route is what climpt's routing fields of one step lead to.
type route struct {
	targets []string
	jump    bool
	hasNext bool // a transition for the "next" intent
}

// climptRoutes reads climpt's transitions and structuredGate of every
// step, from the file as written and from the registry's own fields, so
// that routes count whichever way the registry was made.
func climptRoutes(reg *Registry) map[string]route {
	out := map[string]route{}
	var docs []map[string]map[string]json.RawMessage
	if reg.src != nil {
		var doc struct {
			Steps map[string]map[string]json.RawMessage `json:"steps"`
		}
		if json.Unmarshal(reg.src.raw, &doc) == nil {
			docs = append(docs, doc.Steps)
		}
	}
	if b, err := json.Marshal(reg.Steps); err == nil {
		var steps map[string]map[string]json.RawMessage
		if json.Unmarshal(b, &steps) == nil {
			docs = append(docs, steps)
		}
	}
	for _, steps := range docs {
		for id, fields := range steps {
			r := out[id]
			var transitions map[string]json.RawMessage
			_ = json.Unmarshal(fields["transitions"], &transitions)
			if _, ok := transitions["next"]; ok {
				r.hasNext = true
			}
			for _, raw := range transitions {
				var t struct {
					Target   *string           `json:"target"`
					Targets  map[string]string `json:"targets"`
					Fallback *string           `json:"fallback"`
				}
				if json.Unmarshal(raw, &t) != nil {
					continue // malformed: the schema reports it
				}
				if t.Target != nil {
					r.targets = append(r.targets, *t.Target)
				}
				if t.Fallback != nil {
					r.targets = append(r.targets, *t.Fallback)
				}
				for _, v := range t.Targets {
					r.targets = append(r.targets, v)
				}
			}
			var gate struct {
				AllowedIntents []string `json:"allowedIntents"`
			}
			if raw, ok := fields["structuredGate"]; ok && json.Unmarshal(raw, &gate) == nil && slices.Contains(gate.AllowedIntents, "jump") {
				r.jump = true
			}
			out[id] = r
		}
	}
	return out
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
