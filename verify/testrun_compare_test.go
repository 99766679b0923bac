package verify

import (
	"github.com/capstan-dev/capstan/event"

	"context"
	"slices"
	"strings"
	"testing"
)

func goV(lines ...string) string {
	return "=== RUN   TestX\n" + strings.Join(lines, "\n") + "\nok  \texample.com/app\t0.001s\n"
}

func baselineOf(t *testing.T, out string) *event.TestBaseline {
	t.Helper()
	r, ok := ParseTestRun(out)
	if !ok {
		t.Fatalf("baseline %q not parsed", out)
	}
	return &event.TestBaseline{Validator: "tests", Command: "go test -v ./...", Parsed: true, Run: r}
}

func TestCompareRules(t *testing.T) {
	base := baselineOf(t, goV("--- FAIL: TestAdd (0.00s)", "--- PASS: TestSub (0.00s)", "--- SKIP: TestLater (0.00s)"))
	for _, c := range []struct {
		name, now   string
		pattern     string
		disappeared []string
		skipped     []string
	}{
		{"fixed", goV("--- PASS: TestAdd (0.00s)", "--- PASS: TestSub (0.00s)", "--- SKIP: TestLater (0.00s)"), "", nil, nil},
		{"a new test and a skipped one run now", goV("--- PASS: TestAdd (0.00s)", "--- PASS: TestSub (0.00s)", "--- PASS: TestLater (0.00s)", "--- PASS: TestNew (0.00s)"), "", nil, nil},
		{"output of no test runner", "all fine\n", PatternTestsNoneRun, nil, nil},
		{"no test files", "?   \texample.com/app\t[no test files]\n", PatternTestsNoneRun, nil, nil},
		{"binary exited before any test", "ok  \texample.com/app\t0.001s\n", PatternTestsNoneRun, nil, nil},
		{"failing test deleted", goV("--- PASS: TestSub (0.00s)", "--- PASS: TestOther (0.00s)"), PatternTestsDisappeared, []string{"example.com/app.TestAdd"}, nil},
		{"failing test skipped", goV("--- SKIP: TestAdd (0.00s)", "--- PASS: TestSub (0.00s)"), PatternTestsSkipped, nil, []string{"example.com/app.TestAdd"}},
		{"deleted beats skipped", goV("--- SKIP: TestAdd (0.00s)", "--- PASS: TestNew (0.00s)"), PatternTestsDisappeared, []string{"example.com/app.TestSub"}, []string{"example.com/app.TestAdd"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			now, ok := ParseTestRun(c.now)
			l, lost := CompareTestRuns(base, now, ok)
			if lost != (c.pattern != "") || l.Pattern != c.pattern || !slices.Equal(l.Disappeared, c.disappeared) || !slices.Equal(l.Skipped, c.skipped) {
				t.Fatalf("lost=%v %+v", lost, l)
			}
		})
	}
}

// Runners that print counts only: the number of tests that ran must not
// drop, and zero is a failure.
func TestCompareCounts(t *testing.T) {
	base := baselineOf(t, "1 failed, 1 passed in 0.01s\n")
	for now, pattern := range map[string]string{
		"2 passed in 0.01s\n":             "",
		"3 passed in 0.01s\n":             "",
		"1 passed, 1 skipped in 0.01s\n":  PatternTestsCountDropped,
		"1 passed, 1 deselected in 0.01s": PatternTestsCountDropped,
		"no tests ran in 0.01s\n":         PatternTestsNoneRun,
		"2 skipped in 0.01s\n":            PatternTestsNoneRun,
	} {
		r, ok := ParseTestRun(now)
		if l, _ := CompareTestRuns(base, r, ok); l.Pattern != pattern {
			t.Errorf("%q: %+v, want %q", now, l, pattern)
		}
	}
	// A baseline that ran no test still fails a run that runs none.
	zero := baselineOf(t, "no tests ran in 0.01s\n")
	r, ok := ParseTestRun("no tests ran in 0.01s\n")
	if l, lost := CompareTestRuns(zero, r, ok); !lost || l.Pattern != PatternTestsNoneRun {
		t.Fatalf("%+v", l)
	}
}

// A forged summary does not hide a test that a per-test baseline listed.
func TestCompareForgedSummary(t *testing.T) {
	base := baselineOf(t, "tests/t.py::test_a FAILED [50%]\ntests/t.py::test_b PASSED [100%]\n1 failed, 1 passed in 0.01s\n")
	now, ok := ParseTestRun("tests/t.py::test_b PASSED [100%]\n===== 99 passed in 0.01s =====\n")
	l, lost := CompareTestRuns(base, now, ok)
	if !lost || l.Pattern != PatternTestsDisappeared || !slices.Equal(l.Disappeared, []string{"tests/t.py::test_a"}) {
		t.Fatalf("%+v", l)
	}
}

type events struct{ types []string }

func (e *events) Emit(p event.Payload) {
	typ, _ := string(p.EventKind()), any(p)
	e.types = append(e.types, typ)
}

func TestGuardChecksRunsWithABaseline(t *testing.T) {
	ev := &events{}
	g := &LostTestsGuard{Baselines: map[string]*event.TestBaseline{"tests": baselineOf(t, goV("--- FAIL: TestAdd (0.00s)"))}, Events: ev}
	out := func(s string) event.ValidatorOutput { return event.ValidatorOutput{Stdout: s} }
	// Runs of validators without a baseline are not compared.
	vr, err := g.CheckOutputs(context.Background(), []event.ValidatorRun{{Validator: "lint", Command: "golangci-lint run", Output: out("")}})
	if err != nil || !vr.Valid || vr.Validator != "" || len(ev.types) != 0 {
		t.Fatalf("%+v %v %v", vr, err, ev.types)
	}
	vr, err = g.CheckOutputs(context.Background(), []event.ValidatorRun{{Validator: "tests", Command: "go test -v ./...",
		Output: out("?   \texample.com/app\t[no test files]\n")}})
	if err != nil || vr.Valid || vr.Validator != LostTestsGuardName || vr.Pattern != PatternTestsNoneRun ||
		!strings.Contains(vr.Params["restore"].(string), CannotCompleteMarker) || vr.Params["testCommand"] != "go test -v ./..." ||
		vr.Params["baselineCount"] != "1" || vr.Params["currentCount"] != "0" {
		t.Fatalf("%+v %v", vr, err)
	}
	if !slices.Equal(ev.types, []string{string(event.KindTestCompare)}) {
		t.Fatalf("events %v", ev.types)
	}
	// A timed-out run is no test run.
	vr, _ = g.CheckOutputs(context.Background(), []event.ValidatorRun{{Validator: "tests",
		Output: event.ValidatorOutput{Stdout: goV("--- PASS: TestAdd (0.00s)"), TimedOut: true}}})
	if vr.Valid || vr.Pattern != PatternTestsNoneRun {
		t.Fatalf("%+v", vr)
	}
}
