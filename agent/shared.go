package agent

import (
	"maps"
	"runtime"
	"sync"
	"weak"

	"github.com/capstan-dev/capstan/agentdir"
)

// perDefinition is what every agent built from one *agentdir.Agent can
// share because the definition alone decides it: the prompt resolver, with
// its cache of parsed prompt files (safe for concurrent use; a file read
// from disk is re-read when it changes). Thousands of agents of one
// definition then parse and keep each prompt once.
//
// It also keeps the copies of the definition that agents whose Config
// overrides limits read (limited): agents with the same limits share one.
type perDefinition struct {
	prompts *agentdir.PromptResolver

	mu      sync.Mutex
	limited map[limits]limitedCopy
	// vars are the prompt variables of the parameters the last agent
	// resolved (read-only): agents given the same parameters (a program's
	// agents of one definition with its defaults) share one map.
	vars map[string]string
}

// sharedVars returns the vars the last agent resolved when they equal
// vars, else makes vars the ones to share.
func (p *perDefinition) sharedVars(vars map[string]string) map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.vars != nil && maps.Equal(p.vars, vars) {
		return p.vars
	}
	p.vars = vars
	return vars
}

// limits are the limits a Config writes over its definition (applyLimits).
type limits struct {
	maxIterations, maxTurns, stepLoopLimit int
	maxTokens                              int64
	maxCostUSD                             float64
}

// limitedCopy is the definition and registry with limits written over.
type limitedCopy struct {
	spec *agentdir.Definition
	reg  *agentdir.Registry
}

// maxLimitedCopies bounds the copies one definition keeps: a runtime
// whose agents use ever new limits gets a copy per agent past it.
const maxLimitedCopies = 32

// withLimits returns a read-only copy of spec and reg (the shared ones)
// with cfg's limits written over them, made by the first agent with those
// limits. Only the structs the limits live in are copied (plain value
// fields); the rest is shared.
func (p *perDefinition) withLimits(spec *agentdir.Definition, reg *agentdir.Registry, cfg Config) (*agentdir.Definition, *agentdir.Registry, error) {
	key := limits{maxIterations: cfg.MaxIterations, maxTurns: cfg.MaxTurns, stepLoopLimit: cfg.StepLoopLimit,
		maxTokens: cfg.MaxTokens, maxCostUSD: cfg.MaxCostUSD}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.limited[key]; ok {
		return c.spec, c.reg, nil
	}
	s, r := *spec, *reg
	if err := applyLimits(&s, &r, cfg); err != nil {
		return nil, nil, err
	}
	if len(p.limited) < maxLimitedCopies {
		if p.limited == nil {
			p.limited = map[limits]limitedCopy{}
		}
		p.limited[key] = limitedCopy{&s, &r}
	}
	return &s, &r, nil
}

// definitions maps a definition to its perDefinition. The key is a weak
// pointer, so the map never keeps a definition alive; an entry is dropped
// once its definition is collected.
var definitions sync.Map // weak.Pointer[config.Agent] -> *perDefinition

// sharedFor returns def's perDefinition, made by the first agent of def.
func sharedFor(def *agentdir.Agent) *perDefinition {
	key := weak.Make(def)
	if v, ok := definitions.Load(key); ok {
		return v.(*perDefinition)
	}
	spec, reg := def.Shared()
	// Nothing in it may point at def, or def would never be collected.
	v, loaded := definitions.LoadOrStore(key, &perDefinition{prompts: newPromptResolver(def.Dir(), spec, reg)})
	if !loaded {
		runtime.AddCleanup(def, func(k weak.Pointer[agentdir.Agent]) { definitions.Delete(k) }, key)
	}
	return v.(*perDefinition)
}
