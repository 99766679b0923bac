package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// ReasoningAgent is a stage of a reasoning pipeline.
//
// Preconditions are the keys that must hold a value before Execute runs;
// Postconditions are the keys Execute promises to fill, and the only keys
// it may write. Execute receives the stage's own context (see
// AgentContext), writes its results with Set and returns that context.
type ReasoningAgent interface {
	AgentID() string
	Preconditions() []string
	Postconditions() []string
	Execute(ctx context.Context, agentContext *AgentContext) (*AgentContext, error)
}

// OptionalReader is implemented by agents that read keys beyond their
// preconditions when those keys exist (a stage that comes later in the
// pipeline may use them). An optional read orders the stage after every
// producer of the key but does not require the key to exist.
type OptionalReader interface {
	OptionalReads() []string
}

// AgentExecutionOptions say how a pipeline runs its stages.
type AgentExecutionOptions struct {
	// ValidateContract checks preconditions before and postconditions after
	// each stage. Namespace isolation is enforced whatever its value.
	ValidateContract bool `json:"validate_contract" yaml:"validate_contract"`
	// FailOnViolation stops the pipeline at the first violation or stage
	// failure; otherwise the pipeline continues, skips the stages whose
	// preconditions are missing, and reports everything in diagnostics.
	FailOnViolation bool `json:"fail_on_violation" yaml:"fail_on_violation"`
	// TrackPerformance writes diagnostics.performance (per-stage duration,
	// attempts, bytes written, model tokens).
	TrackPerformance bool `json:"track_performance" yaml:"track_performance"`
}

// DefaultExecutionOptions turns everything on.
func DefaultExecutionOptions() AgentExecutionOptions {
	return AgentExecutionOptions{ValidateContract: true, FailOnViolation: true, TrackPerformance: true}
}

// RetryPolicy bounds how often a failing stage is tried again. The delay
// before retry n (1-based) is Backoff·2^(n-1), capped at MaxBackoff, with
// jitter in [50%, 100%] of that.
type RetryPolicy struct {
	MaxRetries int           `json:"max_retries"`
	Backoff    time.Duration `json:"backoff"`
	MaxBackoff time.Duration `json:"max_backoff"`
}

// Defaults for stage execution.
const (
	DefaultStageTimeout = 2 * time.Minute
	DefaultBackoff      = 200 * time.Millisecond
	DefaultMaxBackoff   = 5 * time.Second
	// MaxRetriesLimit bounds RetryPolicy.MaxRetries.
	MaxRetriesLimit = 10
)

// StageConfig is how the manager runs one stage.
type StageConfig struct {
	// DependsOn orders the stage after these stages, in addition to the
	// order implied by keys (a stage runs after every producer of the keys
	// it reads).
	DependsOn []string
	// Timeout bounds each attempt (0 = DefaultStageTimeout).
	Timeout time.Duration
	// Retry bounds retries after a failed attempt (zero = no retry).
	Retry RetryPolicy
}

// FuncAgent is a ReasoningAgent made of a Go function.
type FuncAgent struct {
	ID       string
	Pre      []string
	Post     []string
	Optional []string
	Declared []KeySpec
	// Fn reads from and writes to ac; the manager returns ac for it.
	Fn func(ctx context.Context, ac *AgentContext) error
}

// AgentID implements ReasoningAgent.
func (f *FuncAgent) AgentID() string { return f.ID }

// Preconditions implements ReasoningAgent.
func (f *FuncAgent) Preconditions() []string { return f.Pre }

// Postconditions implements ReasoningAgent.
func (f *FuncAgent) Postconditions() []string { return f.Post }

// OptionalReads implements OptionalReader.
func (f *FuncAgent) OptionalReads() []string { return f.Optional }

// Keys implements KeyDeclarer.
func (f *FuncAgent) Keys() []KeySpec { return f.Declared }

// Execute implements ReasoningAgent.
func (f *FuncAgent) Execute(ctx context.Context, ac *AgentContext) (*AgentContext, error) {
	if f.Fn == nil {
		return nil, fmt.Errorf("agent %s has no function", f.ID)
	}
	if err := f.Fn(ctx, ac); err != nil {
		return nil, err
	}
	return ac, nil
}

// violationError is the coded error of a broken contract.
func violationError(v event.PipelineViolation) *agenterr.Error {
	code := agenterr.CodeContractViolation
	if v.Kind == event.ViolationNamespace {
		code = agenterr.CodeNamespaceViolation
	}
	e := agenterr.New(code, agenterr.LayerPipeline, false, "agent %s: %s", v.AgentID, v.Message)
	return e
}
