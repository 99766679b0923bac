package agent

import (
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify/protect"
)

// ProtectBaseline is the journal type of the protect.baseline event: the
// digests (and texts) of the protected files when the run started
// (payload protect.Baseline). A resumed run checks against the first one
// its journal holds.
const ProtectBaseline = "protect.baseline"

// protection holds runner.verification.protect at run time.
type protection struct {
	matcher *protect.Matcher // nil when nothing is protected
	guard   *protect.Guard   // its Baseline is set by Start
}

// protectMatcher returns the matcher of runner.verification.protect, nil
// when the list is empty.
func (a *Agent) protectMatcher() (*protect.Matcher, error) {
	globs := a.spec.Runner.Verification.Protect
	if a.protection.matcher != nil || len(globs) == 0 {
		return a.protection.matcher, nil
	}
	m, err := protect.NewMatcher(globs)
	if err != nil {
		return nil, err
	}
	a.protection.matcher = m
	return m, nil
}

// protectedFunc is the builtin tools' Protected callback (nil when nothing
// is protected).
func (a *Agent) protectedFunc() (func(string) bool, error) {
	m, err := a.protectMatcher()
	if err != nil || m == nil {
		return nil, err
	}
	return m.Match, nil
}

// guards are the verdict stage's guards: the protected-files check when
// anything is protected.
func (a *Agent) guards() ([]verdict.Guard, error) {
	m, err := a.protectMatcher()
	if err != nil || m == nil {
		return nil, err
	}
	a.protection.guard = &protect.Guard{Dir: a.workDir}
	return []verdict.Guard{a.protection.guard}, nil
}

// protectBaseline sets the guard's baseline: the resumed run's journaled
// one, otherwise a new one taken now. It returns the baseline to journal
// (nil when it came from the journal or nothing is protected).
func (a *Agent) protectBaseline(r *RunRecord) (*protect.Baseline, error) {
	g := a.protection.guard
	if g == nil {
		return nil, nil
	}
	if r != nil && r.ProtectBaseline != nil {
		g.Baseline = r.ProtectBaseline
		return nil, nil
	}
	b, err := protect.Take(a.workDir, a.protection.matcher)
	if err != nil {
		return nil, err
	}
	if r != nil {
		a.emit.Emit(journal.Warning, map[string]string{"message": "the resumed run's journal has no baseline of its protected files; " +
			"they are checked against their state now, so a change made before this resume is not detected"})
	}
	g.Baseline = b
	return b, nil
}
