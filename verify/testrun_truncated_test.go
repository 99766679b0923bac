package verify

import (
	"github.com/capstan-dev/capstan/event"

	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// truncationNote is the line the capture puts where it left bytes out,
// as the capture writes it.
func truncationNoteOfCapture(t *testing.T) string {
	t.Helper()
	out, err := RunCommand(context.Background(), CommandSpec{Command: "yes x | head -c 100", Dir: t.TempDir(), OutputCap: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.Stdout, "\n") {
		if strings.HasPrefix(l, "[capstan:") {
			return l
		}
	}
	t.Fatalf("no note in %q", out.Stdout)
	return ""
}

// TestParseIgnoresTheTruncationNote: the note the capture puts between
// the kept start and end of an output is no test result for any runner,
// wherever it falls: it adds no runner, no test and no count. (It can
// take some away, as any line there can: it ends jest's describe blocks,
// so a test after it is named without those the left-out part opened and
// matches no baseline test by mistake; between unittest's "Ran N tests"
// and its status line it leaves the counts unknown.)
func TestParseIgnoresTheTruncationNote(t *testing.T) {
	note := truncationNoteOfCapture(t)
	if r, ok := ParseTestRun(note + "\n"); ok {
		t.Fatalf("the note parses as a run: %+v", r)
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.txt"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, wantOK := ParseTestRun(string(b))
		ls := strings.SplitAfter(string(b), "\n")
		for i := range ls {
			with := strings.Join(ls[:i], "") + note + "\n" + strings.Join(ls[i:], "")
			got, ok := ParseTestRun(with)
			if !ok {
				continue
			}
			if !wantOK || len(got.Runners) > len(want.Runners) || len(got.Tests) > len(want.Tests) ||
				got.Passed > want.Passed || got.Failed > want.Failed || got.Skipped > want.Skipped {
				t.Fatalf("%s: the note before line %d adds to the run:\n%+v\nwant %+v", f, i+1, got, want)
			}
			if reflect.DeepEqual(got, want) {
				continue
			}
			if !strings.HasPrefix(filepath.Base(f), "jest") && !strings.HasPrefix(filepath.Base(f), "unittest") {
				t.Errorf("%s: the note before line %d changes the run:\n%+v\nwant %+v", f, i+1, got, want)
			}
		}
	}
}

// bigGoRun prints about 2 MiB of passing go test -v results, then a
// failing test and go test's summary.
const bigGoRun = `awk 'BEGIN { for (i = 0; i < 45000; i++) printf "=== RUN   TestPass%d\n--- PASS: TestPass%d (0.00s)\n", i, i }'; ` +
	`echo '=== RUN   TestAdd'; echo '--- FAIL: TestAdd (0.00s)'; echo FAIL; echo 'FAIL	example.com/calc	0.123s'; exit 1`

// TestParseOutputOfATruncatedRun: past the output cap the parser still
// sees the end of the run, where the failure is, and knows the run was
// cut.
func TestParseOutputOfATruncatedRun(t *testing.T) {
	out, err := RunCommand(context.Background(), CommandSpec{Command: bigGoRun, Dir: t.TempDir()})
	if err != nil || !out.Truncated {
		t.Fatalf("truncated=%v %v", out.Truncated, err)
	}
	r, ok := ParseTestRunOutput(out, "")
	if !ok || !r.Truncated || r.Outcomes()["example.com/calc.TestAdd"] != Failed || r.Outcomes()["example.com/calc.TestPass0"] != Passed {
		t.Fatalf("ok=%v truncated=%v, %d tests, TestAdd %q", ok, r.Truncated, len(r.Tests), r.Outcomes()["example.com/calc.TestAdd"])
	}
	if r.Ran() >= 45001 {
		t.Fatalf("a truncated run counts %d tests", r.Ran())
	}
}

// TestCompareTruncated: a run whose output was cut is judged by what its
// kept start and end show — never a test lost, nor a pass, because of
// the part left out.
func TestCompareTruncated(t *testing.T) {
	pass := func(names ...string) []string {
		var ls []string
		for _, n := range names {
			ls = append(ls, "--- PASS: "+n+" (0.00s)")
		}
		return ls
	}
	base := baselineOf(t, goV(pass("TestA", "TestB", "TestC")...))
	cut := func(s string) (event.TestRun, bool) {
		r, ok := ParseTestRun(s)
		r.Truncated = true
		return r, ok
	}
	for _, c := range []struct {
		name, now string
		pattern   string
		unseen    []string
		skipped   []string
	}{
		{"every baseline test shown", goV(pass("TestA", "TestB", "TestC", "TestNew")...), "", nil, nil},
		{"a baseline test in the part left out", goV(pass("TestA", "TestC")...), PatternTestsOutputTruncated,
			[]string{"example.com/app.TestB"}, nil},
		{"a baseline test shown skipped", goV("--- SKIP: TestA (0.00s)", "--- PASS: TestC (0.00s)"), PatternTestsSkipped,
			[]string{"example.com/app.TestB"}, []string{"example.com/app.TestA"}},
		{"no test shown", "ok  \texample.com/app\t0.001s\n", PatternTestsOutputTruncated,
			[]string{"example.com/app.TestA", "example.com/app.TestB", "example.com/app.TestC"}, nil},
		{"no test run in what was kept", "lots of log\n", PatternTestsOutputTruncated, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			now, ok := cut(c.now)
			l, lost := CompareTestRuns(base, now, ok)
			if lost != (c.pattern != "") || l.Pattern != c.pattern || !slices.Equal(l.Unseen, c.unseen) || !slices.Equal(l.Skipped, c.skipped) ||
				len(l.Disappeared) != 0 || l.Ran != -1 {
				t.Fatalf("lost=%v %+v", lost, l)
			}
		})
	}
	// Counts only: a kept summary at or above the baseline's count passes;
	// below it, the count of the whole run is not known.
	counts := baselineOf(t, "1 failed, 2 passed in 0.01s\n")
	for now, pattern := range map[string]string{
		"3 passed in 0.01s\n": "",
		"2 passed in 0.01s\n": PatternTestsOutputTruncated,
		"log only\n":          PatternTestsOutputTruncated,
	} {
		r, ok := cut(now)
		if l, _ := CompareTestRuns(counts, r, ok); l.Pattern != pattern {
			t.Errorf("%q: %+v, want %q", now, l, pattern)
		}
	}
	// A baseline that was cut too: only some test must be shown running.
	cutBase := baselineOf(t, goV(pass("TestA", "TestB", "TestC")...))
	cutBase.Truncated = true
	if r, ok := cut(goV(pass("TestA")...)); true {
		if l, lost := CompareTestRuns(cutBase, r, ok); lost {
			t.Errorf("cut baseline, a test shown: %+v", l)
		}
	}
	if r, ok := cut("ok  \texample.com/app\t0.001s\n"); true {
		if l, _ := CompareTestRuns(cutBase, r, ok); l.Pattern != PatternTestsOutputTruncated {
			t.Errorf("cut baseline, no test shown: %+v", l)
		}
	}
}

// TestGuardOnATruncatedRun: the guard journals that the run was cut, and
// its retry params say what is not known and why.
func TestGuardOnATruncatedRun(t *testing.T) {
	ev := &events{}
	g := &LostTestsGuard{Baselines: map[string]*event.TestBaseline{"tests": baselineOf(t, goV("--- FAIL: TestAdd (0.00s)", "--- PASS: TestSub (0.00s)"))}, Events: ev}
	vr, err := g.CheckOutputs(context.Background(), []event.ValidatorRun{{Validator: "tests", Command: "go test -v ./...",
		Output: event.ValidatorOutput{Stdout: goV("--- PASS: TestAdd (0.00s)"), Truncated: true}}})
	if err != nil || vr.Valid || vr.Pattern != PatternTestsOutputTruncated ||
		!slices.Equal(vr.Params["unseenTests"].([]string), []string{"example.com/app.TestSub"}) ||
		!strings.Contains(vr.Params["currentCount"].(string), "output cap") || !strings.Contains(vr.Params["restore"].(string), "example.com/app.TestSub") {
		t.Fatalf("%+v %v", vr, err)
	}
	if _, has := vr.Params["disappearedTests"]; has {
		t.Fatalf("a test in the part left out reported lost: %+v", vr.Params)
	}
	if !slices.Equal(ev.types, []string{string(event.KindTestCompare)}) {
		t.Fatalf("events %v", ev.types)
	}
}
