package agent

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

// testConditions are the command validators of the run that run tests
// (agentdir.RunsTests), each once: runner.completion.validators first, then
// the steps' completionConditions by step id, each with the params of the
// first condition naming it.
func (a *Agent) testConditions() []agentdir.CompletionCondition {
	var out []agentdir.CompletionCondition
	seen := map[string]bool{}
	add := func(c agentdir.CompletionCondition) {
		v, ok := a.reg.Validators[c.Validator]
		if seen[c.Validator] || !ok || v.Type != "command" || !agentdir.RunsTests(v.Command) {
			return
		}
		seen[c.Validator] = true
		out = append(out, c)
	}
	for _, name := range a.spec.Runner.Completion.Validators {
		add(agentdir.CompletionCondition{Validator: name})
	}
	ids := make([]string, 0, len(a.reg.Steps))
	for id := range a.reg.Steps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for _, c := range a.reg.Steps[id].CompletionConditions {
			add(c)
		}
	}
	return out
}

// outputGuards are the verdict stage's output guards: no lost tests when
// a validator runs tests (unless runner.verification.testBaseline is
// false), then the hidden tests when the agent has them. Their baselines
// are set by testBaselines and hiddenBaselines.
func (a *Agent) outputGuards() []verdict.OutputGuard {
	var guards []verdict.OutputGuard
	if a.spec.Runner.Verification.TestBaselineOn() && len(a.testConditions()) > 0 {
		a.testGuard = &verify.LostTestsGuard{Baselines: map[string]*event.TestBaseline{}, Events: a.emit, Dir: a.workDir}
		guards = append(guards, a.testGuard)
	}
	if g := a.hiddenGuard(); g != nil {
		guards = append(guards, g)
	}
	return guards
}

// testBaselines gives the no-lost-tests guard its baselines: a resumed
// run's journaled ones, otherwise a run of each test validator now, before
// the first iteration (the first verification comes after the model has
// acted, so it cannot serve). It returns the baselines to journal and the
// warnings to journal with them. Interrupted (ctx canceled) while they
// run, it returns none and no error: Start journals run.start all the
// same, and Run ends the run as canceled, resumable.
func (a *Agent) testBaselines(ctx context.Context, r *RunRecord) ([]*event.TestBaseline, []string, error) {
	g := a.testGuard
	if g == nil {
		return nil, nil, nil
	}
	var taken []*event.TestBaseline
	var warnings []string
	conds := a.testConditions()
	if r == nil || len(r.TestBaselines) < len(conds) {
		act := event.Activity{Kind: event.ActivityBaseline, Name: "test baseline"}
		start := time.Now()
		event.EmitActivity(a.emit, event.ActivityStartEvent{Activity: act})
		defer func() {
			act.Took = time.Since(start)
			event.EmitActivity(a.emit, event.ActivityEndEvent{Activity: act})
		}()
	}
	for _, c := range conds {
		if r != nil && r.TestBaselines[c.Validator] != nil {
			g.Baselines[c.Validator] = r.TestBaselines[c.Validator]
			continue
		}
		run, err := a.rt.verifier.RunCommandValidator(ctx, c)
		if err != nil && ctx.Err() != nil {
			// Interrupted (Ctrl-C) while the baseline ran: the run starts
			// without it and Run ends it at once as canceled, journaled
			// and resumable; a resume takes the baseline again (no model
			// work happened yet).
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		b := &event.TestBaseline{Validator: c.Validator, Command: run.Command, ExitCode: run.Output.ExitCode,
			Truncated: run.Output.Truncated, DurationMs: run.Output.DurationMs}
		a.testBaselineMs += run.Output.DurationMs
		b.Run, b.Parsed = verify.ParseTestRunOutput(run.Output, a.workDir)
		if b.Run.Source == verify.SourceReport {
			// read from the whole report: the output cap did not cut it
			b.Truncated = b.Run.Truncated
		}
		if r != nil && len(r.Iterations) > 0 {
			warnings = append(warnings, fmt.Sprintf("the resumed run's journal has no test baseline of validator %q; "+
				"its tests are compared with a run taken now, so a test lost before this resume is not detected", c.Validator))
		}
		switch {
		case !b.Parsed:
			warnings = append(warnings, fmt.Sprintf("validator %q runs tests, but its output before the first iteration is no test run capstan reads "+
				"(go test -v, pytest -v, python -m unittest -v, jest --verbose, vitest --reporter=verbose, cargo test): "+
				"lost tests are not detected for it", c.Validator))
		case !b.Run.PerTest:
			warnings = append(warnings, fmt.Sprintf("validator %q does not list its tests one by one (%s): "+
				"only a run of no test and a drop in the number of tests are detected, not which tests were lost or skipped; "+
				"see capstan validate for the flag to add", c.Validator, b.Command))
		}
		g.Baselines[c.Validator] = b
		taken = append(taken, b)
	}
	return taken, warnings, nil
}

// emitTestBaselines journals the baselines and their warnings.
func (a *Agent) emitTestBaselines(bs []*event.TestBaseline, warnings []string) {
	for _, w := range warnings {
		a.emit.Emit(event.Warning(w))
	}
	for _, b := range bs {
		a.emit.Emit(b)
	}
}

// hasCommandValidator reports whether the registry declares a command
// validator.
func hasCommandValidator(reg *agentdir.Registry) bool {
	for _, v := range reg.Validators {
		if v.Type == "command" {
			return true
		}
	}
	return false
}
