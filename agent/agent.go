// Package agent runs an agent. It builds a run's dependencies (the model
// bridge, tools, sandbox, validators, step machine) from an agent
// definition (package agentdir) and the Go values of Config, drives the
// iteration loop with its budgets, hard limit and resume, and reports a
// Result. It is the public entry point for embedding capstan in a Go
// program:
//
//	cfg, err := agent.Load(dir, agent.Config{WorkDir: wd, Params: map[string]string{"name": "Ada"},
//		Tools: myTools, Validators: myValidators, Events: []event.Consumer{myConsumer}})
//	a, err := agent.New(ctx, cfg) // cfg.Agent: the folder, pinned (see Load)
//	err = a.Start(ctx)
//	_ = a.Run(ctx)
//	res := a.Stop() // res.Err() keeps the error chain
//
// Each iteration's outcome is decided by the verdict stage (package
// verdict); the run's events flow through one stream (package event).
//
// The lifecycle is one way: Created → Started → Stopped. A second Start is
// ALREADY_STARTED, Start after Stop is ALREADY_STOPPED, and an agent is not
// reusable.
package agent

import (
	"context"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool/mcp"
	"github.com/capstan-dev/capstan/tracing"
	"github.com/capstan-dev/capstan/verify"
)

// State is a lifecycle state.
type State string

// Lifecycle states: an agent goes Created → Started → Stopped, one way,
// never back.
const (
	Created State = "created"
	Started State = "started"
	Stopped State = "stopped"
)

// Agent is a built agent.
type Agent struct {
	def  *agentdir.Agent
	spec *agentdir.Definition // def.Shared(): read-only, shared by the agents of def
	reg  *agentdir.Registry   // def.Shared(): read-only, shared by the agents of def
	opts Config

	mu      sync.Mutex
	state   State
	runID   string
	model   string
	workDir string

	events      *journal.Writer
	emit        *event.Stream    // the run's one event stream: journal, tracing, Config.Events
	tracer      *tracing.Emitter // nil without a TracerProvider
	prompts     *agentdir.PromptResolver
	rt          *compiled // completion handler, verifier, step machine
	schemas     *schemas
	bridge      llm.Bridge
	baseURL     string                // the model's base URL ("" = the provider's)
	stepCfg     *llm.Config           // how steps' own models' bridges are opened (nil: no step has one)
	stepBridges map[string]llm.Bridge // bridges of steps' own models, by spec
	stepCosts   map[string]func(event.Usage) float64
	mcp         *mcp.Set    // MCP servers capstan connected (nil when none)
	ledger      *llm.Ledger // the tool-effect ledger of capstan's tool loop
	flow        *flow
	built       int                    // how many of buildOrder's dependencies are built
	protection  protection             // runner.verification.protect
	testGuard   *verify.LostTestsGuard // no lost tests; nil when no validator runs tests
	// hidden are the hidden test files (runner.verification.hidden) and
	// hiddenCheck their guard; nil without them.
	hidden      *verify.HiddenSet
	hiddenCheck *verify.HiddenGuard

	params map[string]string
	// definition is the pinned snapshot def was loaded from (nil when it
	// was read from disk).
	definition *agentdir.Snapshot
	// warnings are journaled at start and reported in the result.
	warnings []string
	// skillsPrompt is the L1 section of runner.skills for the system prompt.
	skillsPrompt string
	vars         map[string]string
	rc           *RuntimeContext
	session      *Session // the loop stepped by Step (nil before the first)
	result       *event.RunResult
	// github is what runner.integrations.github did after completion.
	github *event.GitHubOutcome
	// ghRepo is the repository capstan's own gh calls name and ghPath the
	// gh they run, both fixed before the model runs (nil and "" when
	// capstan makes none).
	ghRepo *github.Repo
	ghPath string
	// git runs capstan's own git commands (repository discovery, the
	// validators' pinned configuration), resolved outside the work dir
	// when the agent is built; nil when git is not installed.
	git *proc.Git
	// sandbox confines the Bash tool, subprocess steps and command
	// validators when runner.boundaries.sandbox is enabled; nil when not.
	sandbox *sandbox.CommandRunner
	// validatorCache is the build cache of the sandboxed command
	// validators: filled by the test baseline, sealed before the model's
	// first turn, removed when the agent is released. nil without the
	// sandbox and for a resumed run.
	validatorCache *sandbox.Cache
	// toolconf is the toolchain configuration pinned for unconfined
	// validators (nil when they run in the sandbox or there are none).
	toolconf *verify.PinnedToolchain
	// bashCache is the sandboxed Bash tool's own build cache, shared by
	// its commands for the whole run (never sealed: only the model's
	// commands write and read it); removed when the agent is released.
	bashCache *sandbox.Cache
	// sharedCache is Config.ValidatorCache when the validators use it
	// (sealed after the test baseline; the caller removes it).
	sharedCache *sandbox.Cache
	// goCaches is what a run in a Go module fills its build caches with
	// and where it keeps the work dir's for the next run (nil outside
	// one; see seedGoCaches).
	goCaches *goCaches
	// begun is when Start was called, started when it returned (the time
	// budget counts from there); between them the test baselines ran,
	// which took testBaselineMs.
	begun, started time.Time
	testBaselineMs int64
}

// Build is New with def as cfg.Agent: it builds the agent of a loaded
// agent folder (agentdir.LoadAndValidate) with the Go values in opts.
func Build(ctx context.Context, def *agentdir.Agent, opts BuildOptions) (*Agent, error) {
	opts.Agent = def
	return New(ctx, opts)
}

// New creates an agent's dependencies, each before the ones that use it —
// logger (journal), prompt resolver, completion handler, SDK bridge (with its
// tools), action system (step flow) — and returns it in state Created.
// The configuration's rules are checked by the same code `capstan validate`
// runs (see ValidateOptions), so an agent that validates also builds.
// cfg.Agent must come from Load, LoadPinned or agentdir.LoadAndValidate(FS);
// when it was loaded from an agentdir.Snapshot, the run keeps that
// snapshot with its journal and records its digests in run.start.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	opts, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	spanClock := opts.Now // nil lets the tracing SDK stamp spans itself
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	wd, err := absWorkDir(opts.WorkDir)
	if err != nil {
		return nil, err
	}
	a := &Agent{def: opts.Agent, opts: opts, state: Created, workDir: wd}
	if err := a.shareDefinition(); err != nil {
		return nil, err
	}
	if err := a.chooseModel(); err != nil {
		return nil, err
	}
	if err := a.resolveParams(); err != nil {
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
	// One copy of the environment for the secret lists of the tracer,
	// the stream and the model's answers, and for finding git.
	environ := os.Environ()
	// 1. logger
	if err := a.buildLogger(ctx, environ, spanClock); err != nil {
		return fail(err)
	}
	a.built++ // logger
	// 2. prompt resolver
	a.prompts = sharedFor(a.def).prompts
	a.schemas = newSchemas(a.def.Dir(), a.spec.Runner.SchemasDir, a.def.FS())
	a.built++ // promptResolver
	if err := a.buildCommandRunners(ctx, environ); err != nil {
		return fail(err)
	}
	// 3. completion handler, validators and step machine: the part of the
	// agent its files decide (the same code validate runs)
	if err := a.buildCompletion(ctx); err != nil {
		return fail(err)
	}
	a.built++ // completionHandler
	// 4. SDK bridge and its tools
	if a.bridge, err = a.buildBridge(ctx, environ); err != nil {
		return fail(err)
	}
	a.built++ // sdkBridge
	// 5. action system: the step flow
	if a.flow, err = newFlow(a); err != nil {
		return fail(err)
	}
	a.built++ // actionSystem
	return a, nil
}

// Run builds the agent of cfg and runs it to its end: New, Start, Run and
// Stop in one call, for a program that neither steps the run nor reads
// its events as they happen (Config.Events still consume them). When the
// agent cannot be built or started, the Result's completion reason is
// "error" and Err() is what New or Start returned — for Go values, every
// problem at its Go field. (A run that could not start is journaled as
// stopped before running.)
func Run(ctx context.Context, cfg Config) *event.RunResult {
	a, err := New(ctx, cfg)
	if err != nil {
		return &event.RunResult{CompletionReason: ReasonError, Reason: err.Error(), Error: event.NewResultError(err)}
	}
	if err := a.Start(ctx); err != nil {
		res := *a.Stop()
		res.CompletionReason, res.Reason, res.Error = ReasonError, err.Error(), event.NewResultError(err)
		return &res
	}
	a.Run(ctx)
	return a.Stop()
}

// BuildOrder returns the order in which dependencies were built.
func (a *Agent) BuildOrder() []string { return slices.Clone(buildOrder[:a.built]) }

// buildOrder names an agent's dependencies in the order New builds them.
var buildOrder = []string{"logger", "promptResolver", "completionHandler", "sdkBridge", "actionSystem"}

// RunID is the run's id (its journal is <state dir>/runs/<work dir key>/<id>/events.jsonl).
func (a *Agent) RunID() string { return a.runID }

// Unsandboxed says why the run's commands (Bash, command validators,
// subprocess steps) do not run in the sandbox — an opt-out
// (Config.NoSandbox, "sandbox": {"enabled": false}) or allowUnsandboxed
// on a machine that cannot sandbox — and "" when they do.
func (a *Agent) Unsandboxed() string { return a.unsandboxed() }

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
	// The run's duration counts from here: the test baselines below can
	// take longer than the iterations.
	begun := a.opts.Now()
	a.seedGoCaches(ctx, a.workDir)
	if err := a.flow.start(ctx); err != nil {
		return err
	}
	a.rc = &RuntimeContext{}
	why := a.unsandboxed()
	sandboxed := why == ""
	start := RunStartEvent{Format: journal.Format, RunID: a.runID, Agent: a.spec.Name, AgentDir: a.def.Dir(), WorkDir: a.workDir, Model: a.model, Params: a.params,
		Definition: a.definitionRecord(), GitHubRepo: a.ghRepo, PipelineRun: a.opts.PipelineRun, Temporal: a.opts.Temporal,
		Sandboxed: &sandboxed, Unsandboxed: why,
		Options: &RunOptions{BaseURL: a.baseURL, Endpoint: Endpoint(a.model, a.baseURL, a.opts.Getenv), EndpointSource: a.endpointSource(),
			MaxIterations: a.opts.MaxIterations, Timeouts: a.opts.Timeouts, MaxRetryAfter: a.opts.MaxRetryAfter,
			RunTimeout: a.opts.RunTimeout, MaxTokens: a.opts.MaxTokens, MaxCostUSD: a.opts.MaxCostUSD,
			MaxTurns: a.opts.MaxTurns, StepLoopLimit: a.opts.StepLoopLimit}}
	if r := a.opts.Resume; r != nil {
		if err := a.restore(r); err != nil {
			return err
		}
		if err := a.resumeTestChange(r); err != nil {
			return err
		}
		start.Resumed, start.Iteration, start.Rewound = true, a.rc.Iteration, r.rewound
	}
	baseline, err := a.protectBaseline(a.opts.Resume)
	if err != nil {
		return err
	}
	testBaselines, testWarnings, err := a.testBaselines(ctx, a.opts.Resume)
	var hiddenBaselines []*event.HiddenResult
	var hiddenWarnings []string
	if err == nil {
		hiddenBaselines, hiddenWarnings, err = a.hiddenBaselines(ctx, a.opts.Resume)
	}
	// From here on validators may run the model's code: they read the
	// cache the baseline filled, and write it no more; the bytecode of the
	// work dir's own modules is not kept for them (see DropBytecodeUnder).
	if a.validatorCache != nil {
		if derr := a.validatorCache.DropBytecodeUnder(a.workDir); derr != nil && err == nil {
			err = agenterr.Wrap(derr, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "prepare the validators' build cache")
		}
		a.validatorCache.Seal()
	}
	if a.sharedCache != nil {
		a.sharedCache.Seal()
	}
	if err != nil {
		return err
	}
	a.saveGoCache(ctx)
	for _, w := range a.def.Warnings() {
		a.emit.Emit(event.Warning(w.String()))
	}
	for _, w := range a.warnings {
		a.emit.Emit(event.Warning(w))
	}
	a.emit.Emit(start)
	if baseline != nil {
		a.emit.Emit(baseline)
	}
	a.emitTestBaselines(testBaselines, testWarnings)
	for _, w := range hiddenWarnings {
		a.emit.Emit(event.Warning(w))
	}
	for _, b := range hiddenBaselines {
		a.hiddenCheck.Journal(b)
	}
	a.emit.Emit(event.LifecycleEvent{State: string(Started)})
	a.state = Started
	a.started = a.opts.Now()
	a.begun = begun
	return nil
}

// Events runs the agent like Run and yields its events as they happen,
// each while the run waits for the loop body (so a payload may be read but
// must be copied to be kept). When the run did not complete, the last pair
// is a zero Event with the run's error. Breaking out of the loop cancels
// the run. Call Stop afterwards for the Result.
func (a *Agent) Events(ctx context.Context) iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events, ack := make(chan event.Event), make(chan struct{})
		unsubscribe := a.emit.Subscribe(event.ConsumerFunc(func(e event.Event) {
			events <- e
			<-ack
		}))
		done := make(chan *event.RunResult, 1)
		go func() {
			defer close(events)
			defer unsubscribe()
			done <- a.Run(ctx)
		}()
		open := true
		for e := range events {
			if open && !yield(e, nil) {
				open = false
				cancel()
			}
			ack <- struct{}{}
		}
		if res := <-done; open && res.Err() != nil {
			yield(event.Event{}, res.Err())
		}
	}
}

// Run drives the loop to its end and returns the result. It requires
// Started; call Stop afterwards to release resources.
func (a *Agent) Run(ctx context.Context) *event.RunResult {
	for {
		if res := a.Step(ctx); res != nil {
			return res
		}
	}
}

// Step runs one iteration of a started agent — the limits checked first,
// then the prompt, the query and the verdict, exactly as in Run — and
// returns nil when the run goes on, or the run's Result when it ended
// (call Stop afterwards). Run is Step called until it returns a Result; a
// driver that persists the run between iterations (package scaleout)
// calls Step itself.
//
// The work before the first iteration and after the last is kept out of
// line (beginRun, endRun), so that Step's stack frame — part of what a
// run parked in a model call keeps — stays small.
func (a *Agent) Step(ctx context.Context) *event.RunResult {
	if res := a.beginRun(); res != nil {
		return res
	}
	// The model's output goes through the event stream, redacted, to its
	// consumers and to a sink the caller put in ctx.
	qctx, done := llm.StreamEvents(ctx, a.emit)
	lr := a.session.Step(qctx)
	done()
	if lr != nil {
		return a.endRun(ctx, lr)
	}
	return nil
}

// beginRun checks that the agent may step and, before the first
// iteration, sets up the run's loop session; a non-nil Result ends the
// run (or refuses the Step).
//
//go:noinline
func (a *Agent) beginRun() *event.RunResult {
	a.mu.Lock()
	if a.state != Started || a.result != nil {
		a.mu.Unlock()
		err := agenterr.New(agenterr.CodeNotStarted, agenterr.LayerLifecycle, false, "Run needs a started agent that has not run yet")
		return &event.RunResult{CompletionReason: ReasonError, RunID: a.runID, Error: event.NewResultError(err)}
	}
	a.mu.Unlock()
	if a.session != nil {
		return nil
	}
	b := a.spec.Runner.Budgets // Config's limits applied (applyLimits)
	budgets := Budgets{MaxIterations: b.MaxIterations, MaxTokens: b.MaxTokens, MaxCostUSD: b.MaxCostUSD,
		Timeout: a.timeBudget()}
	// capstan's tool loop continues a cut query from the journal (the
	// tool-effect ledger); a bridge that runs its own (claude-code), or
	// one an embedder gave, does not.
	continuable := a.opts.Bridge == nil && !runsOwnToolLoop(a.model)
	l, err := NewLoop(LoopConfig{Bridge: a.bridge, Flow: a.flow, Events: a.emit,
		Budgets: budgets, Cost: a.costFunc(a.model), Now: a.opts.Now, Continuable: continuable, Broken: a.cacheFailed})
	if err != nil {
		return a.finish(&LoopResult{CompletionReason: ReasonError, Err: err})
	}
	a.session = l.Begin(a.rc, a.startedAt())
	return nil
}

// timeBudget is the run's time budget (0 = none).
func (a *Agent) timeBudget() time.Duration {
	if a.opts.RunTimeout > 0 {
		return a.opts.RunTimeout
	}
	return time.Duration(a.spec.Runner.Budgets.TimeoutSeconds) * time.Second
}

// startedAt is when the run's time budget counts from.
func (a *Agent) startedAt() time.Time {
	if !a.opts.Started.IsZero() {
		return a.opts.Started
	}
	return a.started
}

// Deadline is when the run's time budget ends; zero when it has none. A
// driver that retries a cut iteration later (package scaleout) stops
// retrying when the next attempt would come after it.
func (a *Agent) Deadline() time.Time {
	t := a.timeBudget()
	if t <= 0 {
		return time.Time{}
	}
	return a.startedAt().Add(t)
}

// endRun turns the loop's final result into the run's.
//
//go:noinline
func (a *Agent) endRun(ctx context.Context, lr *LoopResult) *event.RunResult {
	lr = a.flow.noReplyForRetry(lr)
	if lr.Success {
		var last *event.IterationSummary
		if n := len(lr.Summaries); n > 0 {
			last = &lr.Summaries[n-1]
		}
		a.github = a.applyGitHub(ctx, last)
	}
	return a.finish(lr)
}

// Progress is where a started run stands between iterations.
type Progress struct {
	// Iteration is the number of finished iterations.
	Iteration int `json:"iteration"`
	// Step is the current step ("" without steps).
	Step string `json:"step,omitempty"`
	// Usage and CostUSD are the run's totals so far.
	Usage   event.Usage `json:"usage"`
	CostUSD float64     `json:"cost"`
	// Summary is the last finished iteration's summary (nil before the first).
	Summary *event.IterationSummary `json:"-"`
	// Outcome is the verdict on the last iteration Step ran.
	Outcome event.OutcomeEvent `json:"outcome"`
}

// Progress reports where the run stands; call it between Steps.
func (a *Agent) Progress() Progress {
	p := Progress{Step: a.flow.currentStep()}
	if a.rc != nil {
		p.Iteration = a.rc.Iteration
		if n := len(a.rc.Summaries); n > 0 {
			p.Summary = &a.rc.Summaries[n-1]
		}
	}
	if a.session != nil {
		p.Usage, p.CostUSD = a.session.Usage()
		p.Outcome = a.session.Last()
	}
	return p
}

// Abandon releases the agent's resources without journaling run.end, as a
// killed process would leave its run: the journal ends with the last
// finished event, and the run can be resumed (Config.Resume) where it
// stopped. A driver calls it when another process takes the run over.
func (a *Agent) Abandon() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == Stopped {
		return
	}
	_ = a.release()
	a.state = Stopped
}

func (a *Agent) finish(lr *LoopResult) *event.RunResult {
	res := &event.RunResult{
		Success: lr.Success, CompletionReason: lr.CompletionReason, Reason: lr.Reason,
		Iterations: lr.Iterations, SessionID: lr.SessionID, RunID: a.runID,
		Agent: a.spec.Name, Model: a.model, StepID: a.flow.currentStep(),
		Usage: lr.Usage, CostUSD: lr.CostUSD, DurationMs: a.opts.Now().Sub(a.begun).Milliseconds(), TestBaselineMs: a.testBaselineMs,
		Journal: a.events.Path(), Error: event.NewResultError(lr.Err), DefinitionDigest: a.definitionDigest(),
		UsageUnreported: lr.UsageUnreported,
		Warnings:        append([]string(nil), a.warnings...),
		CannotComplete:  a.flow.cannotComplete,
		TestChange:      a.flow.testChange,
		Verdict:         a.flow.closureVerdict,
		Handoff:         a.flow.closureHandoff,
		GitHub:          a.github,
		Sandboxed:       a.unsandboxed() == "",
	}
	a.mu.Lock()
	a.result = res
	a.mu.Unlock()
	return res
}

// Stop releases every resource, journals run.end and flushes the journal,
// and returns the result. It is safe to call in any state and more than
// once; an agent that never ran reports completionReason "aborted".
func (a *Agent) Stop() *event.RunResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == Stopped {
		return a.result
	}
	if a.result == nil {
		a.result = &event.RunResult{CompletionReason: ReasonAborted, Reason: "stopped before running", RunID: a.runID,
			Agent: a.spec.Name, Model: a.model, Journal: a.events.Path(), DefinitionDigest: a.definitionDigest(), Sandboxed: a.unsandboxed() == "",
			Error: event.NewResultError(agenterr.New(agenterr.CodeAborted, agenterr.LayerLifecycle, false, "stopped before running"))}
	}
	// MCP servers that stopped during the run: restarted, or their tools
	// failed (the model saw the errors).
	a.result.Warnings = append(a.result.Warnings, a.mcp.Notes()...)
	// Models and MCP servers close before run.end, so the journal says how
	// that went.
	a.noteStopError(a.closeModels())
	a.emit.Emit(a.result)
	a.emit.Emit(event.LifecycleEvent{State: string(Stopped)})
	a.noteStopError(a.release())
	a.state = Stopped
	return a.result
}

// noteStopError records a failure to release a resource at the end of a
// run. A completed run stays a success without an error (success implies
// no error): the failure becomes a warning of the result. Otherwise it is
// the run's error, or a warning when the run already ended with one.
func (a *Agent) noteStopError(err error) {
	switch {
	case err == nil:
	case a.result.Success:
		a.result.Warnings = append(a.result.Warnings, "after the run completed: "+err.Error())
	case a.result.Error == nil:
		a.result.Error = event.NewResultError(err)
	default:
		// The run already ended with an error (a budget, a failed
		// verdict): what went wrong while stopping — a journal another
		// process replaced, say — is still said, as a warning.
		a.result.Warnings = append(a.result.Warnings, "while stopping: "+err.Error())
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
	if a.rt != nil && a.rt.verifier != nil {
		if err := a.rt.verifier.Close(); err != nil && first == nil {
			first = err
		}
	}
	if a.toolconf != nil {
		if err := a.toolconf.Remove(); err != nil && first == nil {
			first = err
		}
		a.toolconf = nil
	}
	for _, c := range []**sandbox.Cache{&a.validatorCache, &a.bashCache} {
		if *c != nil {
			if err := (*c).Remove(); err != nil && first == nil {
				first = err
			}
			*c = nil
		}
	}
	return first
}

// pathInside reports whether p is dir or lies below it (lexically).
func pathInside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
