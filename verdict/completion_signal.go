package verdict

import (
	"sort"
	"sync"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

// Signal types of seed 002's CompletionSignal.
const (
	SignalPhaseAdvance = "phase-advance"
	SignalComplete     = "complete"
)

// Signal is a CompletionSignal the loop received (from a tool, an
// operator or a custom integration) and hands to the completion handler.
type Signal struct {
	Type string `json:"type"`
	Data any    `json:"data,omitempty"`
}

// PhaseAware is implemented by handlers that track phases; the
// "phase-advance" signal calls AdvancePhase.
type PhaseAware interface {
	AdvancePhase()
}

// ForceCompletable is implemented by handlers that can be completed from
// outside; the "complete" signal calls ForceComplete. Every built-in
// handler implements it; a forced completion is sticky.
type ForceCompletable interface {
	ForceComplete(data any)
}

// ProcessSignal delivers sig to h through the optional interfaces of seed
// 002 and reports whether h reacted. A handler that does not implement the
// matching interface ignores the signal (handled = false, no error); an
// unknown signal type is an error.
func ProcessSignal(h CompletionHandler, sig Signal) (handled bool, err error) {
	switch sig.Type {
	case SignalPhaseAdvance:
		if p, ok := h.(PhaseAware); ok {
			p.AdvancePhase()
			return true, nil
		}
		return false, nil
	case SignalComplete:
		if f, ok := h.(ForceCompletable); ok {
			f.ForceComplete(sig.Data)
			return true, nil
		}
		return false, nil
	default:
		return false, agenterr.New(agenterr.CodeCompletion, agenterr.LayerCompletion, false,
			"unknown completion signal %q (want %q or %q)", sig.Type, SignalPhaseAdvance, SignalComplete)
	}
}

// HandlerFactory builds a custom handler from its agent.json entry
// (type "custom", "handler": name) and the build dependencies.
type HandlerFactory func(cfg agentdir.Completion, deps HandlerDeps) (CompletionHandler, error)

var (
	customMu       sync.RWMutex
	customHandlers = map[string]HandlerFactory{}
)

// RegisterHandler makes a custom completion handler available under name,
// like database/sql drivers: call it from an init function. It panics when
// name is empty, factory is nil or name is already registered.
func RegisterHandler(name string, factory HandlerFactory) {
	customMu.Lock()
	defer customMu.Unlock()
	if name == "" || factory == nil {
		panic("completion: RegisterHandler needs a name and a factory")
	}
	if _, dup := customHandlers[name]; dup {
		panic("completion: RegisterHandler called twice for " + name)
	}
	customHandlers[name] = factory
}

// CustomHandlers lists the registered custom handler names, sorted.
func CustomHandlers() []string {
	customMu.RLock()
	defer customMu.RUnlock()
	names := make([]string, 0, len(customHandlers))
	for n := range customHandlers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func lookupHandler(name string) (HandlerFactory, bool) {
	customMu.RLock()
	defer customMu.RUnlock()
	f, ok := customHandlers[name]
	return f, ok
}
