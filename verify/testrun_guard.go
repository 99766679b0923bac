package verify

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/proc"
)

// GuardName is the name the no-lost-tests check reports under
// (completion.check's "verified", the retry prompt's validator).
const LostTestsGuardName = "no-lost-tests"

// Guard compares the runs of test validators with their baselines in the
// verdict stage, after the validators passed.
type LostTestsGuard struct {
	// Baselines are the test validators' baselines by validator name.
	Baselines map[string]*event.TestBaseline
	// Events receives a tests.compare event per comparison (nil = dropped).
	Events event.Emitter
	// Dir is the work dir (see ParseReport).
	Dir string
}

// Name implements verdict.OutputGuard.
func (g *LostTestsGuard) Name() string { return LostTestsGuardName }

// CheckOutputs implements verdict.OutputGuard: the first run that lost
// tests against its baseline fails, with the pattern of the rule it broke
// and the params disappearedTests, skippedTests, baselineCount,
// currentCount, testCommand and restore. When no run has a baseline the
// result passes with no Validator (nothing was checked).
func (g *LostTestsGuard) CheckOutputs(_ context.Context, runs []event.ValidatorRun) (event.ValidationResult, error) {
	compared := false
	for _, r := range runs {
		b := g.Baselines[r.Validator]
		if b == nil || !b.Parsed {
			continue
		}
		compared = true
		now, ok := ParseTestRunOutput(r.Output, g.Dir)
		loss, lost := CompareTestRuns(b, now, ok)
		c := event.TestComparison{Validator: r.Validator, Parsed: ok, Counted: now.Counted, Passed: now.Passed, Failed: now.Failed, Skipped: now.Skipped,
			Truncated: now.Truncated}
		if lost {
			c.Loss = &loss
		}
		if g.Events != nil {
			g.Events.Emit(c)
		}
		if !lost {
			continue
		}
		return event.ValidationResult{Validator: LostTestsGuardName, Pattern: loss.Pattern, Params: params(loss, b, r)}, nil
	}
	if !compared {
		return event.ValidationResult{Valid: true}, nil
	}
	return event.ValidationResult{Valid: true, Validator: LostTestsGuardName}, nil
}

func params(l event.TestLoss, b *event.TestBaseline, r event.ValidatorRun) map[string]any {
	p := map[string]any{
		"testCommand":   r.Command,
		"baselineCount": count(l.BaselineRan),
		"currentCount":  count(l.Ran),
		"restore": fmt.Sprintf("Before your first change, `%s` ran %s. %s"+
			"Do not delete, rename, skip or deselect tests, or keep them from being collected "+
			"(in test files, helpers, configuration or the code under test). Restore them, then make them pass by fixing the code under test. "+
			"If the task cannot be done without that, say so: end your answer with a line starting %s and your reason, then your evidence.",
			b.Command, tests(l.BaselineRan), rule(l.BaselineRan), CannotCompleteMarker),
	}
	if len(l.Disappeared) > 0 {
		p["disappearedTests"] = l.Disappeared
	}
	if len(l.Skipped) > 0 {
		p["skippedTests"] = l.Skipped
	}
	if l.ReportMissing {
		p["restore"] = fmt.Sprintf("Before your first change, `%s` wrote a machine-readable test report (go test -json, jest --json, "+
			"vitest --reporter=json, or pytest's JUnit XML) and capstan read its tests from it; `%s` wrote none now, so no test is known to run. "+
			"Restore the test command and its configuration (do not turn the reporter off), then make the tests pass by fixing the code under test. "+
			"If the task cannot be done without that, say so: end your answer with a line starting %s and your reason, then your evidence.",
			b.Command, r.Command, CannotCompleteMarker)
	}
	if l.Pattern == PatternTestsOutputTruncated {
		p["currentCount"] = "unknown (the output was longer than the validator's output cap; its middle was left out)"
		p["unseenTests"] = l.Unseen
		p["restore"] = fmt.Sprintf("`%s` printed more than the validator's output cap, so capstan kept only the start and the end of its output, "+
			"and they do not show that the tests that ran before your first change still run%s. "+
			"Make the test command print less (remove debug output and logging you added; do not delete, skip or deselect tests), "+
			"so that every test's result fits in the output. "+
			"If the task cannot be done without that, say so: end your answer with a line starting %s and your reason, then your evidence.",
			r.Command, unseen(l.Unseen), CannotCompleteMarker)
	}
	return p
}

func unseen(names []string) string {
	switch {
	case len(names) == 0:
		return ""
	case len(names) > 10:
		return fmt.Sprintf(" (%s and %d more are not in them)", strings.Join(names[:10], ", "), len(names)-10)
	}
	return " (" + strings.Join(names, ", ") + " are not in them)"
}

func rule(baseline int) string {
	if baseline == 0 {
		return "A run that executes no test verifies nothing: the command must run tests. "
	}
	return "Every test that ran then must still run, unskipped, and the command must run at least as many tests. "
}

func count(n int) string {
	if n < 0 {
		return "unknown (the output does not list or count its tests)"
	}
	return fmt.Sprint(n)
}

func tests(n int) string {
	switch {
	case n < 0:
		return "tests"
	case n == 1:
		return "1 test"
	}
	return fmt.Sprintf("%d tests", n)
}

// ParseOutput reads a validator's run: from its report (the whole
// standard output, ValidatorOutput.Report) when that holds a
// machine-readable test report (ParseReport, dir the work dir), with
// Run.Truncated set when the report was longer than its bound; otherwise
// Parse of its stdout and stderr together, with Run.Truncated set when
// the output was cut at the output cap. A timed-out run is no test run.
func ParseTestRunOutput(o event.ValidatorOutput, dir string) (event.TestRun, bool) {
	if o.TimedOut {
		return event.TestRun{Truncated: o.Truncated}, false
	}
	if o.Report != "" {
		if data, err := os.ReadFile(o.Report); err == nil {
			if r, ok := ParseReport(data, dir); ok {
				r.Truncated = o.ReportTruncated
				for i := range r.Tests {
					// names go to the journal and into prompts
					r.Tests[i].Name = proc.RedactSecrets(r.Tests[i].Name)
				}
				return r, true
			}
		}
	}
	text := o.Stdout
	if o.Stderr != "" {
		text += "\n" + o.Stderr
	}
	r, ok := ParseTestRun(text)
	r.Truncated = o.Truncated
	return r, ok
}
