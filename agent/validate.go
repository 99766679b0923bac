package agent

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/verify"
)

// builtinVariables are the {uv-x} variables the runtime supplies in every
// iteration, in addition to the agent's parameters.
var builtinVariables = []string{"iteration", "max_iterations", "completion_keyword", "step_id", "agent_name", "workdir",
	"completed_iterations", "remaining", "previous_summary"}

// BuiltinVariables are the {uv-x} variables the runtime supplies in every
// iteration, in addition to the agent's parameters.
// It returns a copy: changing it changes nothing else.
func BuiltinVariables() []string {
	return slices.Clone(builtinVariables)
}

// Problem codes contributed by the layers above configuration (listed in
// agentdir.Codes and docs/configuration.md).
const (
	CodeStepPromptMissing  = "SR-STEP-PROMPT-MISSING"
	CodeStepPromptInvalid  = "SR-STEP-PROMPT-INVALID"
	CodeRetryPromptMissing = "SR-RETRY-PROMPT-MISSING"
	CodeSchemaUnresolved   = "SR-SCHEMA-UNRESOLVED"
	CodeSchemaInvalid      = "SR-SCHEMA-INVALID"
	CodeGateEnum           = "SR-GATE-ENUM"
	CodeRetryPromptGeneric = "SR-RETRY-PROMPT-GENERIC"
)

// withOwnHint splits err into its message and the hint it carries, which
// is more precise than fallback: a problem prints one hint, not two.
func withOwnHint(err error, fallback string) (msg, hint string) {
	msg = err.Error()
	if e := agenterr.From(err); e != nil && e.Hint != "" {
		if m, ok := strings.CutSuffix(msg, "; hint: "+e.Hint); ok {
			return m, e.Hint
		}
	}
	return msg, fallback
}

// ValidateOptions are the configuration checks of a full validation: the
// providers and runtime variables this binary knows, the cross-layer
// checks (every step prompt resolves and parses, every declared failure
// pattern has a retry prompt) and the build check, which runs the code
// that turns the files into the runtime (the completion handler, the
// validators, the step machine) and reports the rules it checks. `capstan
// validate` and `capstan run` both use it, so they agree.
func ValidateOptions() agentdir.ValidateOptions { return ValidateOptionsFor(Config{}) }

// ValidateOptionsFor is ValidateOptions for an agent built with cfg: its
// Go validators and completion handlers (cfg.Validators,
// cfg.CompletionHandlers) count as known.
func ValidateOptionsFor(cfg Config) agentdir.ValidateOptions {
	checkBuild := func(dir string, def *agentdir.Definition, reg *agentdir.Registry) []agentdir.Problem {
		return checkBuild(dir, def, reg, cfg)
	}
	return agentdir.ValidateOptions{
		Providers:        llm.Providers(),
		BuiltinVariables: builtinVariables,
		Checks:           []func(string, *agentdir.Definition, *agentdir.Registry) []agentdir.Problem{checkPrompts, checkModelScripts, checkRetrySyntax, checkBaseURLKey, checkBuild},
	}
}

// checkBaseURLKey reports a runner.baseUrl that carries a key
// (llm.CheckBaseURLKey): a run refuses it, as the base URL is recorded in
// its journal. (The URL's form is config's AC-BASE-URL check.)
func checkBaseURLKey(_ string, def *agentdir.Definition, _ *agentdir.Registry) []agentdir.Problem {
	if def == nil || def.Runner.BaseURL == "" {
		return nil
	}
	e := agenterr.From(llm.CheckBaseURLKey("runner.baseUrl", def.Runner.BaseURL))
	if e == nil {
		return nil
	}
	return []agentdir.Problem{{Code: "AC-BASE-URL", Severity: agentdir.SeverityError, File: agentdir.AgentFile,
		Pointer: "/runner/baseUrl", Message: e.Message, Hint: e.Hint}}
}

// checkBuild runs compile, the code New uses to turn the files into the
// completion handler, validators and step machine, and reports its errors
// as problems: what validate accepts, New builds. Parameters are taken at
// their defaults (a required one without default as "1"), since validate
// runs without parameter values.
func checkBuild(dir string, def *agentdir.Definition, reg *agentdir.Registry, cfg Config) []agentdir.Problem {
	if reg == nil {
		return nil
	}
	vars := map[string]string{}
	for name, p := range def.Parameters {
		vars[name] = "1"
		if p.Default != nil {
			vars[name] = strings.Trim(string(p.Default), `"`)
		}
	}
	schemas := newSchemas(dir, def.Runner.SchemasDir, def.FS())
	_, err := compile("", def, reg, cfg, runtimeEnv{workDir: dir, vars: vars, emit: event.Discard, schemas: schemas})
	if err == nil {
		return nil
	}
	errs := unjoin(err)
	out := make([]agentdir.Problem, 0, len(errs))
	for _, e := range errs {
		p := agentdir.ProblemFromError(e)
		if p.File == "" {
			p.File = agentdir.AgentFile
		}
		out = append(out, p)
	}
	return out
}

// checkPrompts resolves every step prompt and every declared retry prompt.
func checkPrompts(dir string, def *agentdir.Definition, reg *agentdir.Registry) []agentdir.Problem {
	if (dir == "" && def.FS() == nil) || reg == nil {
		return nil
	}
	c := &promptChecker{def: def, reg: reg, prompts: newPromptResolver(dir, def, reg), regFile: registryFile(def),
		schemas: newSchemas(dir, def.Runner.SchemasDir, def.FS()), reach: agentdir.Reachable(reg)}
	if c.prompts.ConfigErr() != nil {
		// A prompt base, fallback directory or system prompt path outside
		// the agent folder is AC-PATH-OUTSIDE; every prompt of every step
		// would fail with it alike.
		return nil
	}
	ids := make([]string, 0, len(reg.Steps))
	for id := range reg.Steps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ctx := context.Background()
	for _, id := range ids {
		st := reg.Steps[id]
		ptr := agentdir.JoinPointer("steps", id)
		c.checkSchema(st.OutputSchemaRef, ptr+"/outputSchemaRef", "step "+id)
		if p, bad := checkIntentEnum(c.schemas, id, st); bad {
			p.File = c.regFile
			c.out = append(c.out, p)
		}
		// A step without c2 or c3 is SR-STEP-PROMPT: its prompt, and its
		// retry prompts unless its validation step names their c2 and c3,
		// cannot be named, which saying again would only bury.
		noCoords := st.LacksPromptCoordinates()
		if st.Type != "gateway" && st.Runner == nil && !noCoords {
			c.checkStepPrompt(ctx, id, ptr, st)
		}
		ver := reg.VerificationOf(id, st)
		if noCoords && (ver.C2 == "" || ver.C3 == "") {
			continue
		}
		for _, u := range c.retryPromptUses(id, ptr, st, ver) {
			c.checkRetryPrompt(ctx, id, ver, u)
		}
	}
	return c.out
}

// promptChecker collects the problems checkPrompts finds.
type promptChecker struct {
	def     *agentdir.Definition
	reg     *agentdir.Registry
	prompts *agentdir.PromptResolver
	schemas *schemas
	regFile string          // the steps registry's file name, for problems
	reach   map[string]bool // the steps a run can enter (nil: all)
	out     []agentdir.Problem
}

// checkSchema checks that a schema reference resolves to a valid schema.
func (c *promptChecker) checkSchema(ref *agentdir.SchemaRef, ptr, what string) {
	if ref == nil || ref.File == "" {
		return
	}
	if _, err := c.schemas.get(*ref); err != nil {
		if ps := invalidSchemaProblems(err, what, *ref); len(ps) > 0 {
			c.out = append(c.out, ps...)
			return
		}
		if e := agenterr.From(err); e != nil && e.Code == agenterr.CodeSchemaResolution && e.File != "" && e.Line > 0 {
			// The schema file itself is broken (its JSON syntax): the
			// problem is located there, at the line and column.
			msg, hint := withOwnHint(err, "fix the JSON syntax")
			c.out = append(c.out, agentdir.Problem{Code: CodeSchemaUnresolved, Severity: agentdir.SeverityError,
				File: path.Join(c.schemas.rel, e.File), Line: e.Line, Column: e.Column,
				Message: what + ": schema " + ref.File + "#" + ref.Schema + " does not resolve: " + msg, Hint: hint})
			return
		}
		msg, hint := withOwnHint(err, "fix the schema file or the reference (file under schemas/, schema a top-level or $defs name or a #/ pointer)")
		c.out = append(c.out, agentdir.Problem{Code: CodeSchemaUnresolved, Severity: agentdir.SeverityError, File: c.regFile,
			Pointer: ptr, Message: what + ": schema " + ref.File + "#" + ref.Schema + " does not resolve: " + msg, Hint: hint})
	}
}

// checkStepPrompt checks that a step's prompt resolves and parses.
func (c *promptChecker) checkStepPrompt(ctx context.Context, id, ptr string, st agentdir.Step) {
	ref := agentdir.PromptRef{C2: st.C2, C3: st.C3, Edition: st.Edition, Adaptation: st.Adaptation, Fallback: st.Fallback}
	if _, err := c.prompts.Resolve(ctx, ref, nil); err != nil {
		code, hint := CodeStepPromptInvalid, "fix the prompt file"
		if errors.Is(err, agenterr.ErrPromptNotFound) {
			code, hint = CodeStepPromptMissing, "create the prompt file, or set the step's fallback"
		}
		msg, hint := withOwnHint(err, hint)
		c.out = append(c.out, agentdir.Problem{Code: code, Severity: agentdir.SeverityError, File: c.regFile,
			Pointer: ptr, Message: "step " + id + ": " + msg, Hint: hint})
	}
}

// retryPromptUse is a validator that can fail in a step, and where it is
// named (file and JSON pointer).
type retryPromptUse struct {
	validator, file, ptr string
	// generic: a missing retry prompt falls back to the built-in
	// generic one (validation steps, as in climpt's format).
	generic bool
}

// retryPromptUses lists the validators that can fail in step id, each of
// which needs its pattern's retry prompt: the step's completionConditions
// and the run's runner.completion.validators (which verify every step).
func (c *promptChecker) retryPromptUses(id, ptr string, st agentdir.Step, ver agentdir.StepVerification) []retryPromptUse {
	var uses []retryPromptUse
	condPtr, generic := ptr+"/completionConditions/", false
	if len(st.CompletionConditions) == 0 && len(ver.Conditions) > 0 {
		condPtr, generic = agentdir.JoinPointer("validationSteps", id, "validationConditions")+"/", true
	}
	for i, cond := range ver.Conditions {
		uses = append(uses, retryPromptUse{cond.Validator, c.regFile, condPtr + strconv.Itoa(i), generic})
	}
	// A step no run enters needs no retry prompt for the run's
	// validators (its own problems are warnings that say it is dead).
	if st.Type != "gateway" && (c.reach == nil || c.reach[id]) {
		for i, name := range c.def.Runner.Completion.Validators {
			uses = append(uses, retryPromptUse{name, agentdir.AgentFile, "/runner/completion/validators/" + strconv.Itoa(i), false})
		}
	}
	return uses
}

// checkRetryPrompt checks that the retry prompt of a validator's declared
// failure pattern resolves in step id (built-in patterns need none).
func (c *promptChecker) checkRetryPrompt(ctx context.Context, id string, ver agentdir.StepVerification, u retryPromptUse) {
	v, ok := c.reg.Validators[u.validator]
	if !ok {
		return // reported by config
	}
	pat, declared := c.reg.CompletionPatterns[v.FailurePattern]
	if !declared {
		return // built-in patterns fall back to the generic retry prompt
	}
	rt, err := c.prompts.ResolveRetry(ctx, c.reg.C1, ver.C2, ver.C3, pat.Edition, pat.Adaptation)
	if err == nil && rt.Found {
		return
	}
	msg := "step " + id + ": no retry prompt for failure pattern " + v.FailurePattern
	if err != nil {
		msg += ": " + err.Error()
	} else {
		msg += " (tried " + strings.Join(rt.Tried, ", ") + ")"
	}
	if u.generic && err == nil && len(rt.Tried) > 0 {
		c.out = append(c.out, agentdir.Problem{Code: CodeRetryPromptGeneric, Severity: agentdir.SeverityWarning, File: u.file,
			Pointer: u.ptr, FollowsFrom: []string{agentdir.JoinPointer("completionPatterns", v.FailurePattern)}, Message: msg + "; the built-in generic retry prompt (pattern, validator and every param) is sent instead",
			Hint: "create " + rt.Tried[0] + " to send your own retry prompt"})
		return
	}
	c.out = append(c.out, agentdir.Problem{Code: CodeRetryPromptMissing, Severity: agentdir.SeverityError, File: u.file,
		Pointer: u.ptr, Message: msg, FollowsFrom: []string{agentdir.JoinPointer("completionPatterns", v.FailurePattern)},
		Hint: "create the retry prompt file, or use a built-in pattern (" + strings.Join(builtinPatternNames(), ", ") + ") whose generic prompt needs no file"})
}

func builtinPatternNames() []string {
	names := make([]string, 0, 6)
	for n := range verify.BuiltinPatterns() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// invalidSchemaProblems returns one SR-SCHEMA-INVALID problem per bad
// keyword when err says the schema ref names (used by what: "step x",
// "validator y") is not a valid JSON Schema, located in the schema file;
// nil for any other error.
func invalidSchemaProblems(err error, what string, ref agentdir.SchemaRef) []agentdir.Problem {
	var inv *schema.InvalidSchemaError
	if !errors.As(err, &inv) {
		return nil
	}
	out := make([]agentdir.Problem, 0, len(inv.Problems))
	for _, p := range inv.Problems {
		out = append(out, agentdir.Problem{Code: CodeSchemaInvalid, Severity: agentdir.SeverityError,
			File: p.File, Pointer: p.Pointer, Line: p.Line, Column: p.Column,
			Message: fmt.Sprintf("%s: schema %s#%s is not a valid JSON Schema (%s): %s", what, ref.File, ref.Schema, inv.Draft, p.Message),
			Hint:    schema.InvalidOneKeywordHint})
	}
	return out
}

// checkIntentEnum checks that the enum at a routed step's intentSchemaRef,
// in its resolved output schema, lists exactly its allowedIntents: the
// schema the model answers in and the intents the step accepts must not
// drift apart.
func checkIntentEnum(schemas *schemas, id string, st agentdir.Step) (agentdir.Problem, bool) {
	g, ref := st.StructuredGate, st.OutputSchemaRef
	if g == nil || ref == nil || ref.File == "" || !strings.HasPrefix(g.IntentSchemaRef, "#/") {
		return agentdir.Problem{}, false // reported by config
	}
	c, err := schemas.get(*ref)
	if err != nil {
		return agentdir.Problem{}, false // SR-SCHEMA-UNRESOLVED
	}
	p := agentdir.Problem{Code: CodeGateEnum, Severity: agentdir.SeverityError,
		Pointer:     agentdir.JoinPointer("steps", id, "structuredGate", "intentSchemaRef"),
		FollowsFrom: []string{agentdir.JoinPointer("steps", id, "outputSchemaRef"), agentdir.JoinPointer("steps", id, "structuredGate", "allowedIntents")}}
	enum, found := schema.EnumAt(c.raw, g.IntentSchemaRef)
	if !found {
		p.Message = fmt.Sprintf("step %s: intentSchemaRef %s reaches no enum in schema %s#%s", id, g.IntentSchemaRef, ref.File, ref.Schema)
		p.Hint = "point intentSchemaRef at the intent property (with an enum) of the step's own schema, e.g. #/properties/next_action/properties/action"
		return p, true
	}
	var missing, extra []string
	for _, in := range g.AllowedIntents {
		if !slices.Contains(enum, in) {
			missing = append(missing, in)
		}
	}
	for _, e := range enum {
		if !slices.Contains(g.AllowedIntents, e) {
			extra = append(extra, e)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return agentdir.Problem{}, false
	}
	p.Message = fmt.Sprintf("step %s: the schema's intent enum %v is not allowedIntents %v", id, enum, g.AllowedIntents)
	if len(missing) > 0 {
		p.Message += fmt.Sprintf("; not in the schema: %v", missing)
	}
	if len(extra) > 0 {
		p.Message += fmt.Sprintf("; not allowed: %v", extra)
	}
	p.Hint = "make the enum in " + ref.File + " and structuredGate.allowedIntents list the same intents"
	return p, true
}
