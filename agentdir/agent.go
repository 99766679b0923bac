package agentdir

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/agenterr"
)

// Agent is a loaded, defaulted and validated agent folder. Only LoadAndValidate makes one, so an *Agent is
// valid by construction; its accessors return copies, so it stays valid.
type Agent struct {
	dir      string
	def      Definition
	reg      Registry
	warnings []Problem

	// shared is the one read-only copy Shared hands out, made on first use.
	sharedOnce sync.Once
	sharedDef  *Definition
	sharedReg  *Registry
}

// LoadAndValidate loads an agent folder, applies its defaults and validates
// it (Load, ApplyDefaults, Validate). Load errors are returned as they are (CONFIG_NOT_FOUND,
// CONFIG_PARSE); validation errors as a *ValidationError (errors.Is
// agenterr.ErrConfigurationValidation) listing every problem. Warnings are
// kept on the Agent (Warnings) for the caller to log.
func LoadAndValidate(dir string, opts ValidateOptions) (*Agent, error) {
	return LoadAndValidateFS(nil, dir, opts)
}

// LoadAndValidateFS is LoadAndValidate reading the agent's files from fsys
// (see LoadFS); file checks of Validate look in fsys too.
func LoadAndValidateFS(fsys fs.FS, dir string, opts ValidateOptions) (*Agent, error) {
	def, reg, res, err := check(fsys, dir, opts)
	if err != nil {
		return nil, err
	}
	if !res.Valid() {
		return nil, newValidationError(res)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return &Agent{dir: abs, def: *def, reg: *reg, warnings: res.Warnings()}, nil
}

// NewAgent validates a definition built in Go (for embedding capstan as a
// library) the way LoadAndValidate validates files: ApplyDefaults on copies
// of def and reg, Validate, *ValidationError when invalid. dir is the agent
// folder that relative paths (prompts, schemas, skills) are resolved
// against; file checks are skipped when it is "". Problems carry no
// line:col (there is no file).
func NewAgent(dir string, def *Definition, reg *Registry, opts ValidateOptions) (*Agent, error) {
	return NewAgentFS(nil, dir, def, reg, opts)
}

// NewAgentFS is NewAgent with the agent's files — prompts, schemas, skills,
// script files; everything but agent.json and the registry, which are def
// and reg — in fsys (paths relative to the agent folder, "/"-separated),
// such as a Snapshot made from Go values. File checks look in
// fsys, and the Agent's FS is fsys. A nil fsys is NewAgent.
func NewAgentFS(fsys fs.FS, dir string, def *Definition, reg *Registry, opts ValidateOptions) (*Agent, error) {
	if def == nil || reg == nil {
		return nil, agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"NewAgent needs a definition and a registry")
	}
	d, r := clone(*def), clone(*reg)
	d.src, r.src = def.src, reg.src
	d.files = def.files
	if fsys != nil {
		d.files = fsys
	}
	ApplyDefaults(&d, &r)
	if opts.Dir == "" {
		opts.Dir = dir
	}
	res := Validate(&d, &r, opts)
	if !res.Valid() {
		return nil, newValidationError(res)
	}
	abs := dir
	if dir != "" {
		if a, err := filepath.Abs(dir); err == nil {
			abs = a
		}
	}
	return &Agent{dir: abs, def: d, reg: r, warnings: res.Warnings()}, nil
}

// Check is what `capstan validate` runs: Load, ApplyDefaults and Validate,
// with load failures (missing file, broken JSON) reported as problems whose
// code is CONFIG_NOT_FOUND, CONFIG_PARSE or CONFIG_INVALID.
func Check(dir string, opts ValidateOptions) ValidationResult {
	return CheckFS(nil, dir, opts)
}

// CheckFS is Check reading the agent's files from fsys (see LoadFS).
func CheckFS(fsys fs.FS, dir string, opts ValidateOptions) ValidationResult {
	_, _, res, err := check(fsys, dir, opts)
	if err != nil {
		return NewValidationResult(ProblemFromError(err))
	}
	return res
}

// CheckLoaded is CheckFS for an agent.json and a steps registry that
// LoadFS has already read and decoded from the files fsys holds, with
// ApplyDefaults applied, as TakeConfigSnapshot returns them with its
// snapshot: it validates def and reg without reading or decoding the files
// again. fsys becomes the definition's FS (Definition.FS), where the file
// checks look. A definition or registry that LoadFS did not make is a
// CONFIG_INVALID problem.
func CheckLoaded(fsys fs.FS, dir string, def *Definition, reg *Registry, opts ValidateOptions) ValidationResult {
	if def == nil || reg == nil || def.src == nil || reg.src == nil {
		return NewValidationResult(ProblemFromError(agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"CheckLoaded needs a definition and a registry loaded by LoadFS")))
	}
	def.src.fsys, reg.src.fsys = fsys, fsys
	return validateDefaulted(dir, def, reg, opts)
}

func check(fsys fs.FS, dir string, opts ValidateOptions) (*Definition, *Registry, ValidationResult, error) {
	def, reg, err := LoadFS(fsys, dir)
	if err != nil {
		return nil, nil, ValidationResult{}, err
	}
	ApplyDefaults(def, reg)
	return def, reg, validateDefaulted(dir, def, reg, opts), nil
}

// validateDefaulted validates a loaded and defaulted agent folder dir.
func validateDefaulted(dir string, def *Definition, reg *Registry, opts ValidateOptions) ValidationResult {
	if opts.Dir == "" {
		opts.Dir = dir
	}
	return Validate(def, reg, opts)
}

// ProblemFromError turns an error into an error-severity Problem, keeping
// the code, file, pointer, position and hint of an *agenterr.Error (the
// problem code of a RuleError).
func ProblemFromError(err error) Problem {
	e := agenterr.From(err)
	if e == nil {
		return Problem{Code: agenterr.CodeConfigurationParse, Severity: SeverityError, Message: err.Error()}
	}
	msg := e.Message
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	code := e.Code
	if rule := ruleOf(err); rule != "" {
		code = rule
	}
	return Problem{Code: code, Severity: SeverityError, File: e.File, Pointer: e.Pointer,
		Line: e.Line, Column: e.Column, Message: msg, Hint: e.Hint}
}

// neededParams maps each parameter named in the uvVariables of a step a
// run can enter from its entry step to the first such step: an optional
// parameter without default that such a step needs must be given (validate
// warns PA-UV-OPTIONAL).
func (a *Agent) neededParams() map[string]string {
	out := map[string]string{}
	seen := Reachable(&a.reg)
	// The entry step first: a parameter the first prompt needs is named
	// with that step, the one a run reaches first.
	order := append([]string{a.reg.EntryStep}, sortedKeys(a.reg.Steps)...)
	for _, id := range order {
		if _, ok := a.reg.Steps[id]; !ok || seen != nil && !seen[id] {
			continue
		}
		for _, uv := range a.reg.Steps[id].UVVariables {
			if _, ok := a.def.Parameters[uv]; ok && out[uv] == "" {
				out[uv] = id
			}
		}
	}
	return out
}

// Dir returns the agent folder (absolute).
func (a *Agent) Dir() string { return a.dir }

// FS returns the files the agent was loaded from by LoadAndValidateFS (a
// pinned definition snapshot), or nil when it was read from disk.
func (a *Agent) FS() fs.FS { return a.def.FS() }

// Definition returns a copy of the validated, defaulted agent.json.
func (a *Agent) Definition() *Definition {
	d := clone(a.def)
	d.src, d.files = a.def.src, a.def.files
	return &d
}

// Registry returns a copy of the validated, defaulted steps registry.
func (a *Agent) Registry() *Registry {
	r := clone(a.reg)
	r.src = a.reg.src
	return &r
}

// Shared returns one copy of the validated, defaulted agent.json and
// steps registry, made on the first call and shared by every caller after
// it: a runtime that builds many agents from one definition keeps it once,
// not once per agent. What it returns is read-only — a caller that needs
// to change something must use Definition or Registry, which copy.
func (a *Agent) Shared() (*Definition, *Registry) {
	a.sharedOnce.Do(func() {
		a.sharedDef, a.sharedReg = a.Definition(), a.Registry()
	})
	return a.sharedDef, a.sharedReg
}

// Warnings returns the validation warnings (unknown keys, unused
// validators, …), for the caller to log.
func (a *Agent) Warnings() []Problem { return slices.Clone(a.warnings) }

// clone deep-copies a configuration value through its JSON form (all
// configuration types round-trip exactly).
func clone[T any](v T) T {
	var out T
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		// Unreachable for validated configuration; keep the shallow copy.
		return v
	}
	return out
}

// Param describes one parameter as a CLI flag, for `capstan run` to
// register and document.
type Param struct {
	Name        string // parameter (and {uv-Name} variable) name
	Flag        string // "--name"
	Type        string // string | number | boolean
	Description string
	Required    bool
	// Default is the default value as a CLI string; HasDefault says whether
	// there is one.
	Default    string
	HasDefault bool
}

// Params lists the agent's parameters sorted by name.
func (a *Agent) Params() []Param {
	out := make([]Param, 0, len(a.def.Parameters))
	for _, name := range sortedKeys(a.def.Parameters) {
		p := a.def.Parameters[name]
		d, msg := "", "absent"
		if len(p.Default) > 0 && string(p.Default) != "null" {
			d, msg = defaultString(p)
		}
		out = append(out, Param{Name: name, Flag: p.Flag(name), Type: p.Type, Description: p.Description,
			Required: p.Required, Default: d, HasDefault: msg == ""})
	}
	return out
}

// ResolveParams maps parameter values to prompt variables: values (keyed by
// parameter name, as given on the command line) become prompt variables
// keyed by parameter name without the "uv-" prefix ({uv-origin} ← "origin").
// Defaults fill parameters not given; number and boolean values are
// type-checked (booleans normalised to "true"/"false", numbers trimmed of
// surrounding spaces); validation min/max/pattern/enum is applied. Optional
// parameters without value or default are absent from the result.
//
// Errors are usage errors (exit 2) naming the flags: PARAM_MISSING when a
// required parameter has no value (or an empty one), PARAM_INVALID when a
// value fails its type or validation, PARAM_UNKNOWN for a name the agent
// does not declare. All problems are reported together.
func (a *Agent) ResolveParams(values map[string]string) (map[string]string, error) {
	out := map[string]string{}
	var missing, invalid, unknown []string
	for _, name := range sortedKeys(values) {
		if _, ok := a.def.Parameters[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	needed := a.neededParams()
	for _, name := range sortedKeys(a.def.Parameters) {
		p := a.def.Parameters[name]
		flag := p.Flag(name)
		v, given := values[name]
		required := p.Required || needed[name] != ""
		if !given {
			if len(p.Default) > 0 && string(p.Default) != "null" {
				d, _ := defaultString(p) // checked by Validate
				out[name] = d
				continue
			}
			if p.Required {
				missing = append(missing, flag)
			} else if step := needed[name]; step != "" {
				missing = append(missing, fmt.Sprintf("%s (step %s uses {uv-%s})", flag, step, name))
			}
			continue
		}
		if required && strings.TrimSpace(v) == "" {
			missing = append(missing, flag)
			continue
		}
		if msg := checkParamValue(p, v); msg != "" {
			invalid = append(invalid, fmt.Sprintf("%s: %s", flag, msg))
			continue
		}
		switch p.Type {
		case "boolean":
			b, _ := strconv.ParseBool(v)
			v = strconv.FormatBool(b)
		case "number":
			v = strings.TrimSpace(v)
		}
		out[name] = v
	}
	if len(missing)+len(invalid)+len(unknown) == 0 {
		return out, nil
	}
	var parts []string
	code := agenterr.CodeParamUnknown
	if len(unknown) > 0 {
		parts = append(parts, "unknown parameter(s) "+strings.Join(unknown, ", "))
	}
	if len(invalid) > 0 {
		code = agenterr.CodeParamInvalid
		parts = append(parts, "invalid value(s): "+strings.Join(invalid, "; "))
	}
	if len(missing) > 0 {
		code = agenterr.CodeParamMissing
		parts = append(parts, "missing required flag(s) "+strings.Join(missing, ", "))
	}
	e := agenterr.New(code, agenterr.LayerConfiguration, false, "%s", strings.Join(parts, "; "))
	e.File = AgentFile
	var flags []string
	for _, p := range a.Params() {
		desc := p.Flag + " (" + p.Type
		if p.Required {
			desc += ", required"
		}
		flags = append(flags, desc+")")
	}
	e.Hint = "this agent's flags: " + strings.Join(flags, ", ")
	if len(flags) == 0 {
		e.Hint = "this agent declares no parameters"
	}
	return nil, e
}
