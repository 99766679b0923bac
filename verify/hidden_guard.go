package verify

import (
	"context"
	"fmt"

	"github.com/capstan-dev/capstan/event"
)

// HiddenGuardName is the name the hidden-tests check reports under
// (completion.check's "verified", the retry prompt's validator).
const HiddenGuardName = "hidden-tests"

// HiddenNotRun is the outcome of a hidden test of the baseline that a check's
// run did not list.
const HiddenNotRun event.TestOutcome = "not run"

// HiddenRunFunc runs a test validator (by name) as the verdict stage does and
// reports whether it passed.
type HiddenRunFunc func(ctx context.Context, validator string) (event.ValidatorRun, bool, error)

// HiddenGuard is the hidden-tests check of the verdict stage (a
// verdict.OutputGuard): after the validators passed, each test validator
// with a baseline runs again with the hidden files placed.
type HiddenGuard struct {
	Set *HiddenSet
	// Dir is the work dir.
	Dir string
	// Run runs a validator (the files are placed around it).
	Run HiddenRunFunc
	// Baselines are the hidden baselines by validator.
	Baselines map[string]*event.HiddenResult
	// Events receives a tests.hidden event per run (nil = dropped).
	Events event.Emitter
}

// Name implements verdict.OutputGuard.
func (g *HiddenGuard) Name() string { return HiddenGuardName }

// runPlaced runs validator with the hidden files in the work dir and
// removes them before it returns, with whatever else the run wrote there
// (see undoRunWrites).
func (g *HiddenGuard) runPlaced(ctx context.Context, validator string) (event.ValidatorRun, bool, error) {
	before, err := snapshotTree(g.Dir)
	if err != nil {
		return event.ValidatorRun{}, false, fmt.Errorf("hidden tests: the work dir before their run: %w", err)
	}
	undo, err := g.Set.Place(g.Dir)
	if err != nil {
		return event.ValidatorRun{}, false, err
	}
	run, ok, err := g.Run(ctx, validator)
	if uerr := undo(); uerr != nil && err == nil {
		err = uerr
	}
	if werr := undoRunWrites(g.Dir, before, g.Set.Paths()); werr != nil && err == nil {
		err = werr
	}
	return run, ok, err
}

// TakeBaseline runs validator with the hidden files placed; visible is its
// run without them (the no-lost-tests baseline, or a run taken for this),
// and the hidden tests are those this run lists that visible does not.
func (g *HiddenGuard) TakeBaseline(ctx context.Context, validator string, visible event.TestRun, visibleParsed bool) (*event.HiddenResult, error) {
	run, ok, err := g.runPlaced(ctx, validator)
	if err != nil {
		return nil, err
	}
	res := &event.HiddenResult{Validator: validator, Phase: event.HiddenPhaseBaseline, Passed: ok}
	now, parsed := ParseTestRunOutput(run.Output, g.Dir)
	if parsed && visibleParsed && now.PerTest && visible.PerTest {
		res.PerTest = true
		seen := visible.Outcomes()
		for _, t := range now.Tests {
			if _, had := seen[t.Name]; !had {
				res.Tests = append(res.Tests, t)
			}
		}
	}
	if g.Baselines == nil {
		g.Baselines = map[string]*event.HiddenResult{}
	}
	g.Baselines[validator] = res
	return res, nil
}

// Journal emits r as a tests.hidden event (TakeBaseline does not: the run
// journals its baselines after run.start).
func (g *HiddenGuard) Journal(r *event.HiddenResult) { g.emit(r) }

func (g *HiddenGuard) emit(r *event.HiddenResult) {
	if g.Events != nil {
		g.Events.Emit(r)
	}
}

// CheckOutputs implements verdict.OutputGuard: each run of a validator
// with a hidden baseline is repeated with the hidden files placed; the
// first whose hidden tests do not all run and pass (or, without a per-test
// listing, whose command fails) fails with PatternHiddenTestsFailed
// and the params hiddenFailed, hiddenTotal and restore, which say how many
// failed and nothing of which or why.
func (g *HiddenGuard) CheckOutputs(ctx context.Context, runs []event.ValidatorRun) (event.ValidationResult, error) {
	checked := false
	for _, r := range runs {
		b := g.Baselines[r.Validator]
		if b == nil {
			continue
		}
		checked = true
		run, ok, err := g.runPlaced(ctx, r.Validator)
		if err != nil {
			return event.ValidationResult{}, err
		}
		res := &event.HiddenResult{Validator: r.Validator, Phase: event.HiddenPhaseCheck, Passed: ok, PerTest: b.PerTest}
		if b.PerTest {
			now, _ := ParseTestRunOutput(run.Output, g.Dir)
			outcomes := now.Outcomes()
			for _, t := range b.Tests {
				o, listed := outcomes[t.Name]
				if !listed {
					o = HiddenNotRun
				}
				res.Tests = append(res.Tests, event.TestCase{Name: t.Name, Outcome: o})
			}
		}
		g.emit(res)
		failed, total := len(res.Failed()), len(res.Tests)
		if failed == 0 && ok {
			continue
		}
		if failed == 0 {
			// the command failed with no hidden test failing by name (the
			// visible run passed): count the run as one failure
			failed, total = 1, max(total, 1)
		}
		return event.ValidationResult{Validator: HiddenGuardName, Pattern: PatternHiddenTestsFailed, Params: map[string]any{
			"hiddenFailed": failed,
			"hiddenTotal":  total,
			"restore": fmt.Sprintf("Besides the tests you can see, `%s` is also checked against tests kept from you, and %d of those %d do not pass. "+
				"They test the task as specified, with other inputs than the visible tests: make the code correct in general, "+
				"not only for the cases the visible tests use. "+
				"If the task cannot be done as specified, say so: end your answer with a line starting %s and your reason, then your evidence.",
				r.Command, failed, total, CannotCompleteMarker),
		}}, nil
	}
	if !checked {
		return event.ValidationResult{Valid: true}, nil
	}
	return event.ValidationResult{Valid: true, Validator: HiddenGuardName}, nil
}
