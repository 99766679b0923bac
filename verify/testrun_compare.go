package verify

import "github.com/capstan-dev/capstan/event"

// Compare checks a later run of a validator against its baseline. ok is
// false when the run is no test run Parse reads (it then ran no test).
// The rules: a run that executes no test fails; every test that ran in
// the baseline (passed or failed) must still be listed, and not as
// skipped; the number of tests that ran must not drop.
//
// A run whose output was cut at the output cap (Run.Truncated) shows only
// its start and its end. What they show counts (a baseline test listed
// as skipped is skipped), but a test they do not show is neither lost nor
// still there, and the counts are at most the run's: such a run fails
// with PatternTestsOutputTruncated unless the kept parts show every test
// of the baseline running and at least as many tests as it ran. A
// baseline that was cut itself is held only to the rule against no test:
// the kept parts must show some test running.
//
// Compare reads what the test process printed. Code under test can print
// fake result lines (an init function, a TestMain, a conftest hook) and
// exit 0 before any test runs; the run then looks complete. Protected
// test files close the easy routes to that (TestMain, conftest.py), not
// the package under test: held-out tests the model never sees are the
// answer for tasks where that matters.
func CompareTestRuns(b *event.TestBaseline, now event.TestRun, ok bool) (event.TestLoss, bool) {
	l := event.TestLoss{BaselineRan: -1, Ran: -1}
	if b.Run.Counted {
		l.BaselineRan = b.Run.Ran()
	}
	baseCut := b.Truncated || b.Run.Truncated
	if ok && b.Run.Source == SourceReport && now.Source != SourceReport {
		// The report is the channel the baseline trusted; text printed
		// instead (a reporter turned off) does not stand for it.
		l.ReportMissing = true
		for _, t := range b.Run.Tests {
			if t.Outcome != Skipped {
				l.Disappeared = append(l.Disappeared, t.Name)
			}
		}
		l.Pattern = PatternTestsDisappeared
		if len(l.Disappeared) == 0 {
			l.Pattern = PatternTestsNoneRun
		}
		return l, true
	}
	if now.Truncated {
		return compareTruncated(b, baseCut, now, ok, l)
	}
	switch {
	case ok && now.Counted:
		l.Ran = now.Ran()
	case ok && b.Run.PerTest && len(now.Tests) == 0:
		// The same command listed its tests one by one before; listing
		// none now means none ran (go test -v whose binary exited early).
		l.Ran = 0
	}
	if !ok || l.Ran == 0 {
		l.Pattern, l.Ran = PatternTestsNoneRun, 0
		return l, true
	}
	if !baseCut {
		// A baseline without -v lists only its failures: those must not
		// be lost either.
		cur := now.Outcomes()
		for _, t := range b.Run.Tests {
			if t.Outcome == Skipped {
				continue
			}
			switch o, listed := cur[t.Name]; {
			// The same command listed every test before: a test it does
			// not list now is gone, whatever a summary line claims.
			case !listed && (now.PerTest || b.Run.PerTest):
				l.Disappeared = append(l.Disappeared, t.Name)
			case listed && o == Skipped:
				l.Skipped = append(l.Skipped, t.Name)
			}
		}
	}
	switch {
	case len(l.Disappeared) > 0:
		l.Pattern = PatternTestsDisappeared
	case len(l.Skipped) > 0:
		l.Pattern = PatternTestsSkipped
	case l.BaselineRan >= 0 && l.Ran >= 0 && l.Ran < l.BaselineRan:
		l.Pattern = PatternTestsCountDropped
	default:
		return l, false
	}
	return l, true
}

// compareTruncated is Compare of a run whose output was cut (see Compare).
func compareTruncated(b *event.TestBaseline, baseCut bool, now event.TestRun, ok bool, l event.TestLoss) (event.TestLoss, bool) {
	// shown is a lower bound of the tests that ran: those listed as run,
	// or the kept summaries' count when that is more.
	shown := 0
	if ok {
		cur := now.Outcomes()
		for _, t := range now.Tests {
			if t.Outcome != Skipped {
				shown++
			}
		}
		if now.Counted {
			shown = max(shown, now.Ran())
		}
		for _, t := range b.Run.Tests {
			if t.Outcome == Skipped {
				continue
			}
			switch o, listed := cur[t.Name]; {
			case listed && o == Skipped:
				l.Skipped = append(l.Skipped, t.Name)
			// As in a whole run, a test a baseline without -v lists (a
			// failure) may pass unlisted now unless the run lists every test.
			case !listed && !baseCut && (now.PerTest || b.Run.PerTest):
				l.Unseen = append(l.Unseen, t.Name)
			}
		}
	}
	switch {
	case len(l.Skipped) > 0:
		l.Pattern = PatternTestsSkipped
	case !ok, shown == 0 && (now.Counted || b.Run.PerTest), len(l.Unseen) > 0,
		!baseCut && now.Counted && l.BaselineRan > shown:
		l.Pattern = PatternTestsOutputTruncated
	default:
		return l, false
	}
	return l, true
}
