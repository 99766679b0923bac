package completion

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/config"
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
func Types() []string {
	return []string{TypeIterationBudget, TypeKeyword, TypeComposite, TypeStepFlow,
		TypeStructured, TypeExternalState, TypeSignal, TypeCustom}
}

// Deps are what FromConfig needs beyond the configuration itself.
type Deps struct {
	// HasValidator reports whether a validator name is declared (the
	// registry's validators); nil accepts every name.
	HasValidator func(name string) bool
	// Handlers are custom completion handlers of this agent by name; they
	// win over the ones registered with RegisterHandler.
	Handlers map[string]HandlerFactory
	// WorkDir is where external commands (gh) run.
	WorkDir string
	// Params are the agent's parameter values; "${name}" in string options
	// (e.g. externalState "number": "${issue}") is replaced by them.
	Params map[string]string
	// File names agent.json in errors (default "agent.json").
	File string
}

// FromConfig builds the handler tree of agent.json's runner.completion.
// Errors are CONFIG_INVALID with the file, the JSON pointer of the bad
// entry and a hint.
//
// Handlers only say whether the model declared or reached completion;
// runner.completion.validators, whatever the type, are run by the verdict
// stage (package verdict) before the run completes.
func FromConfig(cfg config.Completion, deps Deps) (Handler, error) {
	if deps.File == "" {
		deps.File = config.AgentFile
	}
	const ptr = "/runner/completion"
	for i, v := range cfg.Validators {
		if v == "" {
			return nil, configErr(deps.File, fmt.Sprintf("%s/validators/%d", ptr, i), "name a validator of steps_registry.json", "empty validator name")
		}
		if deps.HasValidator != nil && !deps.HasValidator(v) {
			return nil, configErr(deps.File, fmt.Sprintf("%s/validators/%d", ptr, i), "declare it under \"validators\" in steps_registry.json",
				"validator %q is not declared", v)
		}
	}
	h, err := build(cfg, deps, ptr)
	if err != nil {
		return nil, err
	}
	if v, ok := h.(EveryIterationVerifier); ok && v.VerifyEveryIteration() && len(cfg.Validators) == 0 {
		return nil, configErr(deps.File, ptr+"/options/acceptUndeclared", "name the validators to check in \"validators\"",
			"acceptUndeclared needs validators")
	}
	return h, nil
}

func configErr(file, ptr, hint, format string, args ...any) error {
	return &agenterr.Error{Code: agenterr.CodeConfigurationValidation, Layer: agenterr.LayerConfiguration,
		Message: fmt.Sprintf(format, args...), File: file, Pointer: ptr, Hint: hint}
}

func build(cfg config.Completion, deps Deps, ptr string) (Handler, error) {
	bad := func(field, hint, format string, args ...any) error {
		p := ptr
		if field != "" {
			p += "/" + field
		}
		return configErr(deps.File, p, hint, format, args...)
	}
	opts := options{raw: cfg.Options, params: deps.Params}
	switch cfg.Type {
	case TypeIterationBudget:
		if cfg.MaxIterations <= 0 {
			return nil, bad("maxIterations", "set maxIterations to the number of iterations to run, e.g. 3",
				"iterationBudget needs maxIterations > 0, got %d", cfg.MaxIterations)
		}
		return &IterationBudget{Max: cfg.MaxIterations}, nil
	case TypeKeyword:
		if cfg.Keyword == "" {
			return nil, bad("keyword", `set "keyword", e.g. "TASK_COMPLETE"`, "keyword completion needs a keyword")
		}
		return &Keyword{Keyword: cfg.Keyword}, nil
	case TypeStepFlow:
		return &StepFlow{}, nil
	case TypeComposite:
		mode := Mode(cfg.Mode)
		if mode != ModeAny && mode != ModeAll {
			return nil, bad("mode", `use "any" (one condition suffices) or "all" (every condition)`,
				"composite mode must be \"any\" or \"all\", got %q", cfg.Mode)
		}
		if len(cfg.Conditions) == 0 {
			return nil, bad("conditions", "list at least one condition", "composite completion has no conditions")
		}
		c := &Composite{Mode: mode}
		seen := map[string]int{}
		for i, sub := range cfg.Conditions {
			sp := fmt.Sprintf("conditions/%d", i)
			if len(sub.Validators) > 0 {
				return nil, bad(sp+"/validators", "list the validators on the composite itself (runner.completion.validators): they verify whatever completes the run",
					"a composite condition cannot have validators of its own")
			}
			if _, set := sub.Options["acceptUndeclared"]; set {
				return nil, bad(sp+"/options/acceptUndeclared", "set acceptUndeclared on a top-level structured completion",
					"acceptUndeclared is not supported inside a composite")
			}
			h, err := build(sub, deps, ptr+"/"+sp)
			if err != nil {
				return nil, err
			}
			name := sub.Name
			if name == "" {
				name = fmt.Sprintf("%s#%d", sub.Type, i)
			}
			if j, dup := seen[name]; dup {
				return nil, bad(fmt.Sprintf("conditions/%d/name", i), "give each condition a distinct name",
					"condition name %q is already used by condition %d", name, j)
			}
			seen[name] = i
			c.Conditions = append(c.Conditions, Condition{Name: name, Handler: h})
		}
		return c, nil
	case TypeStructured:
		h := &Declared{Keyword: cfg.Keyword}
		if k := opts.unknown("statusField", "nextActionField", "acceptUndeclared"); k != "" {
			return nil, bad("options/"+k, "use statusField, nextActionField or acceptUndeclared", "structured completion has no option %q", k)
		}
		var err error
		if h.Fields.Status, err = opts.str("statusField"); err != nil {
			return nil, bad("options/statusField", "use a dot path such as \"status\"", "%v", err)
		}
		if h.Fields.NextAction, err = opts.str("nextActionField"); err != nil {
			return nil, bad("options/nextActionField", "use a dot path such as \"next_action\"", "%v", err)
		}
		if h.AcceptUndeclared, err = opts.boolean("acceptUndeclared"); err != nil {
			return nil, bad("options/acceptUndeclared", "use true or false", "%v", err)
		}
		return h, nil
	case TypeExternalState:
		h := &ExternalState{WorkDir: deps.WorkDir}
		if k := opts.unknown("resource", "number", "repo", "state"); k != "" {
			return nil, bad("options/"+k, "use resource, number, repo or state", "externalState completion has no option %q", k)
		}
		var err error
		if h.Resource, err = opts.str("resource"); err != nil {
			return nil, bad("options/resource", `use "issue" or "pr"`, "%v", err)
		}
		if h.Resource != "" && h.Resource != "issue" && h.Resource != "pr" {
			return nil, bad("options/resource", `use "issue" or "pr"`, "unknown resource %q", h.Resource)
		}
		if h.Number, err = opts.integer("number"); err != nil || h.Number <= 0 {
			if err == nil {
				err = fmt.Errorf("number must be > 0, got %d", h.Number)
			}
			return nil, bad("options/number", `set "number" to the issue number or "${param}" naming a parameter`, "%v", err)
		}
		if h.Repo, err = opts.str("repo"); err != nil {
			return nil, bad("options/repo", `use "OWNER/REPO"`, "%v", err)
		}
		if h.State, err = opts.str("state"); err != nil {
			return nil, bad("options/state", `use a gh state such as "CLOSED"`, "%v", err)
		}
		return h, nil
	case TypeSignal:
		if k := opts.unknown("signalType", "requiredFields"); k != "" {
			return nil, bad("options/"+k, "use signalType or requiredFields", "signal completion has no option %q", k)
		}
		h := &FenceSignal{}
		var err error
		if h.SignalType, err = opts.str("signalType"); err != nil || h.SignalType == "" {
			if err == nil {
				err = fmt.Errorf("option \"signalType\" is missing")
			}
			return nil, bad("options/signalType", "set signalType to the fence tag the model writes, e.g. \"task-complete\"", "%v", err)
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
				return nil, bad("options/requiredFields", `list field names (["summary"]) or give values to match ({"result": "complete"})`,
					"requiredFields must be an array of names or an object")
			}
		}
		return h, nil
	case TypeCustom:
		f, ok := deps.Handlers[cfg.Handler]
		if !ok {
			f, ok = lookupHandler(cfg.Handler)
		}
		if !ok {
			return nil, bad("handler", "give it to the agent in Go (agent.Config.CompletionHandlers) or register it with completion.RegisterHandler; known: "+strings.Join(CustomHandlers(), ", "),
				"unknown custom completion handler %q", cfg.Handler)
		}
		h, err := f(cfg, deps)
		if err != nil {
			return nil, bad("", "", "custom handler %q: %v", cfg.Handler, err)
		}
		if h == nil {
			return nil, bad("handler", "", "custom handler factory %q returned no handler", cfg.Handler)
		}
		return h, nil
	case "":
		return nil, bad("type", "set type to one of: "+strings.Join(Types(), ", "), "completion type is missing")
	default:
		return nil, bad("type", "use one of: "+strings.Join(Types(), ", "), "unknown completion type %q", cfg.Type)
	}
}

// options reads handler-specific settings, substituting "${param}".
type options struct {
	raw    map[string]json.RawMessage
	params map[string]string
}

// unknown returns an option key that is not one of known ("" when all
// are known), the first in sorted order.
func (o options) unknown(known ...string) string {
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

func (o options) str(key string) (string, error) {
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

func (o options) boolean(key string) (bool, error) {
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

func (o options) integer(key string) (int, error) {
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
func (o options) expand(s string) (string, error) {
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
