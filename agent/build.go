package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tracing"
	"github.com/capstan-dev/capstan/verify"
)

// This file holds the steps of New, in the order it takes them.

// checkConfig turns a Config built from Go values into one with its
// agent (Define) and refuses the combinations New cannot build: no agent,
// both a folder and Go values, tools next to a bridge that brings its own.
func checkConfig(cfg Config) (Config, error) {
	if cfg.Agent == nil && cfg.Definition != nil {
		var err error
		if cfg, err = Define(cfg); err != nil {
			return cfg, err
		}
	}
	if cfg.Agent == nil {
		e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "agent definition is nil")
		e.Hint = "load an agent folder with agent.Load, or set Config.Definition and Config.Registry"
		return cfg, e
	}
	if cfg.Definition != nil {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"Config.Agent and Config.Definition are both set")
		e.Hint = "build the agent from a folder (Load) or from Go values (Definition, Registry, Prompts), not both"
		return cfg, e
	}
	if cfg.Bridge != nil && len(cfg.Tools) > 0 {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
			"Config.Tools cannot be given with Config.Bridge: a bridge brings its own tools")
		e.Hint = "give the tools to the bridge you build, or set Config.Model instead of Config.Bridge"
		return cfg, e
	}
	return cfg, nil
}

// absWorkDir is the absolute path of the work dir ("" is the current
// directory), which must be an existing directory.
func absWorkDir(dir string) (string, error) {
	if dir == "" {
		dir = "."
	}
	wd, err := filepath.Abs(dir)
	if err != nil {
		return "", agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "work dir")
	}
	if st, err := os.Stat(wd); err != nil || !st.IsDir() {
		e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "work dir %s is not a directory", wd)
		e.Hint = "create it or pass an existing --workdir"
		return "", e
	}
	return wd, nil
}

// shareDefinition gives the agent its read-only definition and registry.
// Agents of one definition share one copy of them; agents whose Config
// overrides limits share one copy per set of limits.
func (a *Agent) shareDefinition() error {
	a.spec, a.reg = a.def.Shared()
	if !writesLimits(a.opts) {
		return applyLimits(a.spec, a.reg, a.opts) // only checks: it writes nothing
	}
	var err error
	a.spec, a.reg, err = sharedFor(a.def).withLimits(a.spec, a.reg, a.opts)
	return err
}

// chooseModel settles the run's model — Config.Model, else runner.model;
// "custom" for an embedder's bridge; SubprocessTool when every step runs a
// command — warns about tools only another backend provides, and checks
// the base URLs the model is reached at.
func (a *Agent) chooseModel() error {
	a.model = a.opts.Model
	if a.model == "" {
		a.model = a.spec.Runner.Model
	}
	if a.model == "" && a.opts.Bridge != nil {
		a.model = "custom"
	}
	if a.model != "" && a.opts.Bridge == nil && !runsOwnToolLoop(a.model) {
		if names := claudeCodeOnlyTools(a.spec.Runner.Boundaries.AllowedTools); len(names) > 0 {
			a.warnings = append(a.warnings, fmt.Sprintf("allowedTools names %s, which only the Claude Code backend (claude-code:…) provides: "+
				"with %s capstan runs the tools itself and the model gets no such tool", strings.Join(names, ", "), a.model))
		}
	}
	if (a.model == "" || a.model == SubprocessTool && a.opts.Bridge == nil) && subprocessOnly(a.reg) {
		// Every step runs a command: the run needs no model. A resumed
		// run names the model it recorded, which is SubprocessTool.
		a.model, a.opts.Bridge = SubprocessTool, noModel{}
	}
	if a.model == "" {
		e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerLifecycle, false, "no model: runner.model is empty and --model was not given")
		e.Hint = "pass --model provider:model, set runner.model in agent.json, or set CAPSTAN_MODEL or default_model in the user config (providers: " + strings.Join(llm.Providers(), ", ") + ")"
		return e
	}
	return CheckBaseURLs(a.model, a.opts.BaseURL, a.spec.Runner.BaseURL, a.def.Dir(), a.opts.Getenv)
}

// resolveParams resolves the agent's parameters from Config.Params (a
// resumed run's recorded ones when none are given).
func (a *Agent) resolveParams() error {
	params := a.opts.Params
	if r := a.opts.Resume; r != nil && r.Start != nil && params == nil {
		params = r.Start.Params
	}
	a.params = params
	vars, err := a.def.ResolveParams(params)
	if err != nil {
		return err
	}
	// Read-only from here on: shared with the agents of the definition
	// given the same parameters.
	a.vars = sharedFor(a.def).sharedVars(vars)
	return nil
}

func (a *Agent) buildJournal() error {
	if r := a.opts.Resume; r != nil {
		if r.Result != nil && r.Result.Success {
			e := agenterr.New(agenterr.CodeAlreadyStopped, agenterr.LayerLifecycle, false, "run %s already completed", r.ID)
			e.Hint = "start a new run with capstan run"
			return e
		}
		if err := r.Integrity.Err(); err != nil {
			// A broken hash chain or a damaged line: what the record says
			// of the run (step state, verdicts, usage) cannot be trusted.
			e := agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "run %s is not resumed: journal %s", r.ID, r.Journal)
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
	if pathInside(a.workDir, store.Dir) {
		a.warnings = append(a.warnings, "the state directory "+store.Dir+" is inside the work dir: the agent's file tools can reach its run journals; set "+
			journal.EnvStateDir+" to a directory outside "+a.workDir)
	}
	a.runID = a.opts.RunID
	if a.runID == "" {
		a.runID = journal.NewRunID(a.opts.Now())
	}
	w, err := store.Create(a.workDir, a.runID)
	if err != nil {
		return agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "create run journal")
	}
	a.events = w
	// Names the agent of a run killed before its run.start (runs, resume).
	_ = journal.WriteStarted(w.Path(), journal.Started{Agent: a.spec.Name, AgentDir: a.def.Dir(), WorkDir: a.workDir})
	return nil
}

// buildLogger builds the run's journal (a new one, or a resumed run's
// reopened), keeps the pinned definition with it, and builds the event
// stream and the tool-effect ledger that write to it.
func (a *Agent) buildLogger(ctx context.Context, environ []string, spanClock func() time.Time) error {
	if err := a.buildJournal(); err != nil {
		return err
	}
	if err := a.pinDefinition(); err != nil {
		return err
	}
	a.buildStream(ctx, environ, spanClock)
	a.buildLedger()
	return nil
}

// buildStream builds the run's one event stream: the journal, the
// OpenTelemetry tracer when Config.TracerProvider is set, and the
// embedder's consumers, each seeing the model's output with the secret
// values of environ replaced. spanClock stamps spans (nil: the SDK does).
func (a *Agent) buildStream(ctx context.Context, environ []string, spanClock func() time.Time) {
	consumers := []event.Consumer{event.Journal{Writer: a.events}}
	if a.opts.TracerProvider != nil {
		a.tracer = tracing.New(tracing.Config{Provider: a.opts.TracerProvider, Parent: context.WithoutCancel(ctx),
			Secrets: proc.SecretValues(environ), Now: spanClock})
		consumers = append(consumers, a.tracer)
	}
	a.emit = event.NewStream(a.opts.Now, append(consumers, a.opts.Events...)...)
	// The model's streamed text reaches every consumer, an embedder's
	// too, with secret values replaced, as the journal has it.
	a.emit.RedactModelOutput(proc.NewStreamRedactor(environ))
}

// findGit resolves capstan's own git once, before anything runs: a git
// that a PATH entry inside the work dir provides (one the model could have
// written) fails the build; no git at all is for the validators to find
// out (a.git stays nil).
func (a *Agent) findGit(environ []string) error {
	var err error
	if a.git, err = proc.NewGit(environ, a.workDir); err != nil {
		if !proc.IsProgramNotFound(err) {
			return err
		}
		a.git = nil
	}
	return nil
}

// buildCommandRunners resolves what runs capstan's commands, before
// anything runs one: git (findGit), and the sandbox the tools, the
// subprocess steps and the validators all run in.
func (a *Agent) buildCommandRunners(ctx context.Context, environ []string) error {
	if err := a.findGit(environ); err != nil {
		return err
	}
	var err error
	if a.sandbox, err = a.buildSandbox(ctx); err != nil {
		return err
	}
	if why := a.unsandboxed(); why != "" {
		a.warnings = append(a.warnings, why)
	}
	return nil
}

// buildCompletion builds the part of the agent its files decide — the
// completion handler, validators and step machine, by the same code
// validate runs — with what the validators need first: the sandbox's build
// caches, the pinned toolchain configuration and the hidden tests (the Go
// caches, which can take a minute to compile, are seeded by Start, after
// everything that can refuse the run: a missing API key is told at once). Then it fixes the repository capstan's gh calls name, before the
// model can touch the work dir's remotes.
func (a *Agent) buildCompletion(ctx context.Context) error {
	env := runtimeEnv{workDir: a.workDir, vars: a.vars, emit: a.emit, runID: a.runID, schemas: a.schemas, git: a.git}
	if err := a.buildSandboxCaches(&env); err != nil {
		return err
	}
	if err := a.pinToolchainConfig(ctx, &env); err != nil {
		return err
	}
	var err error
	if a.hidden, err = a.loadHidden(); err != nil {
		return agenterr.Wrap(err, agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false, "hidden tests")
	}
	if a.rt, err = compile(a.def.Dir(), a.spec, a.reg, a.opts, env); err != nil {
		return err
	}
	return a.pinGitHubRepo(ctx)
}

// buildSandboxCaches gives a sandboxed run its build caches: the Bash
// tool's own, and the one the validators share (Config.ValidatorCache, or
// a new one that the test baseline fills and Start seals, or, for a
// resumed run, one that holds only the seed, sealed). It sets env's
// sandbox to the validators' one. Without the sandbox it does nothing.
// The caches are made by the first command that needs one (a run that
// runs none makes none); the temporary directory they go in is checked
// now.
func (a *Agent) buildSandboxCaches(env *runtimeEnv) error {
	if a.sandbox == nil {
		return nil
	}
	tmpOutside, err := tempOutside(a.workDir)
	if err != nil {
		return err
	}
	a.bashCache = sandbox.NewLazyCache("", a.seedCache)
	env.sandbox = a.sandbox.WithLimits(sandbox.ValidatorLimits())
	// A resumed run's work dir holds the model's code: nothing it
	// runs may fill a cache that later validations trust.
	if c := a.opts.ValidatorCache; c != nil {
		if a.opts.Resume == nil || c.Sealed() {
			env.sandbox, a.sharedCache = env.sandbox.WithCache(c), c
		}
		return nil
	}
	// In a temporary directory inside the work dir, the model's
	// Bash could write the cache the validations trust.
	if !tmpOutside {
		if a.opts.Resume == nil {
			a.warnings = append(a.warnings, "the temporary directory "+os.TempDir()+" is inside the work dir: the validators get no shared build cache "+
				"(set TMPDIR to a directory outside "+a.workDir+")")
		}
		return nil
	}
	a.validatorCache = sandbox.NewLazyCache("", a.seedCache)
	env.sandbox = env.sandbox.WithCache(a.validatorCache)
	if a.opts.Resume != nil {
		// The resumed run's cache holds only the seed, sealed before any
		// command: without it every validation compiles Go's standard
		// library again.
		a.validatorCache.Seal()
	}
	return nil
}

// pinToolchainConfig pins, for validators that run unconfined and keep
// the user's HOME, the toolchain configuration there (go env -w,
// ~/.npmrc) as it is now, before the model can write it.
func (a *Agent) pinToolchainConfig(ctx context.Context, env *runtimeEnv) error {
	if a.sandbox != nil || !hasCommandValidator(a.reg) {
		return nil
	}
	var err error
	if a.toolconf, err = verify.CaptureToolchain(ctx, "", proc.ForCommands(os.Environ(), a.spec.Runner.Boundaries.Env)); err != nil {
		return err
	}
	env.pins = a.toolconf
	return nil
}
