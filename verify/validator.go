package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/internal/regularfile"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
	"github.com/capstan-dev/capstan/proc"

	"github.com/capstan-dev/capstan/schema"
)

// Validator defaults.
const (
	DefaultValidatorTimeout = 300 * time.Second
	DefaultOutputCap        = 1 << 20 // bytes kept per stream, half from its start, half from its end
)

// SchemaValidator validates a decoded JSON value against one schema.
type SchemaValidator interface {
	Validate(v any) error
}

// SchemaSource turns a schema reference of steps_registry.json into a
// validator (the schema package's resolver, in capstan).
type SchemaSource interface {
	Schema(ref agentdir.SchemaRef) (SchemaValidator, error)
}

// CustomRequest is what a custom validator is given.
type CustomRequest struct {
	WorkDir    string
	Name       string
	Definition agentdir.Validator
	// Params are the condition's params, decoded.
	Params map[string]any
}

// CustomResult is what a custom validator reports. Output feeds the
// extractors named in extractParams; Params are added to theirs.
type CustomResult struct {
	Valid  bool
	Output event.ValidatorOutput
	Params map[string]any
}

// CustomValidator is a validator written in Go (validator type "custom",
// "handler": name).
type CustomValidator interface {
	Validate(ctx context.Context, req CustomRequest) (CustomResult, error)
}

// ValidatorConfig configures a CompletionValidator.
type ValidatorConfig struct {
	// Validators are steps_registry.json's validators.
	Validators map[string]agentdir.Validator
	// WorkDir is where commands run and file paths are resolved.
	WorkDir string
	// Schemas resolves file validators' schema references; required only
	// when a file validator names a schema.
	Schemas SchemaSource
	// DefaultTimeout bounds a command without timeoutSeconds (default 300 s).
	DefaultTimeout time.Duration
	// OutputCap is the number of bytes kept of each of stdout and stderr
	// (default 1 MiB): the first and the last half of a longer stream.
	OutputCap int
	// Emitter receives a validator.result event per validator run.
	Emitter event.Emitter
	// File names steps_registry.json in errors.
	File string
	// Env is the allow-list of variables commands get besides the minimal
	// base (runner.boundaries.env; see proc.ForCommands).
	Env []string
	// Sandbox, when set, confines every command validator (the agent's
	// runner.boundaries.sandbox, with sandbox.ValidatorLimits() and the
	// run's build cache, sandbox.Cache); nil runs them with the user's
	// rights.
	Sandbox CommandSandbox
	// Git reads the work dir's repository configuration so that the git
	// commands of a command validator (git status) run none of the
	// programs it names (see proc.GitConfigEnv); nil gives them the
	// fixed pins only.
	Git *proc.Git
	// Custom are this agent's Go validators by handler name (validator
	// type "custom"; agent.Config.Validators).
	Custom map[string]CustomValidator
	// Patterns are the registry's completionPatterns: a validator's
	// failurePattern names one of them or a built-in pattern
	// (BuiltinPatterns).
	Patterns map[string]agentdir.CompletionPattern
	// ReportDir is where the directory of report files is made (outside
	// the work dir; "" = the system temp dir). Every command validator's
	// whole standard output is kept there, up to ReportCap, as its report
	// (ValidatorOutput.Report); Close removes it.
	ReportDir string
	// ReportCap bounds each report (default DefaultReportCap).
	ReportCap int64
	// Pins, when set, is the toolchain configuration captured when the
	// run started (PinnedToolchain): its variables come first in every
	// command's environment (Env wins over them), and its files are
	// restored before each command runs.
	Pins PinnedConfig
}

// PinnedConfig is toolchain configuration pinned for the validators.
type PinnedConfig interface {
	// Env are variables naming the pinned files ("GOENV=/…/go.env").
	Env() []string
	// Restore rewrites the pinned files as they were captured.
	Restore() error
}

// CompletionValidator checks the world (commands, files, Go validators) and
// names the failure pattern of the first condition that does not hold.
type CompletionValidator struct {
	cfg ValidatorConfig
	// built holds what NewCompletionValidator made of each definition.
	built map[string]builtValidator
	// reports are the command validators' report files.
	reports *reportFiles
	// infoExclude is the work dir's .git/info/exclude when the validator
	// was made (before the model ran), which a git status validator's
	// hidden-work check compares with.
	infoExclude []byte
}

// Close removes the validators' report files. The validator can still
// run afterwards (it makes new ones).
func (v *CompletionValidator) Close() error {
	return v.reports.close()
}

// builtValidator is what a validator's definition decides before it runs.
type builtValidator struct {
	when   SuccessWhen     // command: the parsed successWhen
	custom CustomValidator // custom: the Go validator of its handler
	schema SchemaValidator // file: the compiled schema, when it names one
}

// NewCompletionValidator returns a validator over cfg.Validators. It is
// where the rules of a validator's definition are checked (the fields its
// type needs and those it does not read, successWhen, the path, the Go
// validator of a handler, the schema, the failure pattern, the
// extractors): every broken one is reported at once (errors.Join), each a
// *agentdir.RuleError with its problem code, or a CONFIG_INVALID
// *agenterr.Error, with the file (cfg.File), the JSON pointer of the bad
// entry and a hint. Only what depends on a condition's {param} values is
// checked when the validator runs (see runFile).
func NewCompletionValidator(cfg ValidatorConfig) (*CompletionValidator, error) {
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultValidatorTimeout
	}
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = DefaultOutputCap
	}
	if cfg.ReportCap <= 0 {
		cfg.ReportCap = DefaultReportCap
	}
	if cfg.Emitter == nil {
		cfg.Emitter = event.Discard
	}
	if cfg.File == "" {
		cfg.File = agentdir.DefaultRegistryFile
	}
	// A copy: what was checked is what runs, whatever the caller does with
	// its map afterwards.
	cfg.Validators = maps.Clone(cfg.Validators)
	v := &CompletionValidator{cfg: cfg, reports: &reportFiles{base: cfg.ReportDir}}
	if cfg.Git != nil && cfg.WorkDir != "" {
		v.infoExclude = proc.GitInfoExclude(cfg.WorkDir)
	}
	if len(cfg.Validators) > 0 { // most agents have none: no empty map then
		v.built = make(map[string]builtValidator, len(cfg.Validators))
	}
	names := make([]string, 0, len(cfg.Validators))
	for name := range cfg.Validators {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		b, bad := v.build(name, cfg.Validators[name])
		errs = append(errs, bad...)
		v.built[name] = b
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return v, nil
}

// invalidSchema returns one SR-SCHEMA-INVALID error per bad keyword, at
// its place in the schema file, when err says validator name's schema ref
// is not a valid JSON Schema; nil for any other error.
func invalidSchema(err error, name string, ref agentdir.SchemaRef) []error {
	var inv *schema.InvalidSchemaError
	if !errors.As(err, &inv) {
		return nil
	}
	out := make([]error, 0, len(inv.Problems))
	for _, p := range inv.Problems {
		re := agentdir.Rule("SR-SCHEMA-INVALID", p.File, p.Pointer, schema.InvalidOneKeywordHint,
			"validator %s: schema %s#%s is not a valid JSON Schema (%s): %s", name, ref.File, ref.Schema, inv.Draft, p.Message)
		re.Err.Line, re.Err.Column = p.Line, p.Column
		out = append(out, re)
	}
	return out
}

// build checks the definition of validator name and makes what it needs
// to run, returning every broken rule.
func (v *CompletionValidator) build(name string, def agentdir.Validator) (builtValidator, []error) {
	var b builtValidator
	var errs []error
	ptr := agentdir.JoinPointer("validators", name)
	rule := func(code, field, hint, format string, args ...any) {
		errs = append(errs, agentdir.Rule(code, v.cfg.File, ptr+"/"+field, hint, format, args...))
	}
	switch def.Type {
	case "command":
		if strings.TrimSpace(def.Command) == "" {
			rule("SR-VALIDATOR-FIELD", "command", "add command, e.g. \"go test -v ./...\"", "a command validator needs command")
		}
	case "file":
		if strings.TrimSpace(def.Path) == "" {
			rule("SR-VALIDATOR-FIELD", "path", "add path, relative to the work dir", "a file validator needs path")
		} else if msg := agentdir.LexicalInside(def.Path); msg != "" {
			// The path after {param} substitution is confined when the
			// validator runs (runFile); this is the path as written.
			rule("SR-PATH-OUTSIDE", "path", "use a path relative to the work dir that stays inside it", "path %q %s", def.Path, msg)
		}
		if ref := def.Schema; ref != nil {
			var err error
			switch {
			case ref.File == "":
				errs = append(errs, configErr(v.cfg.File, ptr+"/schema/file", `name the schema file, e.g. "report.schema.json"`,
					"validator %q names a schema without its file", name))
			case v.cfg.Schemas == nil:
				errs = append(errs, configErr(v.cfg.File, ptr+"/schema", "build the validator with a SchemaSource (ValidatorConfig.Schemas)",
					"validator %q names a schema but no schema source is configured", name))
			default:
				if b.schema, err = v.cfg.Schemas.Schema(*ref); err != nil {
					if bad := invalidSchema(err, name, *ref); len(bad) > 0 {
						errs = append(errs, bad...)
						break
					}
					rule("SR-SCHEMA-UNRESOLVED", "schema",
						"fix the schema file or the reference (file under schemas/, schema a top-level or $defs name or a #/ pointer)",
						"validator %s: schema %s#%s does not resolve: %v", name, ref.File, ref.Schema, err)
				}
			}
		}
	case "custom":
		handler := strings.TrimSpace(def.Handler)
		if handler == "" {
			rule("SR-VALIDATOR-FIELD", "handler", "add handler: the name the Go validator was registered under", "a custom validator needs handler")
			break
		}
		var ok bool
		if b.custom, ok = v.cfg.Custom[def.Handler]; !ok {
			errs = append(errs, configErr(v.cfg.File, ptr+"/handler",
				"give it to the agent in Go (agent.Config.Validators)",
				"validator %q: no Go validator %q", name, def.Handler))
		}
	default:
		errs = append(errs, configErr(v.cfg.File, ptr+"/type", `use "command", "file" or "custom"`,
			"validator %q: unknown type %q", name, def.Type))
	}
	ignoredFields(def, rule)
	if w, err := ParseSuccessWhen(def.SuccessWhen); err != nil {
		rule("SR-SUCCESS-WHEN", "successWhen", `write "empty", "exitCode:N", "contains:TEXT" or "matches:REGEXP"`, "%v", err)
	} else {
		b.when = w
	}
	if _, ok := LookupPattern(v.cfg.Patterns, def.FailurePattern); !ok {
		known := make([]string, 0, len(v.cfg.Patterns))
		for n := range v.cfg.Patterns {
			known = append(known, n)
		}
		sort.Strings(known)
		rule("SR-PATTERN-UNKNOWN", "failurePattern", "define it under completionPatterns (known: "+strings.Join(append(known, BuiltinPatternNames()...), ", ")+")",
			"failure pattern %q does not exist", def.FailurePattern)
	}
	errs = append(errs, v.unknownExtractors(name, def)...)
	return b, errs
}

// ignoredFields reports the fields of a validator its type does not read,
// which would be silently ignored. (A custom validator is given its whole
// definition, so it may read any.)
func ignoredFields(def agentdir.Validator, rule func(code, field, hint, format string, args ...any)) {
	ignored := func(set bool, field, usedBy string) {
		if set {
			rule("SR-IGNORED-FIELD", field, "remove it, or change type to "+usedBy, "%s has no effect on a %s validator", field, def.Type)
		}
	}
	switch def.Type {
	case "command":
		ignored(def.Path != "", "path", "file")
		ignored(def.Schema != nil, "schema", "file")
		ignored(def.Handler != "", "handler", "custom")
	case "file":
		ignored(def.Command != "", "command", "command")
		ignored(def.SuccessWhen != "", "successWhen", "command")
		ignored(def.TimeoutSeconds != 0, "timeoutSeconds", "command")
		ignored(def.Handler != "", "handler", "custom")
	}
}

// unknownExtractors reports the extractParams of a validator that name no
// extractor.
func (v *CompletionValidator) unknownExtractors(name string, def agentdir.Validator) []error {
	var errs []error
	params := make([]string, 0, len(def.ExtractParams))
	for param := range def.ExtractParams {
		params = append(params, param)
	}
	sort.Strings(params)
	for _, param := range params {
		if ex := def.ExtractParams[param]; extractors[ex] == nil {
			errs = append(errs, agentdir.Rule("SR-EXTRACTOR-UNKNOWN", v.cfg.File, agentdir.JoinPointer("validators", name, "extractParams", param),
				"use one of: "+strings.Join(Extractors(), ", "), "unknown extractor %q", ex))
		}
	}
	return errs
}

// Has reports whether the registry declares a validator called name.
func (v *CompletionValidator) Has(name string) bool {
	_, ok := v.cfg.Validators[name]
	return ok
}

// MaxFileSize bounds what a file validator reads to validate content.
const MaxFileSize = 16 << 20

// Validate runs conditions in order and stops at the first that fails. The
// result names that validator's failurePattern and carries the params its
// extractParams extract from its output. A validator named twice runs once (the first condition naming it counts).
// An error means a validator could not be run at all (VALIDATOR_ERROR) or
// ctx ended.
func (v *CompletionValidator) Validate(ctx context.Context, conditions []agentdir.CompletionCondition) (event.ValidationResult, error) {
	res := event.ValidationResult{Valid: true}
	for i, cond := range conditions {
		if slices.Contains(res.Checked, cond.Validator) {
			continue
		}
		def, ok := v.cfg.Validators[cond.Validator]
		if !ok {
			return event.ValidationResult{}, v.configErr("/validators/"+cond.Validator,
				"declare it under \"validators\" in "+v.cfg.File,
				"completion condition %d names unknown validator %q", i, cond.Validator)
		}
		params, err := decodeParams(cond.Params)
		if err != nil {
			return event.ValidationResult{}, v.configErr("/validators/"+cond.Validator, "condition params must be JSON values",
				"completion condition %d (%s): %v", i, cond.Validator, err)
		}
		res.Checked = append(res.Checked, cond.Validator)
		done := v.started(cond.Validator, def, params)
		out, valid, extra, err := v.run(ctx, cond.Validator, def, params)
		done(valid && err == nil)
		if err != nil {
			return event.ValidationResult{}, err
		}
		if def.Type == "command" {
			res.Runs = append(res.Runs, event.ValidatorRun{Validator: cond.Validator, Command: Interpolate(def.Command, params), Output: out})
		}
		ev := event.ValidatorEvent{Validator: cond.Validator, Type: def.Type, Valid: valid, ExitCode: out.ExitCode,
			TimedOut: out.TimedOut, Truncated: out.Truncated, DurationMs: out.DurationMs}
		if !valid {
			ev.Pattern = def.FailurePattern
			ev.Output, ev.OutputOmitted = OutputExcerpt(out)
		}
		v.cfg.Emitter.Emit(ev)
		if valid {
			continue
		}
		p := extract(def, out)
		for k, val := range extra {
			if _, set := p[k]; !set {
				p[k] = val
			}
		}
		res.Valid, res.Pattern, res.Params, res.Validator = false, def.FailurePattern, p, cond.Validator
		o := out
		res.Output = &o
		return res, nil
	}
	return res, nil
}

// RunCommandValidator runs the command of a command validator once, as
// Validate would (same work dir, environment, timeout, output cap and
// redaction), without judging or journaling it: for a baseline taken
// before the first iteration.
func (v *CompletionValidator) RunCommandValidator(ctx context.Context, cond agentdir.CompletionCondition) (event.ValidatorRun, error) {
	return v.RunCommandValidatorIn(ctx, cond, CommandEnv{Pins: v.cfg.Pins})
}

// CommandEnv changes the environment one validator run gets.
type CommandEnv struct {
	// Env is added after the validators' environment (its entries win).
	Env []string
	// Pins replaces the configured pinned toolchain configuration (nil =
	// none).
	Pins PinnedConfig
}

// RunCommandValidatorIn is RunCommandValidator in the environment env
// changes (the clean run after the model's last turn).
func (v *CompletionValidator) RunCommandValidatorIn(ctx context.Context, cond agentdir.CompletionCondition, env CommandEnv) (event.ValidatorRun, error) {
	def, ok := v.cfg.Validators[cond.Validator]
	if !ok || def.Type != "command" {
		return event.ValidatorRun{}, v.configErr("/validators/"+cond.Validator, "name a command validator declared under \"validators\" in "+v.cfg.File,
			"%q is not a command validator", cond.Validator)
	}
	params, err := decodeParams(cond.Params)
	if err != nil {
		return event.ValidatorRun{}, v.configErr("/validators/"+cond.Validator, "condition params must be JSON values", "%s: %v", cond.Validator, err)
	}
	done := v.started(cond.Validator, def, params)
	out, valid, _, err := v.runCommand(ctx, cond.Validator, def, params, env)
	done(valid && err == nil)
	return event.ValidatorRun{Validator: cond.Validator, Command: Interpolate(def.Command, params), Output: out, Passed: valid && err == nil}, err
}

// started emits the activity start of validator name and returns the
// function that emits its end.
func (v *CompletionValidator) started(name string, def agentdir.Validator, params map[string]any) func(ok bool) {
	a := event.Activity{Kind: event.ActivityValidator, Name: name}
	switch def.Type {
	case "command":
		a.Detail = Interpolate(def.Command, params)
	case "file":
		a.Detail = def.Path
	}
	start := time.Now()
	event.EmitActivity(v.cfg.Emitter, event.ActivityStartEvent{Activity: a})
	return func(ok bool) {
		a.Took, a.Failed = time.Since(start), !ok
		event.EmitActivity(v.cfg.Emitter, event.ActivityEndEvent{Activity: a})
	}
}

func (v *CompletionValidator) configErr(ptr, hint, format string, args ...any) error {
	return &agenterr.Error{Code: agenterr.CodeValidator, Layer: agenterr.LayerCompletion,
		Message: fmt.Sprintf(format, args...), File: v.cfg.File, Pointer: ptr, Hint: hint}
}

// extract runs the validator's extractors (NewCompletionValidator checked
// that each exists).
func extract(def agentdir.Validator, out event.ValidatorOutput) map[string]any {
	p := make(map[string]any, len(def.ExtractParams))
	for param, ex := range def.ExtractParams {
		p[param] = extractors[ex](out)
	}
	return p
}

// run executes one validator. extra are params the validator type adds
// on its own (file: path; custom: whatever it returns).
func (v *CompletionValidator) run(ctx context.Context, name string, def agentdir.Validator, params map[string]any) (out event.ValidatorOutput, valid bool, extra map[string]any, err error) {
	switch def.Type {
	case "command":
		return v.runCommand(ctx, name, def, params, CommandEnv{Pins: v.cfg.Pins})
	case "file":
		return v.runFile(name, def, params)
	default: // "custom", the only other type NewCompletionValidator accepts
		start := time.Now()
		r, err := v.built[name].custom.Validate(ctx, CustomRequest{WorkDir: v.cfg.WorkDir, Name: name, Definition: def, Params: params})
		if err != nil {
			return out, false, nil, agenterr.Wrap(err, agenterr.CodeValidator, agenterr.LayerCompletion, false,
				"custom validator %q (%s)", name, def.Handler)
		}
		if r.Output.DurationMs == 0 {
			r.Output.DurationMs = time.Since(start).Milliseconds()
		}
		return r.Output, r.Valid, r.Params, nil
	}
}

func (v *CompletionValidator) runCommand(ctx context.Context, name string, def agentdir.Validator, params map[string]any, over CommandEnv) (event.ValidatorOutput, bool, map[string]any, error) {
	timeout := v.cfg.DefaultTimeout
	if def.TimeoutSeconds > 0 {
		timeout = time.Duration(def.TimeoutSeconds) * time.Second
	}
	command := Interpolate(def.Command, params)
	report, err := v.reports.open(name)
	if err != nil {
		return event.ValidatorOutput{}, false, nil, agenterr.Wrap(err, agenterr.CodeValidator, agenterr.LayerCompletion, false,
			"validator %q: its report file", name)
	}
	rw := &boundedWriter{w: report, left: v.cfg.ReportCap}
	env := append(slices.Clone(v.cfg.Env), over.Env...)
	if pins := over.Pins; pins != nil {
		if err := pins.Restore(); err != nil {
			_ = report.Close()
			return event.ValidatorOutput{}, false, nil, agenterr.Wrap(err, agenterr.CodeValidator, agenterr.LayerCompletion, false,
				"validator %q: the pinned toolchain configuration", name)
		}
		env = append(pins.Env(), env...)
	}
	out, err := RunCommand(ctx, CommandSpec{Command: command, Dir: v.cfg.WorkDir, Timeout: timeout, OutputCap: v.cfg.OutputCap, Env: env,
		Sandbox: v.cfg.Sandbox, Git: v.cfg.Git, Report: rw})
	if cerr := report.Close(); cerr != nil && rw.err == nil {
		rw.err = cerr
	}
	if rw.err == nil {
		out.Report, out.ReportTruncated = report.Name(), rw.cut
	}
	if err != nil {
		return out, false, nil, agenterr.Wrap(err, agenterr.CodeValidator, agenterr.LayerCompletion, false,
			"validator %q could not run %q", name, command)
	}
	met := v.built[name].when.Met(out)
	if met && v.cfg.Git != nil && gitStatusCommand().MatchString(command) {
		met = v.revealHidden(ctx, &out)
	}
	// The output goes to the journal and into retry prompts: no secret
	// value in it.
	out.Stdout, out.Stderr = proc.RedactSecrets(out.Stdout), proc.RedactSecrets(out.Stderr)
	return out, met, nil, nil
}

// gitStatusCommand matches a validator command that is a git status (a
// git-clean validator: git status --porcelain must print nothing).
var gitStatusCommand = lazyre.New(`^\s*git\s+status\b`)

// revealHidden adds to a passing git status validator's output the
// uncommitted work git status did not show — a file marked skip-worktree
// or assume-unchanged that changed, an untracked file a model-added
// .git/info/exclude pattern hides — as the porcelain lines git status
// would have printed (so the git-dirty retry prompt names the paths), with
// a note of what hid each; it reports whether the validator still passes
// (nothing hidden).
func (v *CompletionValidator) revealHidden(ctx context.Context, out *event.ValidatorOutput) bool {
	hidden, err := v.cfg.Git.HiddenChanges(ctx, v.cfg.WorkDir, v.infoExclude)
	if err != nil || len(hidden) == 0 {
		return true
	}
	var lines, notes []string
	for _, h := range hidden {
		lines = append(lines, h.Porcelain(v.cfg.WorkDir))
		notes = append(notes, h.Path+" ("+h.How+")")
	}
	if out.Stdout != "" && !strings.HasSuffix(out.Stdout, "\n") {
		out.Stdout += "\n"
	}
	out.Stdout += strings.Join(lines, "\n") + "\n"
	if out.Stderr != "" && !strings.HasSuffix(out.Stderr, "\n") {
		out.Stderr += "\n"
	}
	out.Stderr += "[capstan: uncommitted work git status does not show: " + strings.Join(notes, ", ") +
		"; undo with git update-index --no-skip-worktree --no-assume-unchanged, or remove the pattern from .git/info/exclude]"
	return false
}

func (v *CompletionValidator) runFile(name string, def agentdir.Validator, params map[string]any) (event.ValidatorOutput, bool, map[string]any, error) {
	start := time.Now()
	rel := InterpolatePlain(def.Path, params)
	fail := func(format string, args ...any) (event.ValidatorOutput, bool, map[string]any, error) {
		msg := fmt.Sprintf(format, args...)
		return event.ValidatorOutput{Stderr: msg, ExitCode: 1, DurationMs: time.Since(start).Milliseconds()},
			false, map[string]any{"path": rel, "error": msg}, nil
	}
	// The path as written is checked by NewCompletionValidator; what its
	// {param} values make of it can only be checked here: not empty, and
	// inside the work dir (confine, which also follows symbolic links).
	if rel == "" {
		return event.ValidatorOutput{}, false, nil, v.configErr("/validators/"+name+"/path", "set the file path, relative to the work dir",
			"validator %q has no path", name)
	}
	full, err := confine(v.cfg.WorkDir, rel)
	if err != nil {
		return event.ValidatorOutput{}, false, nil, &agenterr.Error{Code: agenterr.CodePathEscape, Layer: agenterr.LayerCompletion,
			Message: fmt.Sprintf("validator %q: path %q: %v", name, rel, err), File: v.cfg.File,
			Pointer: "/validators/" + name + "/path", Hint: "file validators check files inside the work dir only"}
	}
	if def.Schema == nil {
		if _, err := os.Stat(full); err != nil {
			return fail("%s does not exist", rel)
		}
		return event.ValidatorOutput{Stdout: rel, DurationMs: time.Since(start).Milliseconds()}, true, map[string]any{"path": rel}, nil
	}
	// The model writes the work dir: the file is opened without blocking
	// (a FIFO put there must not hang the run) and checked and read through
	// the same descriptor, so it cannot be swapped between the two.
	f, info, err := regularfile.Open(os.OpenFile, full)
	var notRegular *regularfile.NotRegularError
	switch {
	case errors.As(err, &notRegular) && notRegular.Info.IsDir():
		return fail("%s is a directory, not a document", rel)
	case notRegular != nil:
		return fail("%s is not a regular file", rel)
	case errors.Is(err, fs.ErrNotExist):
		return fail("%s does not exist", rel)
	case err != nil:
		return fail("%s cannot be read: %v", rel, err)
	}
	defer f.Close()
	if info.Size() > MaxFileSize {
		return fail("%s is too large to validate (%d bytes, limit %d)", rel, info.Size(), MaxFileSize)
	}
	sv := v.built[name].schema
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return fail("%s cannot be read: %v", rel, err)
	}
	if int64(len(data)) > MaxFileSize {
		return fail("%s is too large to validate (more than %d bytes)", rel, MaxFileSize)
	}
	var doc any
	ext := strings.ToLower(filepath.Ext(rel))
	if ext == ".yaml" || ext == ".yml" {
		err = yamlsafe.Unmarshal(data, &doc)
	} else {
		err = json.Unmarshal(data, &doc)
	}
	if err != nil {
		return fail("%s is not valid %s: %v", rel, strings.TrimPrefix(ext, "."), err)
	}
	if err := sv.Validate(doc); err != nil {
		return fail("%s does not match schema %s#%s: %v", rel, def.Schema.File, def.Schema.Schema, err)
	}
	return event.ValidatorOutput{Stdout: rel, DurationMs: time.Since(start).Milliseconds()}, true, map[string]any{"path": rel}, nil
}

// confine resolves rel inside dir, refusing absolute paths, ".." and
// symlinks that lead outside dir.
func confine(dir, rel string) (string, error) {
	if filepath.IsAbs(rel) || !filepath.IsLocal(filepath.Clean(rel)) {
		return "", errors.New("must be a relative path inside the work dir")
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	full := filepath.Join(root, rel)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		if os.IsNotExist(err) {
			return full, nil // a missing file is a validation failure, not an escape
		}
		return "", err
	}
	if r, err := filepath.Rel(realRoot, real); err != nil || !filepath.IsLocal(r) {
		return "", errors.New("resolves outside the work dir")
	}
	return full, nil
}

var placeholder = lazyre.New(`\$\{([A-Za-z_][A-Za-z0-9_.-]*)\}`)
