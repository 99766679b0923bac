package agent

import (
	"runtime"
	"sync"
	"weak"

	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/prompt"
)

// perDefinition is what every agent built from one *config.Agent can
// share because the definition alone decides it: the prompt resolver, with
// its cache of parsed prompt files (safe for concurrent use; a file read
// from disk is re-read when it changes). Thousands of agents of one
// definition then parse and keep each prompt once.
type perDefinition struct {
	prompts *prompt.Resolver
}

// definitions maps a definition to its perDefinition. The key is a weak
// pointer, so the map never keeps a definition alive; an entry is dropped
// once its definition is collected.
var definitions sync.Map // weak.Pointer[config.Agent] -> *perDefinition

// sharedFor returns def's perDefinition, made by the first agent of def.
func sharedFor(def *config.Agent) *perDefinition {
	key := weak.Make(def)
	if v, ok := definitions.Load(key); ok {
		return v.(*perDefinition)
	}
	spec, reg := def.Shared()
	// Nothing in it may point at def, or def would never be collected.
	v, loaded := definitions.LoadOrStore(key, &perDefinition{prompts: newPromptResolver(def.Dir(), spec, reg)})
	if !loaded {
		runtime.AddCleanup(def, func(k weak.Pointer[config.Agent]) { definitions.Delete(k) }, key)
	}
	return v.(*perDefinition)
}
