// Package agent is layer 0 of capstan (seed 000 "Lifecycle", seed 002
// "AgentFactory"): it builds an agent's dependencies in the seed's order,
// runs the loop, and reports an AgentResult. It is the public entry point
// for embedding capstan in a Go program:
//
//	def, err := agent.LoadPinned(dir) // or config.LoadAndValidate(dir, agent.ValidateOptions()), unpinned
//	a, err := agent.Build(ctx, def, agent.BuildOptions{WorkDir: wd, Params: map[string]string{"name": "Ada"}})
//	err = a.Start(ctx)
//	_ = a.Run(ctx)
//	res := a.Stop()
//
// The lifecycle is one way: Created → Started → Stopped. A second Start is
// ALREADY_STARTED, Start after Stop is ALREADY_STOPPED, and an agent is not
// reusable.
package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/completion"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/definition"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/retry"
	"github.com/capstan-dev/capstan/loop"
	"github.com/capstan-dev/capstan/prompt"
	"github.com/capstan-dev/capstan/tool/builtin"
	"github.com/capstan-dev/capstan/tool/mcp"
	"github.com/capstan-dev/capstan/tracing"
)

// State is a lifecycle state.
type State string

// Lifecycle states (seed 000: Created → Started → Stopped, one way).
const (
	Created State = "created"
	Started State = "started"
	Stopped State = "stopped"
)

// BuildOptions configure Build.
type BuildOptions struct {
	// WorkDir is where the agent acts (default: the current directory).
	WorkDir string
	// Store keeps the run journal (zero = journal.OpenStore(Getenv): the
	// user's state directory, outside the work dir).
	Store journal.Store
	// Model overrides runner.model ("provider:model").
	Model string
	// BaseURL overrides runner.baseUrl.
	BaseURL string
	// MaxIterations overrides runner.budgets.maxIterations when > 0.
	MaxIterations int
	// Timeouts override runner.requests' timeouts field by field (zero
	// fields keep them).
	Timeouts retry.Timeouts
	// MaxRetryAfter overrides runner.requests.maxRetryAfterSeconds when > 0.
	MaxRetryAfter time.Duration
	// Observer receives progress callbacks.
	Observer loop.Observer
	// Getenv reads the environment (nil = os.Getenv).
	Getenv func(string) string
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// Resume continues the run recorded in this journal instead of starting
	// a new one.
	Resume *RunRecord
	// Params are raw parameter values keyed by parameter name, as given on
	// the command line; they are type-checked and defaulted by the
	// definition (seed 000 variable mapping) and become {uv-<name>} prompt
	// variables. A resumed run reuses the recorded values when Params is nil.
	Params map[string]string
	// DefinitionResume says, for a resumed run, how the definition it uses
	// relates to the recorded one; it is journaled in run.start with the
	// definition's digests. The definition itself is the one def was
	// loaded from (config.LoadAndValidateFS with a definition.Snapshot).
	DefinitionResume *definition.Resume
	// TracerProvider, when set, turns the run's journal events into
	// OpenTelemetry spans (package tracing); the run span is a child of
	// the span in Build's ctx, if any. nil = no tracing, and no cost.
	// Flushing and shutting the provider down is the caller's job.
	TracerProvider trace.TracerProvider
}

// Agent is a built agent.
type Agent struct {
	def  *config.Agent
	spec *config.Definition // def.Definition(), copied once
	reg  *config.Registry   // def.Registry(), copied once
	opts BuildOptions

	mu      sync.Mutex
	state   State
	runID   string
	model   string
	workDir string

	events      *journal.Writer
	emit        journal.Emitter  // events, or the tracing tee in front of it
	tracer      *tracing.Emitter // nil without a TracerProvider
	prompts     *prompt.Resolver
	completion  completion.Handler
	verifier    *completion.CompletionValidator
	schemas     *schemas
	bridge      llm.Bridge
	bridgeCfg   llm.Config            // how bridges are opened (tools, journal, transcripts)
	stepBridges map[string]llm.Bridge // bridges of steps' own models, by spec
	stepCosts   map[string]func(llm.Usage) float64
	mcp         *mcp.Set // MCP servers capstan connected (nil when none)
	flow        *flow
	buildOrder  []string

	params map[string]string
	// definition is the pinned snapshot def was loaded from (nil when it
	// was read from disk) and snapshotRecord what run.start says about it.
	definition     *definition.Snapshot
	snapshotRecord *definition.Record
	// warnings are journaled at start and reported in the result.
	warnings []string
	// skillsPrompt is the L1 section of runner.skills for the system prompt.
	skillsPrompt string
	vars         map[string]string
	rc           *loop.RuntimeContext
	result       *Result
	started      time.Time
}

// Build creates an agent's dependencies in seed 002's order — logger
// (journal), prompt resolver, completion handler, SDK bridge (with its
// tools), action system (step flow) — and returns it in state Created.
// def must come from LoadPinned or config.LoadAndValidate(FS); when it was
// loaded from a definition.Snapshot, the run keeps that snapshot with its
// journal and records its digests in run.start.
func Build(ctx context.Context, def *config.Agent, opts BuildOptions) (*Agent, error) {
	if def == nil {
		return nil, agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "agent definition is nil")
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	spanClock := opts.Now // nil lets the tracing SDK stamp spans itself
	if opts.Now == nil {
		opts.Now = time.Now
	}
	wd := opts.WorkDir
	if wd == "" {
		wd = "."
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "work dir")
	}
	if st, err := os.Stat(wd); err != nil || !st.IsDir() {
		e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "work dir %s is not a directory", wd)
		e.Hint = "create it or pass an existing --workdir"
		return nil, e
	}
	a := &Agent{def: def, spec: def.Definition(), reg: def.Registry(), opts: opts, state: Created, workDir: wd}
	a.model = opts.Model
	if a.model == "" {
		a.model = def.Definition().Runner.Model
	}
	if a.model == "" {
		e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "no model: runner.model is empty and --model was not given")
		e.Hint = "set runner.model in agent.json or pass --model provider:model (providers: " + strings.Join(llm.Providers(), ", ") + ")"
		return nil, e
	}
	params := opts.Params
	if r := opts.Resume; r != nil && r.Start != nil && params == nil {
		params = r.Start.Params
	}
	a.params = params
	if a.vars, err = def.ResolveParams(params); err != nil {
		return nil, err
	}
	fail := func(err error) (*Agent, error) {
		a.release()
		// A new run that could not be built never started: leave no empty
		// run behind for `capstan runs` to list. (A resumed run's journal
		// is kept untouched.)
		if opts.Resume == nil && a.events != nil {
			_ = os.RemoveAll(filepath.Dir(a.events.Path()))
		}
		return nil, err
	}
	// 1. logger
	if err := a.buildJournal(); err != nil {
		return fail(err)
	}
	if err := a.pinDefinition(); err != nil {
		return fail(err)
	}
	a.emit = a.events
	if opts.TracerProvider != nil {
		a.tracer = tracing.New(tracing.Config{Provider: opts.TracerProvider, Parent: context.WithoutCancel(ctx),
			Next: a.events, Secrets: builtin.SecretValues(os.Environ()), Now: spanClock})
		a.emit = a.tracer
	}
	a.buildOrder = append(a.buildOrder, "logger")
	// 2. prompt resolver
	a.prompts = newPromptResolver(def.Dir(), a.spec, a.reg)
	a.schemas = newSchemas(def.Dir(), def.FS())
	a.buildOrder = append(a.buildOrder, "promptResolver")
	// 3. completion handler
	if a.completion, err = a.buildCompletion(); err != nil {
		return fail(err)
	}
	a.buildOrder = append(a.buildOrder, "completionHandler")
	// 4. SDK bridge and its tools
	if a.bridge, err = a.buildBridge(ctx); err != nil {
		return fail(err)
	}
	a.buildOrder = append(a.buildOrder, "sdkBridge")
	// 5. action system: the step flow
	if a.flow, err = newFlow(a); err != nil {
		return fail(err)
	}
	a.buildOrder = append(a.buildOrder, "actionSystem")
	return a, nil
}

func (a *Agent) buildJournal() error {
	if r := a.opts.Resume; r != nil {
		if r.Result != nil && r.Result.Success {
			e := agenterr.New(agenterr.CodeAlreadyStopped, agenterr.LayerLifecycle, false, "run %s already completed", r.ID)
			e.Hint = "start a new run with capstan run"
			return e
		}
		w, err := journal.Append(r.Journal)
		if err != nil {
			return agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "reopen journal of run %s", r.ID)
		}
		a.events, a.runID = w, r.ID
		return nil
	}
	store := a.opts.Store
	if store.Dir == "" {
		var err error
		if store, err = journal.OpenStore(a.opts.Getenv); err != nil {
			return agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "create run journal")
		}
	}
	if rel, err := filepath.Rel(a.workDir, store.Dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		a.warnings = append(a.warnings, "the state directory "+store.Dir+" is inside the work dir: the agent's file tools can reach its run journals; set "+
			journal.EnvStateDir+" to a directory outside "+a.workDir)
	}
	a.runID = journal.NewRunID(a.opts.Now())
	w, err := store.Create(a.workDir, a.runID)
	if err != nil {
		return agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "create run journal")
	}
	a.events = w
	return nil
}

// BuildOrder returns the order in which dependencies were built.
func (a *Agent) BuildOrder() []string { return append([]string(nil), a.buildOrder...) }

// RunID is the run's id (its journal is <state dir>/runs/<work dir key>/<id>/events.jsonl).
func (a *Agent) RunID() string { return a.runID }

// JournalPath is the run journal's path.
func (a *Agent) JournalPath() string { return a.events.Path() }

// State returns the lifecycle state.
func (a *Agent) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state
}

// Start initializes the run: it resolves the system prompt, restores a
// resumed run's state, and journals run.start. It may be called once.
func (a *Agent) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch a.state {
	case Started:
		return agenterr.New(agenterr.CodeAlreadyStarted, agenterr.LayerLifecycle, false, "agent %s already started", a.spec.Name)
	case Stopped:
		return agenterr.New(agenterr.CodeAlreadyStopped, agenterr.LayerLifecycle, false, "agent %s was stopped; build a new one", a.spec.Name)
	}
	if err := a.flow.start(ctx); err != nil {
		return err
	}
	a.rc = &loop.RuntimeContext{}
	start := RunStartEvent{RunID: a.runID, Agent: a.spec.Name, AgentDir: a.def.Dir(), WorkDir: a.workDir, Model: a.model, Params: a.params,
		Definition: a.snapshotRecord,
		Options: &RunOptions{BaseURL: a.bridgeCfg.BaseURL, Endpoint: Endpoint(a.model, a.bridgeCfg.BaseURL, a.opts.Getenv),
			MaxIterations: a.opts.MaxIterations, Timeouts: a.opts.Timeouts, MaxRetryAfter: a.opts.MaxRetryAfter}}
	if r := a.opts.Resume; r != nil {
		if err := a.restore(r); err != nil {
			return err
		}
		start.Resumed, start.Iteration = true, a.rc.Iteration
	}
	for _, w := range a.def.Warnings() {
		a.emit.Emit(journal.Warning, map[string]string{"message": w.String()})
	}
	for _, w := range a.warnings {
		a.emit.Emit(journal.Warning, map[string]string{"message": w})
	}
	a.emit.Emit(journal.RunStart, start)
	a.emit.Emit(journal.LifecycleChange, map[string]string{"state": string(Started)})
	a.state = Started
	a.started = a.opts.Now()
	return nil
}

// Run drives the loop to its end and returns the result. It requires
// Started; call Stop afterwards to release resources.
func (a *Agent) Run(ctx context.Context) *Result {
	a.mu.Lock()
	if a.state != Started || a.result != nil {
		a.mu.Unlock()
		err := agenterr.New(agenterr.CodeNotStarted, agenterr.LayerLifecycle, false, "Run needs a started agent that has not run yet")
		return &Result{CompletionReason: loop.ReasonError, RunID: a.runID, Error: NewResultError(err)}
	}
	a.mu.Unlock()
	b := a.spec.Runner.Budgets
	budgets := loop.Budgets{MaxIterations: b.MaxIterations, MaxTokens: b.MaxTokens, MaxCostUSD: b.MaxCostUSD,
		Timeout: time.Duration(b.TimeoutSeconds) * time.Second}
	if a.opts.MaxIterations > 0 {
		budgets.MaxIterations = a.opts.MaxIterations
	}
	l, err := loop.New(loop.Config{Bridge: a.bridge, Flow: a.flow, Events: a.emit, Observer: a.opts.Observer,
		Budgets: budgets, Cost: a.costFunc(a.model), Now: a.opts.Now})
	if err != nil {
		return a.finish(&loop.Result{CompletionReason: loop.ReasonError, Err: err})
	}
	return a.finish(l.Run(ctx, a.rc))
}

func (a *Agent) finish(lr *loop.Result) *Result {
	res := &Result{
		Success: lr.Success, CompletionReason: lr.CompletionReason, Reason: lr.Reason,
		Iterations: lr.Iterations, SessionID: lr.SessionID, RunID: a.runID,
		Agent: a.spec.Name, Model: a.model, StepID: a.flow.currentStep(),
		Usage: lr.Usage, CostUSD: lr.CostUSD, DurationMs: a.opts.Now().Sub(a.started).Milliseconds(),
		Journal: a.events.Path(), Error: NewResultError(lr.Err), DefinitionDigest: a.definitionDigest(),
		Warnings: append([]string(nil), a.warnings...),
	}
	a.mu.Lock()
	a.result = res
	a.mu.Unlock()
	return res
}

// Stop releases every resource, journals run.end and flushes the journal,
// and returns the result. It is safe to call in any state and more than
// once; an agent that never ran reports completionReason "aborted".
func (a *Agent) Stop() *Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == Stopped {
		return a.result
	}
	if a.result == nil {
		a.result = &Result{CompletionReason: loop.ReasonAborted, Reason: "stopped before running", RunID: a.runID,
			Agent: a.spec.Name, Model: a.model, Journal: a.events.Path(), DefinitionDigest: a.definitionDigest(),
			Error: NewResultError(agenterr.New(agenterr.CodeAborted, agenterr.LayerLifecycle, false, "stopped before running"))}
	}
	// MCP servers that stopped during the run: restarted, or their tools
	// failed (the model saw the errors).
	a.result.Warnings = append(a.result.Warnings, a.mcp.Notes()...)
	// Models and MCP servers close before run.end, so the journal says how
	// that went.
	a.noteStopError(a.closeModels())
	a.emit.Emit(journal.RunEnd, a.result)
	a.emit.Emit(journal.LifecycleChange, map[string]string{"state": string(Stopped)})
	a.noteStopError(a.release())
	a.state = Stopped
	return a.result
}

// noteStopError records a failure to release a resource at the end of a
// run. A completed run stays a success without an error (success implies
// no error): the failure becomes a warning of the result. Otherwise it is
// the run's error unless it already has one.
func (a *Agent) noteStopError(err error) {
	switch {
	case err == nil:
	case a.result.Success:
		a.result.Warnings = append(a.result.Warnings, "after the run completed: "+err.Error())
	case a.result.Error == nil:
		a.result.Error = NewResultError(err)
	}
}

// closeModels closes the bridges and the MCP servers (once).
func (a *Agent) closeModels() error {
	var first error
	if a.bridge != nil {
		first = a.bridge.Close()
		a.bridge = nil
	}
	for _, b := range a.stepBridges {
		if err := b.Close(); err != nil && first == nil {
			first = err
		}
	}
	a.stepBridges = nil
	if a.mcp != nil {
		if err := a.mcp.Close(); err != nil && first == nil {
			first = err
		}
		a.mcp = nil
	}
	return first
}

// release closes every resource: models, MCP servers, tracer and journal.
func (a *Agent) release() error {
	first := a.closeModels()
	if a.tracer != nil {
		a.tracer.Close()
	}
	if a.events != nil {
		if err := a.events.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
