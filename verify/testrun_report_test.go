package verify

import (
	"github.com/capstan-dev/capstan/event"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func readReport(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func outcomes(r event.TestRun) map[string]event.TestOutcome { return r.Outcomes() }

// TestParseReportPytestJUnit: pytest's JUnit XML, printed after its -v
// text, names every test exactly — spaces, brackets and escaped unicode
// in parametrized ids included — and xfail counts as skipped.
func TestParseReportPytestJUnit(t *testing.T) {
	r, ok := ParseReport(readReport(t, "pytest-junit.report"), "")
	if !ok || r.Source != SourceReport || !r.PerTest {
		t.Fatalf("%+v %v", r, ok)
	}
	want := map[string]event.TestOutcome{
		"tests/test_x.py::test_x[select verrrylongcolumn from foo]": Passed,
		"tests/test_x.py::test_x[a[b]]":                             Passed,
		`tests/test_x.py::test_x[\xfcn\xef]`:                        Passed,
		"tests/test_x.py::test_fail":                                Failed,
		"tests/test_x.py::test_xf":                                  Skipped,
		"tests/sub/test_k.py::TestK::test_m":                        Passed,
	}
	if got := outcomes(r); !mapsEqual(got, want) {
		t.Fatalf("tests %v, want %v", got, want)
	}
	if r.Passed != 4 || r.Failed != 1 || r.Skipped != 1 {
		t.Fatalf("counts %+v", r)
	}
}

// TestParseReportJestDuplicateTitles: jest's --json result keys tests by
// file, describe path and title, and the second of two tests with the
// same path (describe.each with equal rows) is kept apart, so losing one
// of the pair is seen; a result line the test printed does not count.
func TestParseReportJestDuplicateTitles(t *testing.T) {
	r, ok := ParseReport(readReport(t, "jest-json.report"), "/home/dev/proj")
	if !ok || r.Runners[0] != "jest" {
		t.Fatalf("%+v %v", r, ok)
	}
	want := map[string]event.TestOutcome{
		"src/a.test.js › sum 1 › adds":      Passed,
		"src/a.test.js › sum 1 › adds [#2]": Passed,
		"src/a.test.js › fails":             Failed,
		"src/a.test.js › skipped":           Skipped,
	}
	if got := outcomes(r); !mapsEqual(got, want) {
		t.Fatalf("tests %v, want %v", got, want)
	}
	// One of the pair gone is a lost test.
	lost := r
	lost.Tests = slices.DeleteFunc(slices.Clone(r.Tests), func(x event.TestCase) bool { return strings.HasSuffix(x.Name, "[#2]") })
	lost.Passed--
	b := &event.TestBaseline{Parsed: true, Run: r}
	l, bad := CompareTestRuns(b, lost, true)
	if !bad || l.Pattern != PatternTestsDisappeared || !slices.Equal(l.Disappeared, []string{"src/a.test.js › sum 1 › adds [#2]"}) {
		t.Fatalf("loss %+v %v", l, bad)
	}
}

// TestParseReportVitest: vitest's json reporter prints jest's format;
// todo and skipped tests are skipped, unicode titles kept as they are.
func TestParseReportVitest(t *testing.T) {
	r, ok := ParseReport(readReport(t, "vitest-json.report"), "/home/dev/proj")
	if !ok || r.Runners[0] != "vitest" {
		t.Fatalf("%+v %v", r, ok)
	}
	want := map[string]event.TestOutcome{
		"v/b.test.mjs › sum 1 › adds [x] ünï":      Passed,
		"v/b.test.mjs › sum 1 › adds [x] ünï [#2]": Passed,
		"v/b.test.mjs › fails":                     Failed,
		"v/b.test.mjs › skipped":                   Skipped,
		"v/b.test.mjs › later":                     Skipped,
	}
	if got := outcomes(r); !mapsEqual(got, want) {
		t.Fatalf("tests %v, want %v", got, want)
	}
}

// TestParseReportGoJSONIgnoresText: from a report, go test -json's
// events count and text lines around them do not (a forged "--- PASS"
// printed by the code under test is an output event, not a result).
func TestParseReportGoJSONIgnoresText(t *testing.T) {
	data := append(readReport(t, "go-json.report"), []byte("--- PASS: TestForged (0.00s)\nok  \texample.com/forged\t0.01s\n")...)
	r, ok := ParseReport(data, "")
	if !ok || r.Source != SourceReport {
		t.Fatalf("%+v", r)
	}
	for _, x := range r.Tests {
		if strings.Contains(x.Name, "Forged") {
			t.Fatalf("a text line counted: %+v", r.Tests)
		}
	}
	if _, ok := ParseReport([]byte("--- PASS: TestA (0.00s)\nok  \tx\t0.1s\n"), ""); ok {
		t.Fatal("text output read as a report")
	}
}

// TestParseReportCutJUnit: a JUnit document cut at the report's bound
// still lists the test cases it holds.
func TestParseReportCutJUnit(t *testing.T) {
	data := readReport(t, "pytest-junit.report")
	i := strings.Index(string(data), `<testcase classname="tests.test_x" name="test_fail"`)
	r, ok := ParseReport(data[:i+10], "")
	if !ok || len(r.Tests) != 3 {
		t.Fatalf("%+v %v", r, ok)
	}
}

// TestCompareReportMissing: a run without the report the baseline was
// read from (a reporter turned off) has none of the baseline's tests
// known to run, whatever its text says.
func TestCompareReportMissing(t *testing.T) {
	base, _ := ParseReport(readReport(t, "pytest-junit.report"), "")
	now, ok := ParseTestRun("tests/test_x.py::test_fail PASSED\n==== 1 passed in 0.01s ====\n")
	if !ok {
		t.Fatal("text not parsed")
	}
	l, bad := CompareTestRuns(&event.TestBaseline{Parsed: true, Run: base}, now, ok)
	if !bad || !l.ReportMissing || l.Pattern != PatternTestsDisappeared || len(l.Disappeared) != 5 {
		t.Fatalf("%+v %v", l, bad)
	}
}

func mapsEqual(a, b map[string]event.TestOutcome) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// FuzzParseReport: any report parses without panicking, lists each test
// once with a name and a known outcome, and counts exactly its list.
func FuzzParseReport(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.report"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`<?xml version="1.0"?><testsuite><testcase classname="a b" name="c[d]"><failure/></testcase></testsuite>`))
	f.Add([]byte(`{"testResults":[{"name":"/x","assertionResults":[{"ancestorTitles":["a"],"title":"t","status":"passed"}]}],"numTotalTests":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, ok := ParseReport(data, "/x")
		if !ok {
			return
		}
		seen := map[string]bool{}
		n := 0
		for _, x := range r.Tests {
			if _, known := rank[x.Outcome]; !known || seen[x.Name] {
				t.Fatalf("test %q outcome %q (listed twice: %v)", x.Name, x.Outcome, seen[x.Name])
			}
			seen[x.Name] = true
			n++
		}
		if r.Passed+r.Failed+r.Skipped != n {
			t.Fatalf("counts %d+%d+%d for %d tests", r.Passed, r.Failed, r.Skipped, n)
		}
	})
}
