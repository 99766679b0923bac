package protect

import (
	"context"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/verify"
	"github.com/capstan-dev/capstan/verify/honest"
)

// GuardName is the validator name a protected-file check reports under
// (completion.check's "verified", the retry prompt's validator).
const GuardName = "protected-files"

// Guard checks the protected files of a work dir against baselines in
// the verdict stage, before the validators run.
type Guard struct {
	// Baseline is the run's baseline (runner.verification.protect, taken
	// at its start or journaled); nil when the run protects nothing.
	Baseline *Baseline
	// Step is the current step's baseline (its protect globs, taken when it
	// was entered); nil when the step protects nothing.
	Step *Baseline
	// Dir is the work dir.
	Dir string
}

// Name implements verdict.Guard.
func (g *Guard) Name() string { return GuardName }

// Check implements verdict.Guard: a failing result with pattern
// protected-changed and the params protectedFiles (["modified: x", …]),
// diff and restore when a protected file changed.
func (g *Guard) Check(context.Context) (verify.ValidationResult, error) {
	var changes []Change
	var globs []string
	seen := map[string]bool{}
	for _, b := range []*Baseline{g.Baseline, g.Step} {
		if b == nil {
			continue
		}
		ch, err := b.Check(g.Dir)
		if err != nil {
			return verify.ValidationResult{}, err
		}
		for _, c := range ch {
			if !seen[c.Path] {
				seen[c.Path] = true
				changes = append(changes, c)
			}
		}
		globs = append(globs, b.Globs...)
	}
	if len(changes) == 0 {
		return verify.ValidationResult{Valid: true, Validator: GuardName}, nil
	}
	slices.SortFunc(changes, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	files := make([]string, len(changes))
	var diff strings.Builder
	for i, c := range changes {
		files[i] = c.String()
		diff.WriteString("--- " + c.Path + " (" + c.Kind + ")\n")
		if c.Diff != "" {
			diff.WriteString(c.Diff + "\n")
		} else {
			diff.WriteString("(binary or too large to show)\n")
		}
	}
	return verify.ValidationResult{Validator: GuardName, Pattern: verify.PatternProtectedChanged,
		Params: map[string]any{
			"protectedFiles": files,
			"diff":           strings.TrimRight(diff.String(), "\n"),
			"restore": "These files are protected (" + strings.Join(globs, ", ") +
				"): they define how your work is checked, so you may read them but not change, delete or add them. " +
				"Restore each one exactly to its content at the start of the run (in the diff, '-' lines are the original, '+' lines your change; " +
				"delete added files), then make the checks pass by changing the code under test. " +
				"If the task cannot be done without changing them, say so: end your answer with a line starting " + honest.Marker + " and your reason, then your evidence.",
		}}, nil
}
