package verdict

import (
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
)

// Signal types: a completion signal either moves the run to its next phase
// or completes it.
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
