package verify

import (
	"context"
	"github.com/capstan-dev/capstan/event"
	"slices"
	"strings"
)

// GuardName is the validator name a protected-file check reports under
// (completion.check's "verified", the retry prompt's validator).
const ProtectedFilesGuardName = "protected-files"

// Guard checks the protected files of a work dir against baselines in
// the verdict stage, before the validators run.
type ProtectedFilesGuard struct {
	// Baseline is the run's baseline (runner.verification.protect, taken
	// at its start or journaled); nil when the run protects nothing.
	Baseline *event.ProtectBaseline
	// Step is the current step's baseline (its protect globs, taken when it
	// was entered); nil when the step protects nothing.
	Step *event.ProtectBaseline
	// Dir is the work dir.
	Dir string
	// Requests says whether the agent takes requests to change protected
	// files (runner.verification.testChanges human or hiddenTests): the
	// retry prompt then tells the model how to ask.
	Requests bool
}

// Name implements verdict.Guard.
func (g *ProtectedFilesGuard) Name() string { return ProtectedFilesGuardName }

// Check implements verdict.Guard: a failing result with pattern
// protected-changed and the params protectedFiles (["modified: x", …]),
// diff and restore when a protected file changed.
func (g *ProtectedFilesGuard) Check(context.Context) (event.ValidationResult, error) {
	var changes []event.FileChange
	var globs []string
	seen := map[string]bool{}
	for _, b := range []*event.ProtectBaseline{g.Baseline, g.Step} {
		if b == nil {
			continue
		}
		ch, err := CheckProtected(b, g.Dir)
		if err != nil {
			return event.ValidationResult{}, err
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
		return event.ValidationResult{Valid: true, Validator: ProtectedFilesGuardName}, nil
	}
	slices.SortFunc(changes, func(x, y event.FileChange) int { return strings.Compare(x.Path, y.Path) })
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
	ask := "If the task cannot be done without changing them, say so: end your answer with a line starting " + CannotCompleteMarker + " and your reason, then your evidence."
	if g.Requests {
		ask = "If a test itself contradicts the task's specification, you may instead keep your change to that file and ask for it: end your answer with one line per file, " +
			TestChangeMarker + " <file> <reason>; the change counts only once it is approved, and only for the files you name. " + ask
	}
	return event.ValidationResult{Validator: ProtectedFilesGuardName, Pattern: PatternProtectedChanged,
		Params: map[string]any{
			"protectedFiles": files,
			"diff":           strings.TrimRight(diff.String(), "\n"),
			"restore": "These files are protected (" + strings.Join(globs, ", ") +
				"): they define how your work is checked, so you may read them but not change, delete or add them. " +
				"Restore each one exactly to its content at the start of the run (in the diff, '-' lines are the original, '+' lines your change; " +
				"delete added files), then make the checks pass by changing the code under test. " + ask,
		}}, nil
}
