package agent

import (
	"context"
	"fmt"
	"os"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verify"
)

// loadHidden reads the hidden test files (runner.verification.hidden) from
// the pinned definition, or from the agent folder when the definition was
// built in Go; nil when there are none.
func (a *Agent) loadHidden() (*verify.HiddenSet, error) {
	globs := a.spec.Runner.Verification.Hidden
	if len(globs) == 0 {
		return nil, nil
	}
	fsys := a.def.FS()
	if fsys == nil {
		if a.def.Dir() == "" {
			return nil, fmt.Errorf("runner.verification.hidden: the agent has no folder to read the hidden tests from")
		}
		fsys = os.DirFS(a.def.Dir())
	}
	return verify.LoadHidden(fsys, globs)
}

// hiddenGuard is the hidden-tests guard of the verdict stage; nil when the
// agent has no hidden tests or no validator runs tests.
func (a *Agent) hiddenGuard() *verify.HiddenGuard {
	if a.hidden == nil || len(a.testConditions()) == 0 {
		return nil
	}
	a.hiddenCheck = &verify.HiddenGuard{Set: a.hidden, Dir: a.workDir, Events: a.emit, Run: a.runTestValidator}
	return a.hiddenCheck
}

// runTestValidator runs the test validator name with the params of its
// condition, as the verdict stage does.
func (a *Agent) runTestValidator(ctx context.Context, name string) (event.ValidatorRun, bool, error) {
	for _, c := range a.testConditions() {
		if c.Validator == name {
			run, err := a.rt.verifier.RunCommandValidator(ctx, c)
			return run, run.Passed, err
		}
	}
	return event.ValidatorRun{}, false, fmt.Errorf("hidden tests: %q is not a test validator of the run", name)
}

// hiddenBaselines gives the hidden-tests guard its baselines: a resumed
// run's journaled ones, otherwise a run of each test validator with the
// hidden files placed, now, before the first iteration (the hidden tests
// are the tests of that run that its run without them does not list). It
// returns the baselines to journal and the warnings to journal with them.
func (a *Agent) hiddenBaselines(ctx context.Context, r *RunRecord) ([]*event.HiddenResult, []string, error) {
	g := a.hiddenCheck
	if g == nil {
		return nil, nil, nil
	}
	if g.Baselines == nil {
		g.Baselines = map[string]*event.HiddenResult{}
	}
	var taken []*event.HiddenResult
	var warnings []string
	for _, c := range a.testConditions() {
		if r != nil && r.HiddenBaselines[c.Validator] != nil {
			g.Baselines[c.Validator] = r.HiddenBaselines[c.Validator]
			continue
		}
		var visible event.TestRun
		var parsed bool
		if a.testGuard != nil && a.testGuard.Baselines[c.Validator] != nil {
			b := a.testGuard.Baselines[c.Validator]
			visible, parsed = b.Run, b.Parsed
		} else {
			run, err := a.rt.verifier.RunCommandValidator(ctx, c)
			if err != nil {
				return nil, nil, err
			}
			visible, parsed = verify.ParseTestRunOutput(run.Output, a.workDir)
		}
		res, err := g.TakeBaseline(ctx, c.Validator, visible, parsed)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case !res.PerTest:
			warnings = append(warnings, fmt.Sprintf("validator %q does not list its tests one by one: of its hidden tests only "+
				"whether its command passes with them is checked (see capstan validate for the flag to add)", c.Validator))
		case len(res.Tests) == 0:
			warnings = append(warnings, fmt.Sprintf("with the hidden test files placed, validator %q runs no test it does not run without them: "+
				"check that runner.verification.hidden puts them where %q collects tests", c.Validator, c.Validator))
		}
		taken = append(taken, res)
	}
	return taken, warnings, nil
}
