package verdict

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

// Completion types accepted in agent.json's runner.completion.type.
const (
	TypeIterationBudget = "iterationBudget"
	TypeKeyword         = "keyword"
	TypeComposite       = "composite"
	TypeStepFlow        = "stepFlow"
	TypeStructured      = "structured"
	TypeExternalState   = "externalState"
	TypeSignal          = "signal"
	TypeCustom          = "custom"
)

// Types lists the completion types FromConfig accepts.
func CompletionTypes() []string {
	return []string{TypeIterationBudget, TypeKeyword, TypeComposite, TypeStepFlow,
		TypeStructured, TypeExternalState, TypeSignal, TypeCustom}
}

// Deps are what FromConfig needs beyond the configuration itself.
type HandlerDeps struct {
	// HasValidator reports whether a validator name is declared (the
	// registry's validators); nil accepts every name.
	HasValidator func(name string) bool
	// ValidatorNames are the declared validators, named in hints.
	ValidatorNames []string
	// RegistryFile names the steps registry in hints (default
	// steps_registry.json).
	RegistryFile string
	// Handlers are custom completion handlers of this agent by name
	// (agent.Config.CompletionHandlers).
	Handlers map[string]HandlerFactory
	// Handler is this agent's completion handler as a Go value: the
	// handler of a {"type": "custom"} completion that names no handler.
	Handler CompletionHandler
	// WorkDir is where external commands (gh) run.
	WorkDir string
	// Params are the agent's parameter values; "${name}" in string options
	// (e.g. externalState "number": "${issue}") is replaced by them.
	// Read-only: the agents of one definition may share the map.
	Params map[string]string
	// File names agent.json in errors (default "agent.json").
	File string
}

// FromConfig builds the handler tree of agent.json's runner.completion.
// It is where the rules of runner.completion are checked: every broken
// one is reported, at once (errors.Join), as an *agentdir.RuleError with its
// problem code, the file, the JSON pointer of the bad entry and a hint.
//
// Handlers only say whether the model declared or reached completion;
// runner.completion.validators, whatever the type, are run by the verdict
// stage (package verdict) before the run completes.
func CompletionFromConfig(cfg agentdir.Completion, deps HandlerDeps) (CompletionHandler, error) {
	if deps.File == "" {
		deps.File = agentdir.AgentFile
	}
	if deps.RegistryFile == "" {
		deps.RegistryFile = agentdir.DefaultRegistryFile
	}
	b := &handlerBuilder{deps: deps}
	const ptr = "/runner/completion"
	for i, v := range cfg.Validators {
		if strings.TrimSpace(v) == "" || deps.HasValidator != nil && !deps.HasValidator(v) {
			b.rule("AC-COMPLETION-VALIDATOR", fmt.Sprintf("%s/validators/%d", ptr, i),
				"define it under validators in "+deps.RegistryFile+", or fix the name"+known(deps.ValidatorNames),
				"validator %q does not exist", v)
		}
	}
	h := b.build(cfg, ptr)
	if v, ok := h.(EveryIterationVerifier); ok && v.VerifyEveryIteration() && len(cfg.Validators) == 0 {
		b.bad(ptr+"/options/acceptUndeclared", "name the validators to check in \"validators\"",
			"acceptUndeclared needs validators")
	}
	if deps.Handler != nil && !b.usedHandler {
		b.bad(ptr+"/type", `set "type": "custom" without a "handler" to use the completion handler given in Go`,
			"the agent was given a completion handler in Go (agent.Config.Completion), but runner.completion does not use it")
	}
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	return h, nil
}

// known lists names for a hint.
func known(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (known: " + strings.Join(names, ", ") + ")"
}

// builder builds a handler tree, collecting every broken rule.
type handlerBuilder struct {
	deps        HandlerDeps
	errs        []error
	usedHandler bool
}

// rule records a broken rule with a problem code.
func (b *handlerBuilder) rule(code, ptr, hint, format string, args ...any) {
	b.errs = append(b.errs, agentdir.Rule(code, b.deps.File, ptr, hint, format, args...))
}

// bad records a broken rule without a code of its own (CONFIG_INVALID).
func (b *handlerBuilder) bad(ptr, hint, format string, args ...any) {
	b.errs = append(b.errs, &agenterr.Error{Code: agenterr.CodeConfigurationValidation, Layer: agenterr.LayerConfiguration,
		Message: fmt.Sprintf(format, args...), File: b.deps.File, Pointer: ptr, Hint: hint})
}

// build returns the handler of cfg at ptr, nil when cfg breaks a rule.
func (b *handlerBuilder) build(cfg agentdir.Completion, ptr string) CompletionHandler {
	at := func(field string) string {
		if field == "" {
			return ptr
		}
		return ptr + "/" + field
	}
	switch cfg.Type {
	case TypeIterationBudget:
		if cfg.MaxIterations <= 0 {
			b.rule("AC-COMPLETION-MAX-ITERATIONS", at("maxIterations"),
				"set maxIterations to the number of iterations after which the run is complete",
				"completion type iterationBudget needs maxIterations > 0, got %d", cfg.MaxIterations)
			return nil
		}
		return &IterationBudget{Max: cfg.MaxIterations}
	case TypeKeyword:
		if strings.TrimSpace(cfg.Keyword) == "" {
			b.rule("AC-COMPLETION-KEYWORD", at("keyword"),
				"set keyword, e.g. \"TASK_COMPLETE\", and tell the model in its prompt to say it when done",
				"completion type keyword needs a keyword")
			return nil
		}
		return &Keyword{Keyword: cfg.Keyword}
	case TypeStepFlow:
		return &StepFlow{}
	case TypeComposite:
		return b.composite(cfg, at)
	case TypeStructured:
		return b.structured(cfg, at)
	case TypeExternalState:
		return b.externalState(cfg, at)
	case TypeSignal:
		return b.signal(cfg, at)
	case TypeCustom:
		return b.custom(cfg, at)
	case "":
		b.bad(at("type"), "set type to one of: "+strings.Join(CompletionTypes(), ", "), "completion type is missing")
	default:
		b.bad(at("type"), "use one of: "+strings.Join(CompletionTypes(), ", "), "unknown completion type %q", cfg.Type)
	}
	return nil
}

// composite builds a composite handler and its conditions' handlers; nil
// when a rule is broken.
func (b *handlerBuilder) composite(cfg agentdir.Completion, at func(string) string) CompletionHandler {
	n := len(b.errs)
	mode := CompositeMode(cfg.Mode)
	if mode != CompositeAny && mode != CompositeAll {
		b.rule("AC-COMPLETION-MODE", at("mode"), `set mode to "any" (one condition suffices) or "all" (every condition)`,
			"completion type composite needs mode any or all, got %q", cfg.Mode)
	}
	if len(cfg.Conditions) == 0 {
		b.rule("AC-COMPLETION-CONDITIONS", at("conditions"), `list at least one condition, e.g. [{"type":"keyword","keyword":"DONE"}]`,
			"completion type composite needs at least one condition")
	}
	c := &Composite{Mode: mode}
	seen := map[string]int{}
	for i, sub := range cfg.Conditions {
		sp := fmt.Sprintf("conditions/%d", i)
		if len(sub.Validators) > 0 {
			b.bad(at(sp+"/validators"), "list the validators on the composite itself (runner.completion.validators): they verify whatever completes the run",
				"a composite condition cannot have validators of its own")
		}
		if _, set := sub.Options["acceptUndeclared"]; set {
			b.bad(at(sp+"/options/acceptUndeclared"), "set acceptUndeclared on a top-level structured completion",
				"acceptUndeclared is not supported inside a composite")
		}
		h := b.build(sub, at(sp))
		name := sub.Name
		if name == "" {
			name = fmt.Sprintf("%s#%d", sub.Type, i)
		}
		if j, dup := seen[name]; dup {
			b.rule("AC-COMPLETION-NAME", at(sp+"/name"), "give every condition of a composite its own name",
				"condition name %q is already used by condition %d of this composite", name, j)
		}
		seen[name] = i
		c.Conditions = append(c.Conditions, CompositeCondition{Name: name, Handler: h})
	}
	if len(b.errs) > n {
		return nil
	}
	return c
}

// options are cfg's options, with parameters substituted; an option not
// in known is reported as a broken rule of completion type typ.
func (b *handlerBuilder) options(cfg agentdir.Completion, at func(string) string, typ string, known ...string) handlerOptions {
	opts := handlerOptions{raw: cfg.Options, params: b.deps.Params}
	if k := opts.unknown(known...); k != "" {
		last := len(known) - 1
		b.bad(at("options/"+k), "use "+strings.Join(known[:last], ", ")+" or "+known[last], "%s completion has no option %q", typ, k)
	}
	return opts
}

// structured builds a structured (declared) handler from its options;
// nil when a rule is broken.
func (b *handlerBuilder) structured(cfg agentdir.Completion, at func(string) string) CompletionHandler {
	n := len(b.errs)
	opts := b.options(cfg, at, "structured", "statusField", "nextActionField", "acceptUndeclared")
	h := &Declared{Keyword: cfg.Keyword}
	var err error
	if h.Fields.Status, err = opts.str("statusField"); err != nil {
		b.bad(at("options/statusField"), "use a dot path such as \"status\"", "%v", err)
	}
	if h.Fields.NextAction, err = opts.str("nextActionField"); err != nil {
		b.bad(at("options/nextActionField"), "use a dot path such as \"next_action\"", "%v", err)
	}
	if h.AcceptUndeclared, err = opts.boolean("acceptUndeclared"); err != nil {
		b.bad(at("options/acceptUndeclared"), "use true or false", "%v", err)
	}
	if len(b.errs) > n {
		return nil
	}
	return h
}

// externalState builds a handler that completes when an issue or pull
// request reaches a state; nil when a rule is broken.
func (b *handlerBuilder) externalState(cfg agentdir.Completion, at func(string) string) CompletionHandler {
	n := len(b.errs)
	opts := b.options(cfg, at, "externalState", "resource", "number", "repo", "state")
	h := &ExternalState{WorkDir: b.deps.WorkDir}
	var err error
	if h.Resource, err = opts.str("resource"); err != nil {
		b.bad(at("options/resource"), `use "issue" or "pr"`, "%v", err)
	} else if h.Resource != "" && h.Resource != "issue" && h.Resource != "pr" {
		b.bad(at("options/resource"), `use "issue" or "pr"`, "unknown resource %q", h.Resource)
	}
	if h.Number, err = opts.integer("number"); err != nil || h.Number <= 0 {
		if err == nil {
			err = fmt.Errorf("number must be > 0, got %d", h.Number)
		}
		b.bad(at("options/number"), `set "number" to the issue number or "${param}" naming a parameter`, "%v", err)
	}
	if h.Repo, err = opts.str("repo"); err != nil {
		b.bad(at("options/repo"), `use "OWNER/REPO"`, "%v", err)
	}
	if h.State, err = opts.str("state"); err != nil {
		b.bad(at("options/state"), `use a gh state such as "CLOSED"`, "%v", err)
	}
	if len(b.errs) > n {
		return nil
	}
	return h
}

// signal builds a handler that completes on a fenced signal block; nil
// when a rule is broken.
func (b *handlerBuilder) signal(cfg agentdir.Completion, at func(string) string) CompletionHandler {
	n := len(b.errs)
	opts := b.options(cfg, at, "signal", "signalType", "requiredFields")
	h := &FenceSignal{}
	var err error
	if h.SignalType, err = opts.str("signalType"); err != nil || h.SignalType == "" {
		if err == nil {
			err = fmt.Errorf("option \"signalType\" is missing")
		}
		b.bad(at("options/signalType"), "set signalType to the fence tag the model writes, e.g. \"task-complete\"", "%v", err)
	}
	if raw, ok := cfg.Options["requiredFields"]; ok {
		var names []string
		var values map[string]any
		switch {
		case json.Unmarshal(raw, &names) == nil:
			h.Names = names
		case json.Unmarshal(raw, &values) == nil:
			h.Values = values
		default:
			b.bad(at("options/requiredFields"), `list field names (["summary"]) or give values to match ({"result": "complete"})`,
				"requiredFields must be an array of names or an object")
		}
	}
	if len(b.errs) > n {
		return nil
	}
	return h
}

// custom builds a custom handler: the agent's Go value when cfg names no
// handler, else the named factory (the agent's, then the registered one).
func (b *handlerBuilder) custom(cfg agentdir.Completion, at func(string) string) CompletionHandler {
	name := strings.TrimSpace(cfg.Handler)
	if name == "" {
		if b.deps.Handler == nil {
			b.rule("AC-COMPLETION-HANDLER", at("handler"),
				"set handler to the name of a Go handler (agent.Config.CompletionHandlers), or give the agent its handler as a value (agent.Config.Completion)",
				"completion type custom needs a handler")
			return nil
		}
		b.usedHandler = true
		return b.deps.Handler
	}
	if b.deps.Handler != nil {
		b.rule("AC-COMPLETION-HANDLER", at("handler"),
			"remove handler to use the handler given in Go (agent.Config.Completion), or do not give one",
			"handler %q is named, but the agent was also given a completion handler in Go", name)
		return nil
	}
	f, ok := b.deps.Handlers[name]
	if !ok {
		names := slices.Sorted(maps.Keys(b.deps.Handlers))
		b.rule("AC-COMPLETION-HANDLER", at("handler"),
			"give it to the agent in Go (agent.Config.CompletionHandlers)"+known(names),
			"unknown custom completion handler %q", name)
		return nil
	}
	h, err := f(cfg, b.deps)
	if err != nil {
		b.bad(at(""), "", "custom handler %q: %v", name, err)
		return nil
	}
	if h == nil {
		b.bad(at("handler"), "", "custom handler factory %q returned no handler", name)
	}
	return h
}

// options reads handler-specific settings, substituting "${param}".
type handlerOptions struct {
	raw    map[string]json.RawMessage
	params map[string]string
}

// unknown returns an option key that is not one of known ("" when all
// are known), the first in sorted order.
func (o handlerOptions) unknown(known ...string) string {
	keys := make([]string, 0, len(o.raw))
	for k := range o.raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return k
		}
	}
	return ""
}

func (o handlerOptions) str(key string) (string, error) {
	raw, ok := o.raw[key]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("option %q must be a string", key)
	}
	return o.expand(s)
}

func (o handlerOptions) boolean(key string) (bool, error) {
	raw, ok := o.raw[key]
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("option %q must be true or false", key)
	}
	return b, nil
}

func (o handlerOptions) integer(key string) (int, error) {
	raw, ok := o.raw[key]
	if !ok {
		return 0, fmt.Errorf("option %q is missing", key)
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	s, err := o.str(key)
	if err != nil {
		return 0, fmt.Errorf("option %q must be an integer or a string", key)
	}
	n, err = strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(s), "#"))
	if err != nil {
		return 0, fmt.Errorf("option %q: %q is not an integer", key, s)
	}
	return n, nil
}

// expand replaces ${name} with the parameter's value; an unknown name is
// an error (no silent empty strings).
func (o handlerOptions) expand(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		name := s[i+2 : i+j]
		v, ok := o.params[name]
		if !ok {
			return "", fmt.Errorf("unknown parameter ${%s}", name)
		}
		b.WriteString(s[:i])
		b.WriteString(v)
		s = s[i+j+1:]
	}
}
