package agent

import (
	"errors"
	"path/filepath"
	"sort"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/proc"

	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

// compiled is what an agent's files decide before anything is opened: the
// completion handler, the validators that verify it and the step machine.
// compile makes it, for New and for `capstan validate` alike.
type compiled struct {
	completion verdict.CompletionHandler
	verifier   *verify.CompletionValidator
	machine    *verdict.Machine
}

// runtimeEnv is what compile needs beyond the configuration.
type runtimeEnv struct {
	workDir string
	vars    map[string]string // parameter values, for ${param} in options
	emit    event.Emitter
	runID   string
	schemas verify.SchemaSource
	// sandbox confines command validators (runner.boundaries.sandbox);
	// nil runs them with the user's rights.
	sandbox *sandbox.CommandRunner
	// pins is the toolchain configuration pinned for unconfined command
	// validators (nil: none).
	pins verify.PinnedConfig
	// git reads the repository configuration whose programs the
	// validators' git commands are kept from running (nil: the fixed pins
	// only).
	git *proc.Git
}

// compile turns a definition into its runtime objects. Every problem it
// finds is returned at once (errors.Join of located CONFIG_INVALID
// errors); File is relative to the agent folder dir.
func compile(dir string, spec *agentdir.Definition, reg *agentdir.Registry, cfg Config, env runtimeEnv) (*compiled, error) {
	regFile := registryFile(spec)
	rt := &compiled{}
	var errs []error
	var confine verify.CommandSandbox
	if env.sandbox != nil { // never a nil *CommandRunner in the interface
		confine = env.sandbox
	}
	verifier, err := verify.NewCompletionValidator(verify.ValidatorConfig{
		Validators: reg.Validators,
		Patterns:   reg.CompletionPatterns,
		WorkDir:    env.workDir,
		Schemas:    env.schemas,
		Emitter:    env.emit,
		File:       regFile,
		Custom:     cfg.Validators,
		Env:        spec.Runner.Boundaries.Env,
		Sandbox:    confine,
		Pins:       env.pins,
		Git:        env.git,
	})
	if err != nil {
		errs = append(errs, unjoin(err)...)
	}
	rt.verifier = verifier
	names := make([]string, 0, len(reg.Validators))
	for name := range reg.Validators {
		names = append(names, name)
	}
	sort.Strings(names)
	h, err := verdict.CompletionFromConfig(spec.Runner.Completion, verdict.HandlerDeps{
		HasValidator:   func(name string) bool { _, ok := reg.Validators[name]; return ok },
		ValidatorNames: names,
		RegistryFile:   regFile,
		Handlers:       cfg.CompletionHandlers,
		Handler:        cfg.Completion,
		WorkDir:        env.workDir,
		Params:         env.vars,
		File:           agentdir.AgentFile,
	})
	if err != nil {
		errs = append(errs, unjoin(err)...)
	}
	rt.completion = h
	// Only the steps a run can enter are built: validate reports the
	// problems of the others as warnings, so they must not stop the run.
	m, err := verdict.NewMachine(reachableOnly(reg), verdict.MachineOptions{AgentName: spec.Name, RunID: env.runID, Emitter: env.emit, File: regFile})
	if err != nil {
		errs = append(errs, unjoin(err)...)
	}
	rt.machine = m
	if len(errs) > 0 {
		return nil, withAgentDir(dir, errs)
	}
	return rt, nil
}

// withAgentDir joins errs, their files made absolute under dir so that a
// build error names the file to open; validate reports them relative.
func withAgentDir(dir string, errs []error) error {
	if dir != "" {
		for _, err := range errs {
			if e := agenterr.From(err); e != nil && e.File != "" && !filepath.IsAbs(e.File) {
				e.File = filepath.Join(dir, e.File)
			}
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// reachableOnly returns reg without the steps no run can enter from its
// entry step (agentdir.Reachable); reg itself when all are reachable or the
// entry is unknown (NewMachine then reports it).
func reachableOnly(reg *agentdir.Registry) *agentdir.Registry {
	seen := agentdir.Reachable(reg)
	if seen == nil || len(seen) == len(reg.Steps) {
		return reg
	}
	out := *reg
	out.Steps = make(map[string]agentdir.Step, len(seen))
	for id, st := range reg.Steps {
		if seen[id] {
			out.Steps[id] = st
		}
	}
	return &out
}

// unjoin splits an errors.Join of problems into the problems.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
