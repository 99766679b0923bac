package agentdir

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// This file maps climpt's spellings of agent.json and steps_registry.json
// (the format of the climpt agent runner) onto capstan's fields, so that one
// internal model serves both. ApplyDefaults fills capstan's field from the
// climpt one when capstan's is unset (or already holds the same value, so
// the mapping is idempotent) and remembers where the value came from, so
// that problems point at the line the user wrote. Validate reports a
// conflict when both spellings are set to different values.

// Flow is climpt's runner.flow.
type Flow struct {
	// SystemPromptPath is runner.systemPromptPath.
	SystemPromptPath string `json:"systemPromptPath,omitempty"`
	// Prompts holds registry (runner.prompts.registry) and fallbackDir
	// (runner.prompts.fallbackDir).
	Prompts *FlowPrompts `json:"prompts,omitempty"`
	// Schemas holds base (runner.schemasDir) and inspection (inert).
	Schemas *FlowSchemas `json:"schemas,omitempty"`
	// DefaultModel is "sonnet", "opus" or "haiku": runner.model
	// "claude-code:<name>" (climpt drives Claude Code).
	DefaultModel string `json:"defaultModel,omitempty"`
	// AskUserAutoResponse is climpt's answer to Claude Code's
	// AskUserQuestion tool; capstan offers no such tool (inert).
	AskUserAutoResponse string `json:"askUserAutoResponse,omitempty"`
}

// FlowPrompts is climpt's runner.flow.prompts.
type FlowPrompts struct {
	Registry    string `json:"registry,omitempty"`
	FallbackDir string `json:"fallbackDir,omitempty"`
}

// FlowSchemas is climpt's runner.flow.schemas.
type FlowSchemas struct {
	Base       string `json:"base,omitempty"`
	Inspection *bool  `json:"inspection,omitempty"`
}

// Verdict is climpt's runner.verdict: how the run decides it is complete.
// ApplyDefaults translates it into runner.completion (see VerdictTypes).
type Verdict struct {
	Type   string        `json:"type"`
	Config VerdictConfig `json:"config,omitzero"`
}

// VerdictConfig is climpt's runner.verdict.config.
type VerdictConfig struct {
	// MaxIterations is the completion threshold of count:iteration and the
	// iteration budget (runner.budgets.maxIterations) of the other types.
	MaxIterations int `json:"maxIterations,omitempty"`
	// VerdictKeyword is detect:keyword's keyword (default TASK_COMPLETE).
	VerdictKeyword string `json:"verdictKeyword,omitempty"`
	// HandlerPath is meta:custom's handler module.
	HandlerPath string `json:"handlerPath,omitempty"`
	// MaxChecks is count:check's number of checks (default 10).
	MaxChecks int `json:"maxChecks,omitempty"`
	// ResourceType, TargetState, IssueParam and Type configure poll:state.
	ResourceType string          `json:"resourceType,omitempty"`
	TargetState  json.RawMessage `json:"targetState,omitempty"`
	IssueParam   string          `json:"issueParam,omitempty"`
	Type         string          `json:"type,omitempty"`
	// Operator (and | or | first) and Conditions configure meta:composite.
	Operator   string    `json:"operator,omitempty"`
	Conditions []Verdict `json:"conditions,omitempty"`
	// SignalType and RequiredFields configure detect:structured.
	SignalType     string          `json:"signalType,omitempty"`
	RequiredFields json.RawMessage `json:"requiredFields,omitempty"`
	// RegistryPath and EntryStep configure detect:graph.
	RegistryPath string `json:"registryPath,omitempty"`
	EntryStep    string `json:"entryStep,omitempty"`
	// IterationParam and CounterParam are accepted by climpt's blueprint
	// and read by nothing (inert).
	IterationParam string `json:"iterationParam,omitempty"`
	CounterParam   string `json:"counterParam,omitempty"`
}

// Climpt verdict types and the completion type each becomes.
const (
	VerdictPollState        = "poll:state"
	VerdictCountIteration   = "count:iteration"
	VerdictCountCheck       = "count:check"
	VerdictDetectKeyword    = "detect:keyword"
	VerdictDetectStructured = "detect:structured"
	VerdictDetectGraph      = "detect:graph"
	VerdictMetaComposite    = "meta:composite"
	VerdictMetaCustom       = "meta:custom"
)

// VerdictTypes maps each climpt verdict type to the runner.completion type
// it is translated into.
func VerdictTypes() map[string]string {
	return map[string]string{
		VerdictPollState:        "externalState",
		VerdictCountIteration:   "iterationBudget",
		VerdictCountCheck:       "iterationBudget",
		VerdictDetectKeyword:    "keyword",
		VerdictDetectStructured: "signal",
		VerdictDetectGraph:      "stepFlow",
		VerdictMetaComposite:    "composite",
		VerdictMetaCustom:       "custom",
	}
}

// Defaults of climpt's verdict handlers.
const (
	// DefaultVerdictMaxIterations is count:iteration's threshold when
	// maxIterations is not set.
	DefaultVerdictMaxIterations = 100
	// DefaultVerdictMaxChecks is count:check's number of checks.
	DefaultVerdictMaxChecks = 10
	// DefaultVerdictKeyword is detect:keyword's keyword.
	DefaultVerdictKeyword = "TASK_COMPLETE"
)

// StandardPathTemplates are the only climpt pathTemplate and
// pathTemplateNoAdaptation values capstan accepts: its own prompt layout.
const (
	StandardPathTemplate             = "{c1}/{c2}/{c3}/f_{edition}_{adaptation}.md"
	StandardPathTemplateNoAdaptation = "{c1}/{c2}/{c3}/f_{edition}.md"
)

// climptModels are the model names climpt accepts (runner.flow.defaultModel,
// a step's model).
var climptModels = []string{"sonnet", "opus", "haiku"}

// ClimptModel turns climpt's model name ("sonnet") into capstan's model
// spec ("claude-code:sonnet").
func ClimptModel(name string) string { return "claude-code:" + name }

// VerdictType returns the climpt verdict type of def: runner.verdict.type,
// or the type a capstan runner.completion corresponds to ("" when none
// does). It keys the registry's entryStepMapping.
func VerdictType(def *Definition) string {
	if def == nil {
		return ""
	}
	if v := def.Runner.Verdict; v != nil && v.Type != "" {
		return v.Type
	}
	switch def.Runner.Completion.Type {
	case "externalState":
		return VerdictPollState
	case "iterationBudget":
		return VerdictCountIteration
	case "keyword":
		return VerdictDetectKeyword
	case "signal":
		return VerdictDetectStructured
	case "stepFlow":
		return VerdictDetectGraph
	case "composite":
		return VerdictMetaComposite
	case "custom":
		return VerdictMetaCustom
	}
	return ""
}

// aliases maps capstan's JSON pointers to the pointers of the climpt
// spelling their value was taken from.
type aliases map[string]string

// set records that canonical's value came from actual.
func (a aliases) set(canonical, actual string) {
	if a != nil && actual != "" && canonical != actual {
		a[canonical] = actual
	}
}

// actual rewrites ptr to the climpt spelling it came from (longest
// recorded prefix), or returns it unchanged.
func (a aliases) actual(ptr string) string {
	best := ""
	for canon := range a {
		if (ptr == canon || strings.HasPrefix(ptr, canon+"/")) && len(canon) > len(best) {
			best = canon
		}
	}
	if best == "" {
		return ptr
	}
	return a[best] + ptr[len(best):]
}

// fillString sets *dst to v (recording the alias) when *dst is unset or
// already v.
func fillString(al aliases, dst *string, v, canonical, actual string) {
	if v == "" || (*dst != "" && *dst != v) {
		return
	}
	*dst = v
	al.set(canonical, actual)
}

// normalizeDefinition fills capstan's fields of d from climpt's spellings.
func normalizeDefinition(d *Definition) {
	al := aliases{}
	r := &d.Runner
	if f := r.Flow; f != nil {
		fillString(al, &r.SystemPromptPath, f.SystemPromptPath, "/runner/systemPromptPath", "/runner/flow/systemPromptPath")
		if p := f.Prompts; p != nil {
			fillString(al, &r.Prompts.Registry, p.Registry, "/runner/prompts/registry", "/runner/flow/prompts/registry")
			fillString(al, &r.Prompts.FallbackDir, p.FallbackDir, "/runner/prompts/fallbackDir", "/runner/flow/prompts/fallbackDir")
		}
		if s := f.Schemas; s != nil {
			fillString(al, &r.SchemasDir, s.Base, "/runner/schemasDir", "/runner/flow/schemas/base")
		}
		if f.DefaultModel != "" {
			fillString(al, &r.Model, ClimptModel(f.DefaultModel), "/runner/model", "/runner/flow/defaultModel")
		}
	}
	if v := r.Verdict; v != nil && v.Type != "" {
		comp := verdictCompletion(*v, d.Parameters, "/runner/completion", "/runner/verdict", al)
		if r.Completion.Type == "" || sameJSON(r.Completion, comp) {
			r.Completion = comp
		} else {
			// Both spellings, different meanings: Validate reports the
			// conflict; no alias, capstan's own field stands.
			for k := range al {
				if strings.HasPrefix(k, "/runner/completion") {
					delete(al, k)
				}
			}
		}
		if n := v.Config.MaxIterations; n > 0 && !slices.Contains([]string{VerdictCountIteration, ""}, v.Type) {
			if r.Budgets.MaxIterations == 0 || r.Budgets.MaxIterations == n {
				r.Budgets.MaxIterations = n
				al.set("/runner/budgets/maxIterations", "/runner/verdict/config/maxIterations")
			}
		}
	}
	if v := r.Verdict; v != nil && v.Type == "" && r.Completion.Type == "" {
		// A verdict without a type (missing, or not a string) is still
		// where the completion is written: a problem of the completion
		// is located there, under the verdict's own schema error.
		al.set("/runner/completion", "/runner/verdict")
	}
	if d.src != nil {
		d.src.aliases = al
	}
}

// verdictCompletion translates a climpt verdict into the completion it
// means; ptr is the completion's pointer, vptr the verdict's. What cannot
// work (meta:custom's TypeScript module, a poll:state resource other than
// an issue) is translated as far as it goes and reported by Validate.
func verdictCompletion(v Verdict, params map[string]Parameter, ptr, vptr string, al aliases) Completion {
	cfg := v.Config
	cp := vptr + "/config"
	al.set(ptr, vptr)
	al.set(ptr+"/type", vptr+"/type")
	switch v.Type {
	case VerdictCountIteration:
		n := cfg.MaxIterations
		if n == 0 {
			n = DefaultVerdictMaxIterations
		}
		al.set(ptr+"/maxIterations", cp+"/maxIterations")
		return Completion{Type: "iterationBudget", MaxIterations: n}
	case VerdictCountCheck:
		n := cfg.MaxChecks
		if n == 0 {
			n = DefaultVerdictMaxChecks
		}
		al.set(ptr+"/maxIterations", cp+"/maxChecks")
		return Completion{Type: "iterationBudget", MaxIterations: n}
	case VerdictDetectKeyword:
		kw := cfg.VerdictKeyword
		if kw == "" {
			kw = DefaultVerdictKeyword
		}
		al.set(ptr+"/keyword", cp+"/verdictKeyword")
		return Completion{Type: "keyword", Keyword: kw}
	case VerdictDetectStructured:
		opts := map[string]json.RawMessage{}
		if cfg.SignalType != "" {
			opts["signalType"], _ = json.Marshal(cfg.SignalType)
		}
		if len(cfg.RequiredFields) > 0 {
			opts["requiredFields"] = cfg.RequiredFields
		}
		al.set(ptr+"/options/signalType", cp+"/signalType")
		al.set(ptr+"/options/requiredFields", cp+"/requiredFields")
		al.set(ptr+"/options", cp)
		return Completion{Type: "signal", Options: opts}
	case VerdictDetectGraph:
		return Completion{Type: "stepFlow"}
	case VerdictPollState:
		return pollStateCompletion(cfg, params, ptr, cp, al)
	case VerdictMetaComposite:
		mode := ""
		switch cfg.Operator {
		case "and":
			mode = "all"
		case "or", "first":
			mode = "any"
		}
		al.set(ptr+"/mode", cp+"/operator")
		al.set(ptr+"/conditions", cp+"/conditions")
		c := Completion{Type: "composite", Mode: mode}
		for i, sub := range cfg.Conditions {
			sp := fmt.Sprintf("%s/conditions/%d", ptr, i)
			c.Conditions = append(c.Conditions, verdictCompletion(sub, params, sp, fmt.Sprintf("%s/conditions/%d", cp, i), al))
		}
		return c
	case VerdictMetaCustom:
		al.set(ptr+"/handler", cp+"/handlerPath")
		return Completion{Type: "custom", Handler: cfg.HandlerPath}
	}
	return Completion{Type: v.Type}
}

// pollStateCompletion is the externalState completion of a poll:state
// verdict: the issue its parameter names, in the state it waits for.
func pollStateCompletion(cfg VerdictConfig, params map[string]Parameter, ptr, cp string, al aliases) Completion {
	param := cfg.IssueParam
	if param == "" {
		param = "issue"
	}
	opts := map[string]json.RawMessage{}
	opts["resource"], _ = json.Marshal("issue")
	if _, ok := params[param]; ok {
		opts["number"], _ = json.Marshal("${" + param + "}")
	}
	if _, ok := params[RepositoryParam]; ok {
		opts["repo"], _ = json.Marshal("${" + RepositoryParam + "}")
	}
	var state string
	if json.Unmarshal(cfg.TargetState, &state) == nil && state != "" {
		opts["state"], _ = json.Marshal(strings.ToUpper(state))
	}
	al.set(ptr+"/options/number", cp+"/issueParam")
	al.set(ptr+"/options/state", cp+"/targetState")
	al.set(ptr+"/options", cp)
	return Completion{Type: "externalState", Options: opts}
}

// normalizeRegistry fills capstan's fields of reg from climpt's spellings:
// failurePatterns into completionPatterns, the entry step from
// entryStepMapping (or detect:graph's config.entryStep), step type
// "prompt" as "normal", a step model "sonnet" / "opus" / "haiku" as
// "claude-code:<name>".
func normalizeRegistry(def *Definition, reg *Registry) {
	al := aliases{}
	for _, name := range sortedKeys(reg.FailurePatterns) {
		p := reg.FailurePatterns[name]
		if have, ok := reg.CompletionPatterns[name]; ok && !sameJSON(have, p) {
			continue // Validate reports the conflict
		}
		if reg.CompletionPatterns == nil {
			reg.CompletionPatterns = map[string]CompletionPattern{}
		}
		reg.CompletionPatterns[name] = p
		al.set(JoinPointer("completionPatterns", name), JoinPointer("failurePatterns", name))
	}
	// climpt takes the mapping's entry before entryStep.
	vt := VerdictType(def)
	if target, ok := reg.EntryStepMapping[vt]; ok && vt != "" && target != "" {
		reg.EntryStep = target
		al.set("/entryStep", JoinPointer("entryStepMapping", vt))
	}
	if v := def.Runner.Verdict; v != nil && v.Type == VerdictDetectGraph && reg.EntryStep == "" && v.Config.EntryStep != "" {
		reg.EntryStep, reg.entryFromVerdict = v.Config.EntryStep, true
	}
	for id, st := range reg.Steps {
		if st.Type == "prompt" {
			st.Type = DefaultStepType
		}
		if slices.Contains(climptModels, st.Model) {
			st.Model = ClimptModel(st.Model)
		}
		reg.Steps[id] = st
	}
	if reg.src != nil {
		reg.src.aliases = al
	}
}

// kebab turns a camelCase or snake_case parameter name into a flag name:
// "iterateMax" → "iterate-max", "issue_number" → "issue-number".
func kebab(name string) string {
	var b strings.Builder
	for i, r := range name {
		switch {
		case r == '_':
			b.WriteByte('-')
		case unicode.IsUpper(r):
			if i > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sameJSON reports whether a and b have the same JSON value (raw options
// compare by value, not by spelling).
func sameJSON(a, b any) bool {
	norm := func(v any) (any, bool) {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, false
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, false
		}
		return out, true
	}
	x, ok1 := norm(a)
	y, ok2 := norm(b)
	return ok1 && ok2 && reflect.DeepEqual(x, y)
}
