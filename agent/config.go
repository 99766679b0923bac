package agent

import (
	"context"
	"io/fs"
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

// Config is everything an agent is built from: the definition — an agent
// folder (Load fills Agent) or Go values (Definition, Registry, Prompts,
// Files; Define or New fill Agent) — and Go values that add to it or
// override it (tools, validators, completion handlers, limits, events).
type Config struct {
	// Agent is the validated agent definition: from Load (an agent
	// folder), Define (Go values), or set by New from Definition,
	// Registry, Prompts and Files when nil.
	Agent *agentdir.Agent
	// Definition and Registry are agent.json and steps_registry.json as
	// Go values: the agent built without a folder (see Define). Give them
	// or Agent, not both.
	Definition *agentdir.Definition
	Registry   *agentdir.Registry
	// Prompts are the prompt texts of an agent built from Go values.
	Prompts Prompts
	// Files are the other files of an agent built from Go values — JSON
	// Schemas under schemas/, script files of the script provider, skills,
	// prompt files — with paths relative to the (absent) agent folder,
	// e.g. an embed.FS. A prompt of Prompts wins over a file at its path.
	Files fs.FS
	// WorkDir is where the agent acts (default: the current directory).
	WorkDir string
	// Store keeps the run journal (zero = journal.OpenStore(Getenv): the
	// user's state directory, outside the work dir).
	Store journal.Store
	// Model overrides runner.model ("provider:model").
	Model string
	// BaseURL overrides runner.baseUrl.
	BaseURL string
	// BaseURLSource says where BaseURL came from ("--base-url", "user
	// config base_urls.openai"; "" = Config.BaseURL); run.start records it
	// as options.endpointSource.
	BaseURLSource string
	// Bridge, when set, is the model the run talks to instead of the
	// provider of runner.model; the agent closes it on Stop. A bridge
	// brings its own tools, so Tools must be empty.
	Bridge llm.Bridge
	// Tools are custom Go tools the model may call, next to the built-in
	// ones and those of runner.skills and runner.mcpServers. They are
	// subject to runner.boundaries (allowedTools, disallowedTools) like
	// every tool.
	Tools []tool.Tool
	// Validators are this agent's Go validators by handler name: a
	// registry validator {"type": "custom", "handler": NAME} runs
	// Validators[NAME].
	Validators map[string]verify.CustomValidator
	// CompletionHandlers are this agent's custom completion handlers by
	// name: runner.completion {"type": "custom", "handler": NAME} uses
	// CompletionHandlers[NAME].
	CompletionHandlers map[string]verdict.HandlerFactory
	// Completion is this agent's completion handler as a Go value:
	// runner.completion {"type": "custom"} without a handler name uses it
	// (runner.completion.validators still verify every completion it
	// reports). Giving it while runner.completion does not use it is
	// CONFIG_INVALID.
	Completion verdict.CompletionHandler
	// MaxIterations overrides runner.budgets.maxIterations when > 0.
	MaxIterations int
	// RunTimeout overrides runner.budgets.timeoutSeconds when > 0: the
	// run's wall-clock limit.
	RunTimeout time.Duration
	// MaxTokens overrides runner.budgets.maxTokens when > 0: the run's
	// input+output token limit.
	MaxTokens int64
	// MaxCostUSD overrides runner.budgets.maxCostUsd when > 0: the run's
	// cost limit in USD.
	MaxCostUSD float64
	// MaxTurns overrides runner.boundaries.maxTurns when > 0: the model
	// turns (tool-call round trips) of one iteration.
	MaxTurns int
	// StepLoopLimit overrides the registry's stepLoopLimit when > 0: how
	// many times in a row one step may run before STEP_LOOP_LIMIT.
	StepLoopLimit int
	// Timeouts override runner.requests' timeouts field by field (zero
	// fields keep them).
	Timeouts llm.Timeouts
	// MaxRetryAfter overrides runner.requests.maxRetryAfterSeconds when > 0.
	MaxRetryAfter time.Duration
	// NoSandbox runs the agent's Bash commands, command validators and
	// subprocess steps unsandboxed, with the caller's
	// rights (capstan run --no-sandbox): an explicit opt-out of the
	// default, which the run reports (Result.Sandboxed, run.start).
	// Without it the agent runs sandboxed unless its agent.json says
	// "sandbox": {"enabled": false}.
	NoSandbox bool
	// ValidatorCache, when set, is the build cache the run's sandboxed
	// command validators use instead of one of their own: a caller that
	// runs many agents with the same toolchains keeps one, so that the
	// standard library is compiled once for all of them, not once per run.
	// A sealed cache (sandbox.Cache.Seal) is copied for every validation,
	// so what a model-written test writes never reaches another. An
	// unsealed one is filled by the run's test baseline and sealed by the
	// run before the model's first turn, as the run's own cache is; give an
	// unsealed cache to one run at a time. A resumed run uses it only when
	// it is sealed. The caller removes it.
	ValidatorCache *sandbox.Cache
	// Params are raw parameter values keyed by parameter name, as given on
	// the command line; they are type-checked and defaulted by the
	// definition's parameters and become {uv-<name>} prompt
	// variables. A resumed run reuses the recorded values when Params is nil.
	Params map[string]string
	// Resume continues the run recorded in this journal instead of starting
	// a new one.
	Resume *RunRecord
	// WorkDirRestored says, for a resumed run, that the work dir was put
	// back to the state the cut iteration began from (a Temporal worker
	// checked out the run's last commit): the changes the cut attempt made
	// inside it are gone. The tool-effect ledger then runs that attempt's
	// file edits (Write, Edit) again, and a call it answers from the
	// journal tells the model that its changes inside the work dir were
	// undone.
	WorkDirRestored bool
	// Checkpoint, when set, is called after each call of a tool that is
	// not idempotent, before its result is journaled (llm.Ledger's
	// AfterEffect): a Temporal worker saves the checkout there, so that the
	// iteration continued on another worker finds the effects of every
	// call the journal answers. Its failure leaves the call's effect to
	// the iteration's commit.
	Checkpoint func(ctx context.Context) error
	// DefinitionResume says, for a resumed run, how the definition it uses
	// relates to the recorded one; it is journaled in run.start with the
	// definition's digests. The definition itself is the one Agent was
	// loaded from (agentdir.LoadAndValidateFS with an agentdir.Snapshot).
	DefinitionResume *agentdir.SnapshotResume
	// Events consume the run's event stream (package event), after the
	// journal and tracing, in order: the progress line, --stream output and
	// an embedder's own consumers are all Events.
	Events []event.Consumer
	// TracerProvider, when set, turns the run's journal events into
	// OpenTelemetry spans (package tracing); the run span is a child of
	// the span in New's ctx, if any. nil = no tracing, and no cost.
	// Flushing and shutting the provider down is the caller's job.
	TracerProvider trace.TracerProvider
	// RunID is the new run's ID ("" = a fresh one from the clock). A driver
	// that names runs itself (a Temporal workflow ID) sets it; it must be
	// unique in the Store and a valid file name.
	RunID string
	// PipelineRun is the id of the pipeline run this run is an agent stage
	// of ("" = none); run.start records it, so the run names its pipeline.
	PipelineRun string
	// Temporal, when set, is where the run's workflow lives (a Temporal
	// worker runs it); run.start records it.
	Temporal *TemporalRun
	// Started is when the run began, when that is earlier than Start (a
	// run a driver continues in another process): the time budget counts
	// from it. Zero = Start's time.
	Started time.Time
	// Getenv reads the environment (nil = os.Getenv).
	Getenv func(string) string
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// BuildOptions is the Config of Build (whose Agent field Build sets).
type BuildOptions = Config

// Load is the agent-folder way to fill a Config: it reads the folder dir
// once into a pinned definition snapshot (as LoadPinned does, with the
// script file of cfg.Model when it names one), loads and validates it with
// cfg's Go validators and completion handlers known (ValidateOptionsFor),
// and returns cfg with Agent set. Problems come back all at once as a
// *agentdir.ValidationError.
func Load(dir string, cfg Config) (Config, error) {
	var models []string
	if cfg.Model != "" {
		models = append(models, cfg.Model)
	}
	def, err := loadPinned(dir, ValidateOptionsFor(cfg), models)
	if err != nil {
		return cfg, err
	}
	cfg.Agent = def
	return cfg, nil
}

// writesLimits reports whether applyLimits writes any of cfg's limits
// over the definition (RunTimeout is not written: Run applies it), so
// that the agent needs its own copy instead of the shared one.
func writesLimits(cfg Config) bool {
	return cfg.MaxIterations > 0 || cfg.MaxTokens > 0 || cfg.MaxCostUSD > 0 || cfg.MaxTurns > 0 || cfg.StepLoopLimit > 0
}

// applyLimits writes cfg's limits (MaxIterations, MaxTokens, MaxCostUSD,
// MaxTurns, StepLoopLimit; RunTimeout is applied by Run, which needs its
// sub-second precision) over the agent's copies of its
// definition and registry, so that every part of the run reads them where
// it reads agent.json's and steps_registry.json's: a limit given in Go acts
// exactly like the same limit in the files. A negative limit is
// CONFIG_INVALID.
func applyLimits(spec *agentdir.Definition, reg *agentdir.Registry, cfg Config) error {
	var bad []string
	neg := func(name string, negative bool) {
		if negative {
			bad = append(bad, name)
		}
	}
	neg("MaxIterations", cfg.MaxIterations < 0)
	neg("RunTimeout", cfg.RunTimeout < 0)
	neg("MaxTokens", cfg.MaxTokens < 0)
	neg("MaxCostUSD", cfg.MaxCostUSD < 0 || math.IsNaN(cfg.MaxCostUSD) || math.IsInf(cfg.MaxCostUSD, 0))
	neg("MaxTurns", cfg.MaxTurns < 0)
	neg("StepLoopLimit", cfg.StepLoopLimit < 0)
	if len(bad) > 0 {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"agent.Config: %s must not be negative", strings.Join(bad, ", "))
		e.Hint = "use 0 to keep the definition's limit, or a positive limit"
		return e
	}
	b := &spec.Runner.Budgets
	if cfg.MaxIterations > 0 {
		b.MaxIterations = cfg.MaxIterations
	}
	if cfg.MaxTokens > 0 {
		b.MaxTokens = cfg.MaxTokens
	}
	if cfg.MaxCostUSD > 0 {
		b.MaxCostUSD = cfg.MaxCostUSD
	}
	if cfg.MaxTurns > 0 {
		spec.Runner.Boundaries.MaxTurns = cfg.MaxTurns
	}
	if cfg.StepLoopLimit > 0 {
		reg.StepLoopLimit = cfg.StepLoopLimit
	}
	return nil
}
