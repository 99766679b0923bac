package agent

import (
	"slices"

	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

// protection holds runner.verification.protect and the steps' protect
// globs at run time.
type protection struct {
	matcher *verify.GlobMatcher            // the run's; nil when it protects nothing
	steps   map[string]*verify.GlobMatcher // each step's that protects files
	guard   *verify.ProtectedFilesGuard    // nil when nothing is protected
	// step is the step whose baseline the guard holds ("" before the
	// first iteration).
	step string
	// resumed holds a resumed run's step baseline until the step it was
	// taken for is entered again.
	resumed *event.ProtectBaseline
}

// buildProtection compiles the protect globs of the run and its steps.
func (a *Agent) buildProtection() error {
	p := &a.protection
	if p.steps != nil {
		return nil
	}
	p.steps = map[string]*verify.GlobMatcher{}
	globs := a.spec.Runner.Verification.Protect
	if a.spec.Runner.Verification.ProtectRunnerConfigOn() {
		var commands []string
		for _, v := range a.reg.Validators {
			if v.Type == "command" {
				commands = append(commands, v.Command)
			}
		}
		for _, g := range verify.RunnerConfig(commands) {
			if !slices.Contains(globs, g) {
				globs = append(slices.Clone(globs), g)
			}
		}
	}
	if len(globs) > 0 {
		m, err := verify.NewGlobMatcher(globs)
		if err != nil {
			return err
		}
		p.matcher = m
	}
	for id, st := range a.reg.Steps {
		if len(st.Protect) == 0 {
			continue
		}
		m, err := verify.NewGlobMatcher(st.Protect)
		if err != nil {
			return err
		}
		p.steps[id] = m
	}
	if p.matcher != nil || len(p.steps) > 0 {
		p.guard = &verify.ProtectedFilesGuard{Dir: a.workDir, Requests: a.asksProtectedChange()}
	}
	return nil
}

// protectedFunc is the builtin tools' Protected callback: the run's globs
// and the current step's (nil when nothing is protected).
func (a *Agent) protectedFunc() (func(string) bool, error) {
	if err := a.buildProtection(); err != nil || a.protection.guard == nil {
		return nil, err
	}
	if a.asksProtectedChange() {
		// The model makes the change it asks for; the verdict checks
		// every change against the baseline and the approvals.
		return nil, nil
	}
	p := &a.protection
	return func(rel string) bool {
		if p.matcher.Match(rel) {
			return true
		}
		if a.flow == nil {
			return false
		}
		return p.steps[a.flow.currentStep()].Match(rel)
	}, nil
}

// guards are the verdict stage's guards: the protected-files check when
// anything is protected.
func (a *Agent) guards() ([]verdict.Guard, error) {
	if err := a.buildProtection(); err != nil || a.protection.guard == nil {
		return nil, err
	}
	return []verdict.Guard{a.protection.guard}, nil
}

// protectBaseline sets the guard's run baseline: the resumed run's
// journaled one, otherwise a new one taken now. It returns the baseline to
// journal (nil when it came from the journal or the run protects nothing).
func (a *Agent) protectBaseline(r *RunRecord) (*event.ProtectBaseline, error) {
	p := &a.protection
	if r != nil && r.StepBaseline != nil {
		p.resumed = r.StepBaseline
	}
	if p.matcher == nil {
		return nil, nil
	}
	if r != nil && r.ProtectBaseline != nil {
		p.guard.Baseline = r.ProtectBaseline
		return nil, nil
	}
	b, err := verify.TakeFilesBaseline(a.workDir, p.matcher)
	if err != nil {
		return nil, err
	}
	if r != nil {
		a.emit.Emit(event.Warning("the resumed run's journal has no baseline of its protected files; " +
			"they are checked against their state now, so a change made before this resume is not detected"))
	}
	p.guard.Baseline = b
	return b, nil
}

// enterStep gives the guard the baseline of step id when the run enters
// it: a resumed run's journaled one for the step it was in, otherwise one
// taken now (and journaled). Staying in a step keeps its baseline.
func (a *Agent) enterStep(id string) error {
	p := &a.protection
	if p.guard == nil || id == p.step {
		return nil
	}
	p.step, p.guard.Step = id, nil
	m := p.steps[id]
	if m == nil {
		return nil
	}
	if b := p.resumed; b != nil && b.Step == id {
		p.resumed, p.guard.Step = nil, b
		return nil
	}
	b, err := verify.TakeFilesBaseline(a.workDir, m)
	if err != nil {
		return err
	}
	b.Step = id
	p.guard.Step = b
	a.emit.Emit(b)
	return nil
}
