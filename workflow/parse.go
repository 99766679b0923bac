package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/internal/jsonvalue"
)

// Load reads and validates the workflow file at path. The result holds
// every problem; the workflow is nil only when the file cannot be read or
// is not a JSON object. A workflow with errors must not be run.
func Load(path string) (*Workflow, agentdir.ValidationResult) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, agentdir.NewValidationResult(agentdir.Problem{Code: CodeRead, File: path,
			Message: fmt.Sprintf("cannot read the workflow file: %v", err),
			Hint:    "check the path: climpt keeps the workflow file at .agent/workflow.json in the project"})
	}
	return Parse(path, raw)
}

// Parse reads a workflow file's bytes (name is the file named in
// problems) and validates it.
func Parse(name string, raw []byte) (*Workflow, agentdir.ValidationResult) {
	p := &parser{file: name, pos: jsonvalue.NewIndex(raw)}
	w := p.parse(raw)
	if w != nil {
		p.validate(w)
	}
	for _, d := range p.pos.Duplicates() {
		line, col := p.pos.Position(d.Offset)
		p.problems = append(p.problems, agentdir.Problem{Code: CodeDuplicateKey, Severity: agentdir.SeverityError, File: name,
			Pointer: d.Pointer, Line: line, Column: col, Message: "this member is written twice in its object; JSON readers keep only one of them",
			Hint: "remove one of the two"})
	}
	for i := range p.problems {
		pr := &p.problems[i]
		if pr.Line == 0 {
			pr.Line, pr.Column = p.pos.Locate(pr.Pointer, true)
		}
	}
	return w, agentdir.NewValidationResult(p.problems...)
}

type parser struct {
	file     string
	pos      *jsonvalue.Index
	problems []agentdir.Problem
}

func (p *parser) add(sev agentdir.Severity, code, ptr, hint, format string, args ...any) {
	p.problems = append(p.problems, agentdir.Problem{Code: code, Severity: sev, File: p.file, Pointer: ptr,
		Message: fmt.Sprintf(format, args...), Hint: hint})
}

func (p *parser) errorf(code, ptr, format string, args ...any) {
	p.add(agentdir.SeverityError, code, ptr, "", format, args...)
}

func (p *parser) warnf(code, ptr, format string, args ...any) {
	p.add(agentdir.SeverityWarning, code, ptr, "", format, args...)
}

// object decodes an object member list, reporting a wrong type.
func (p *parser) object(raw json.RawMessage, ptr, what string) ([]member, bool) {
	ms, err := members(raw)
	if err != nil {
		p.errorf(CodeType, ptr, "%s must be an object, not %s", what, jsonKind(raw))
		return nil, false
	}
	return ms, true
}

// fields checks an object's member names against known ones: unknown
// members are warned; it returns name → value.
func (p *parser) fields(ms []member, ptr string, known ...string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, m := range ms {
		if !contains(known, m.Name) {
			p.add(agentdir.SeverityWarning, CodeUnknownField, ptr+"/"+escape(m.Name),
				"remove it, or check its spelling against docs/workflows.md",
				"%q is not a field of %s: neither capstan nor climpt reads it (climpt's schema rejects it)", m.Name, where(ptr))
			continue
		}
		out[m.Name] = m.Value
	}
	return out
}

func where(ptr string) string {
	if ptr == "" {
		return "the workflow"
	}
	return ptr
}

func (p *parser) str(raw json.RawMessage, ptr string) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.errorf(CodeType, ptr, "%s must be a string, not %s", ptr, jsonKind(raw))
		return "", false
	}
	return s, true
}

func (p *parser) boolean(raw json.RawMessage, ptr string) (bool, bool) {
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		p.errorf(CodeType, ptr, "%s must be true or false, not %s", ptr, jsonKind(raw))
		return false, false
	}
	return b, true
}

func (p *parser) num(raw json.RawMessage, ptr string) (float64, bool) {
	f, ok := number(raw)
	if !ok {
		p.errorf(CodeType, ptr, "%s must be a number, not %s", ptr, jsonKind(raw))
	}
	return f, ok
}

// strMap decodes an object of strings in file order.
func (p *parser) strMap(raw json.RawMessage, ptr, what string) ([]member, map[string]string) {
	ms, ok := p.object(raw, ptr, what)
	if !ok {
		return nil, nil
	}
	out := map[string]string{}
	var kept []member
	for _, m := range ms {
		s, ok := p.str(m.Value, ptr+"/"+escape(m.Name))
		if !ok {
			continue
		}
		out[m.Name] = s
		kept = append(kept, member{Name: m.Name, Value: json.RawMessage(strconv.Quote(s))})
	}
	return kept, out
}

func (p *parser) parse(raw []byte) *Workflow {
	ms, err := members(raw)
	if err != nil {
		p.add(agentdir.SeverityError, CodeJSON, "", "fix the JSON syntax (a trailing comma or a missing quote is the usual cause)",
			"the workflow file is not a JSON object: %v", err)
		return nil
	}
	var rest json.RawMessage
	if json.Unmarshal(raw, &rest) != nil {
		p.add(agentdir.SeverityError, CodeJSON, "", "fix the JSON syntax", "the workflow file is not valid JSON")
		return nil
	}
	top := p.fields(ms, "", "$schema", "version", "phases", "labelMapping", "labels", "agents", "rules",
		"handoff", "subjectStore", "prioritizer", "labelPrefix", "handoffs", "payloadSchema")
	w := &Workflow{File: p.file, Phases: map[string]*Phase{}, Agents: map[string]*Agent{},
		Rules: Rules{MaxCycles: DefaultMaxCycles, CycleDelayMs: DefaultCycleDelayMs}, SubjectStorePath: DefaultSubjectStore}
	if v, ok := top["$schema"]; ok {
		w.Schema, _ = p.str(v, "/$schema")
	}
	for _, req := range []string{"version", "phases", "labelMapping", "agents"} {
		if _, ok := top[req]; !ok {
			p.add(agentdir.SeverityError, CodeRequired, "", "add it (see docs/workflows.md)", "the workflow has no %q (required)", req)
		}
	}
	if v, ok := top["version"]; ok {
		w.Version, _ = p.str(v, "/version")
	}
	if v, ok := top["labelPrefix"]; ok {
		w.LabelPrefix, _ = p.str(v, "/labelPrefix")
	}
	if v, ok := top["phases"]; ok {
		p.phases(w, v)
	}
	if v, ok := top["labelMapping"]; ok {
		p.labelMapping(w, v)
	}
	if v, ok := top["labels"]; ok {
		p.labels(w, v)
	}
	if v, ok := top["agents"]; ok {
		p.agents(w, v)
	}
	if v, ok := top["rules"]; ok {
		p.rules(w, v)
	}
	if v, ok := top["handoff"]; ok {
		p.handoffSection(w, v)
	}
	if v, ok := top["subjectStore"]; ok {
		p.subjectStore(w, v)
	}
	if v, ok := top["prioritizer"]; ok {
		p.prioritizer(w, v)
	}
	if v, ok := top["handoffs"]; ok {
		p.handoffs(w, v)
	}
	if v, ok := top["payloadSchema"]; ok {
		p.payloadSchema(w, v)
	}
	return w
}

// labelMapping reads which label names which phase.
func (p *parser) labelMapping(w *Workflow, v json.RawMessage) {
	kept, _ := p.strMap(v, "/labelMapping", "labelMapping")
	for _, m := range kept {
		var s string
		_ = json.Unmarshal(m.Value, &s)
		w.LabelMapping = append(w.LabelMapping, LabelPhase{Label: m.Name, Phase: s})
	}
	if kept != nil && len(kept) == 0 {
		p.errorf(CodeEmpty, "/labelMapping", "labelMapping is empty: no label names a phase, so no issue can be run")
	}
}

// handoffSection reads the handoff section: the comment templates.
func (p *parser) handoffSection(w *Workflow, v json.RawMessage) {
	if hm, ok := p.object(v, "/handoff", "handoff"); ok {
		w.HandoffSection = true
		h := p.fields(hm, "/handoff", "commentTemplates")
		if t, ok := h["commentTemplates"]; ok {
			_, w.CommentTemplates = p.strMap(t, "/handoff/commentTemplates", "handoff.commentTemplates")
		}
	}
}

// subjectStore reads where the subject store is kept.
func (p *parser) subjectStore(w *Workflow, v json.RawMessage) {
	if sm, ok := p.object(v, "/subjectStore", "subjectStore"); ok {
		s := p.fields(sm, "/subjectStore", "path")
		if pv, ok := s["path"]; ok {
			if path, ok := p.str(pv, "/subjectStore/path"); ok {
				w.SubjectStorePath = path
			}
		}
	}
}

// payloadSchema reads the schema that handoff payloads must match.
func (p *parser) payloadSchema(w *Workflow, v json.RawMessage) {
	if pm, ok := p.object(v, "/payloadSchema", "payloadSchema"); ok {
		f := p.fields(pm, "/payloadSchema", "$ref")
		if r, ok := f["$ref"]; ok {
			w.PayloadSchemaRef, _ = p.str(r, "/payloadSchema/$ref")
		} else {
			p.errorf(CodeRequired, "/payloadSchema", "payloadSchema has no \"$ref\" (the schema file, relative to the work dir)")
		}
	}
}

func (p *parser) phases(w *Workflow, raw json.RawMessage) {
	ms, ok := p.object(raw, "/phases", "phases")
	if !ok {
		return
	}
	if len(ms) == 0 {
		p.errorf(CodeEmpty, "/phases", "phases is empty")
	}
	for _, m := range ms {
		ptr := "/phases/" + escape(m.Name)
		pm, ok := p.object(m.Value, ptr, "phase "+m.Name)
		if !ok {
			continue
		}
		f := p.fields(pm, ptr, "type", "priority", "agent")
		ph := &Phase{ID: m.Name}
		if t, ok := f["type"]; ok {
			if s, ok := p.str(t, ptr+"/type"); ok {
				switch s {
				case Actionable, Terminal, Blocking:
					ph.Type = s
				default:
					p.errorf(CodePhaseType, ptr+"/type", "phase %s has type %q; it must be actionable, terminal or blocking", m.Name, s)
				}
			}
		} else {
			p.errorf(CodeRequired, ptr, "phase %s has no \"type\" (actionable, terminal or blocking)", m.Name)
		}
		if v, ok := f["priority"]; ok {
			if n, ok := p.num(v, ptr+"/priority"); ok {
				ph.Priority, ph.HasPriority = n, true
			}
		}
		if v, ok := f["agent"]; ok && strings.TrimSpace(string(v)) != "null" {
			ph.Agent, _ = p.str(v, ptr+"/agent")
		}
		w.PhaseIDs = append(w.PhaseIDs, m.Name)
		w.Phases[m.Name] = ph
	}
}

func (p *parser) labels(w *Workflow, raw json.RawMessage) {
	ms, ok := p.object(raw, "/labels", "labels")
	if !ok {
		return
	}
	w.Labels = []LabelSpec{}
	for _, m := range ms {
		ptr := "/labels/" + escape(m.Name)
		lm, ok := p.object(m.Value, ptr, "label "+m.Name)
		if !ok {
			continue
		}
		f := p.fields(lm, ptr, "color", "description")
		spec := LabelSpec{Name: m.Name}
		if v, ok := f["color"]; ok {
			if s, ok := p.str(v, ptr+"/color"); ok {
				if !hexColor.MatchString(s) {
					p.errorf(CodeLabelSpec, ptr+"/color", "label %q has color %q; it must be six hex digits without '#'", m.Name, s)
				}
				spec.Color = strings.ToLower(s)
			}
		} else {
			p.errorf(CodeLabelSpec, ptr, "label %q has no color (six hex digits, e.g. \"0e8a16\")", m.Name)
		}
		if v, ok := f["description"]; ok {
			spec.Description, _ = p.str(v, ptr+"/description")
		}
		w.Labels = append(w.Labels, spec)
	}
}

func (p *parser) agents(w *Workflow, raw json.RawMessage) {
	ms, ok := p.object(raw, "/agents", "agents")
	if !ok {
		return
	}
	if len(ms) == 0 {
		p.errorf(CodeEmpty, "/agents", "agents is empty")
	}
	for _, m := range ms {
		ptr := "/agents/" + escape(m.Name)
		am, ok := p.object(m.Value, ptr, "agent "+m.Name)
		if !ok {
			continue
		}
		f := p.fields(am, ptr, "role", "directory", "outputPhase", "outputPhases", "fallbackPhase", "fallbackPhases",
			"closeOnComplete", "closeCondition")
		a := &Agent{ID: m.Name, Directory: m.Name}
		if v, ok := f["role"]; ok {
			if s, ok := p.str(v, ptr+"/role"); ok {
				switch s {
				case Transformer, Validator:
					a.Role = s
				default:
					p.errorf(CodeRole, ptr+"/role", "agent %s has role %q; it must be transformer or validator", m.Name, s)
				}
			}
		} else {
			p.errorf(CodeRequired, ptr, "agent %s has no \"role\" (transformer or validator)", m.Name)
		}
		if v, ok := f["directory"]; ok {
			if s, ok := p.str(v, ptr+"/directory"); ok {
				a.Directory = s
				if s == "" || strings.Contains(s, "..") || strings.HasPrefix(s, "/") {
					p.errorf(CodeType, ptr+"/directory", "agent %s's directory %q must name a folder inside the agents directory (no \"..\", not absolute)", m.Name, s)
				}
			}
		}
		if v, ok := f["outputPhase"]; ok {
			a.OutputPhase, _ = p.str(v, ptr+"/outputPhase")
		}
		if v, ok := f["outputPhases"]; ok {
			_, a.OutputPhases = p.strMap(v, ptr+"/outputPhases", "outputPhases")
		}
		if v, ok := f["fallbackPhase"]; ok {
			a.FallbackPhase, _ = p.str(v, ptr+"/fallbackPhase")
		}
		if v, ok := f["fallbackPhases"]; ok {
			_, a.FallbackPhases = p.strMap(v, ptr+"/fallbackPhases", "fallbackPhases")
		}
		if v, ok := f["closeOnComplete"]; ok {
			a.CloseOnComplete, _ = p.boolean(v, ptr+"/closeOnComplete")
		}
		if v, ok := f["closeCondition"]; ok {
			a.CloseCondition, a.HasCondition = p.str(v, ptr+"/closeCondition")
		}
		switch a.Role {
		case Transformer:
			if _, ok := f["outputPhase"]; !ok {
				p.errorf(CodeRequired, ptr, "transformer agent %s has no \"outputPhase\" (the phase a successful run moves the issue to)", m.Name)
			}
		case Validator:
			if _, ok := f["outputPhases"]; !ok {
				p.errorf(CodeRequired, ptr, "validator agent %s has no \"outputPhases\" (verdict → phase)", m.Name)
			}
		}
		w.AgentIDs = append(w.AgentIDs, m.Name)
		w.Agents[m.Name] = a
	}
}

func (p *parser) rules(w *Workflow, raw json.RawMessage) {
	rm, ok := p.object(raw, "/rules", "rules")
	if !ok {
		return
	}
	f := p.fields(rm, "/rules", "maxCycles", "cycleDelayMs", "maxConsecutivePhases", "rateLimitThreshold", "rateLimitPollIntervalMs")
	if v, ok := f["maxCycles"]; ok {
		if n, ok := p.num(v, "/rules/maxCycles"); ok {
			if n < 1 || n > 1e6 || n != math.Trunc(n) {
				p.errorf(CodeRule, "/rules/maxCycles", "rules.maxCycles is %v; it must be a whole number of at least 1", n)
			} else {
				w.Rules.MaxCycles = int(n)
			}
		}
	}
	if v, ok := f["cycleDelayMs"]; ok {
		if n, ok := p.num(v, "/rules/cycleDelayMs"); ok {
			if n < 0 || n > 24*3600*1000 {
				p.errorf(CodeRule, "/rules/cycleDelayMs", "rules.cycleDelayMs is %v; it must be between 0 and 86400000 (a day)", n)
			} else {
				w.Rules.CycleDelayMs = int64(n)
			}
		}
	}
	if v, ok := f["maxConsecutivePhases"]; ok {
		if n, ok := p.num(v, "/rules/maxConsecutivePhases"); ok {
			if n < 0 || n != math.Trunc(n) || n > 1e6 {
				p.errorf(CodeRule, "/rules/maxConsecutivePhases", "rules.maxConsecutivePhases is %v; it must be a whole number, 0 to turn the check off", n)
			} else {
				w.Rules.MaxConsecutivePhases = int(n)
			}
		}
	}
	if v, ok := f["rateLimitThreshold"]; ok {
		if n, ok := p.num(v, "/rules/rateLimitThreshold"); ok {
			w.Rules.RateLimitThreshold = &n
		}
	}
	if v, ok := f["rateLimitPollIntervalMs"]; ok {
		if n, ok := p.num(v, "/rules/rateLimitPollIntervalMs"); ok {
			i := int64(n)
			w.Rules.RateLimitPollIntervalMs = &i
		}
	}
}

func (p *parser) prioritizer(w *Workflow, raw json.RawMessage) {
	pm, ok := p.object(raw, "/prioritizer", "prioritizer")
	if !ok {
		return
	}
	f := p.fields(pm, "/prioritizer", "agent", "labels", "defaultLabel")
	pr := &Prioritizer{}
	if v, ok := f["agent"]; ok {
		pr.Agent, _ = p.str(v, "/prioritizer/agent")
	} else {
		p.errorf(CodeRequired, "/prioritizer", "prioritizer has no \"agent\"")
	}
	if v, ok := f["labels"]; ok {
		var labels []string
		if err := json.Unmarshal(v, &labels); err != nil {
			p.errorf(CodeType, "/prioritizer/labels", "prioritizer.labels must be an array of strings")
		} else if len(labels) == 0 {
			p.errorf(CodeEmpty, "/prioritizer/labels", "prioritizer.labels is empty")
		}
		pr.Labels = labels
	} else {
		p.errorf(CodeRequired, "/prioritizer", "prioritizer has no \"labels\" (the priority labels, most urgent first)")
	}
	if v, ok := f["defaultLabel"]; ok {
		pr.DefaultLabel, _ = p.str(v, "/prioritizer/defaultLabel")
	}
	w.Prioritizer = pr
}

func (p *parser) handoffs(w *Workflow, raw json.RawMessage) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.errorf(CodeType, "/handoffs", "handoffs must be an array, not %s", jsonKind(raw))
		return
	}
	seen := map[string]bool{}
	for i, item := range items {
		ptr := "/handoffs/" + strconv.Itoa(i)
		hm, ok := p.object(item, ptr, "a handoff")
		if !ok {
			continue
		}
		f := p.fields(hm, ptr, "id", "when", "emit", "payloadFrom", "persistPayloadTo")
		for _, req := range []string{"id", "when", "emit", "payloadFrom", "persistPayloadTo"} {
			if _, ok := f[req]; !ok {
				p.errorf(CodeRequired, ptr, "handoff %d has no %q", i, req)
			}
		}
		h := Handoff{}
		if v, ok := f["id"]; ok {
			if s, ok := p.str(v, ptr+"/id"); ok {
				h.ID = s
				if !handoffID.MatchString(s) {
					p.errorf(CodeHandoff, ptr+"/id", "handoff id %q must be lower-case kebab-case starting with a letter", s)
				}
				if seen[s] {
					p.errorf(CodeHandoff, ptr+"/id", "handoff id %q is used twice", s)
				}
				seen[s] = true
			}
		}
		p.handoffWhen(f, ptr, &h)
		p.handoffEmit(f, ptr, &h)
		if v, ok := f["payloadFrom"]; ok {
			kept, _ := p.strMap(v, ptr+"/payloadFrom", "payloadFrom")
			for _, m := range kept {
				var s string
				_ = json.Unmarshal(m.Value, &s)
				h.PayloadFrom = append(h.PayloadFrom, PayloadField{Key: m.Name, Expr: s})
				if msg := checkExpr(s); msg != "" {
					p.errorf(CodeHandoff, ptr+"/payloadFrom/"+escape(m.Name), "payloadFrom %s: %s", m.Name, msg)
				}
			}
		}
		if v, ok := f["persistPayloadTo"]; ok {
			if s, ok := p.str(v, ptr+"/persistPayloadTo"); ok {
				if s != "subjectStore" && s != "none" {
					p.errorf(CodeHandoff, ptr+"/persistPayloadTo", "persistPayloadTo is %q; it must be subjectStore or none", s)
				}
				h.PersistPayloadTo = s
			}
		}
		w.Handoffs = append(w.Handoffs, h)
	}
}

// handoffWhen reads a handoff's when: the agent and outcome it follows.
func (p *parser) handoffWhen(f map[string]json.RawMessage, ptr string, h *Handoff) {
	if v, ok := f["when"]; ok {
		if wm, ok := p.object(v, ptr+"/when", "when"); ok {
			wf := p.fields(wm, ptr+"/when", "fromAgent", "outcome")
			if x, ok := wf["fromAgent"]; ok {
				h.FromAgent, _ = p.str(x, ptr+"/when/fromAgent")
			} else {
				p.errorf(CodeRequired, ptr+"/when", "when has no \"fromAgent\"")
			}
			if x, ok := wf["outcome"]; ok {
				h.Outcome, _ = p.str(x, ptr+"/when/outcome")
			} else {
				p.errorf(CodeRequired, ptr+"/when", "when has no \"outcome\"")
			}
		}
	}
}

// handoffEmit reads what a handoff emits: its type, schema and path.
func (p *parser) handoffEmit(f map[string]json.RawMessage, ptr string, h *Handoff) {
	if v, ok := f["emit"]; ok {
		if em, ok := p.object(v, ptr+"/emit", "emit"); ok {
			ef := p.fields(em, ptr+"/emit", "type", "schemaRef", "path")
			for _, req := range []string{"type", "schemaRef", "path"} {
				if _, ok := ef[req]; !ok {
					p.errorf(CodeRequired, ptr+"/emit", "emit has no %q", req)
				}
			}
			if x, ok := ef["type"]; ok {
				h.EmitType, _ = p.str(x, ptr+"/emit/type")
			}
			if x, ok := ef["schemaRef"]; ok {
				h.SchemaRef, _ = p.str(x, ptr+"/emit/schemaRef")
			}
			if x, ok := ef["path"]; ok {
				h.EmitPath, _ = p.str(x, ptr+"/emit/path")
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// escape is a JSON pointer reference token.
func escape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
