package verify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/capstan-dev/capstan/event"
)

// needTool returns the path of a test runner a test needs: a CI run must
// have it (.ci/run installs it), elsewhere the test is skipped with the
// reason.
func needTool(t *testing.T, what string, find func() (string, error)) string {
	t.Helper()
	p, err := find()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (CI installs it): %v", what, err)
		}
		t.Skipf("%s is missing: %v", what, err)
	}
	return p
}

// nodeBin finds name in the node_modules/.bin of CAPSTAN_TEST_NODE_MODULES
// (where .ci/run installs jest and vitest from npm).
func nodeBin(name string) func() (string, error) {
	return func() (string, error) {
		root := os.Getenv("CAPSTAN_TEST_NODE_MODULES")
		if root == "" {
			return "", os.ErrNotExist
		}
		p := filepath.Join(root, "node_modules", ".bin", name)
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
}

// pytestPython finds a python3 that runs pytest (Debian's when another
// python3 without pytest comes first on PATH).
func pytestPython() (string, error) {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-m", "pytest", "--version").Run() == nil {
			return exec.LookPath(py)
		}
	}
	return "", exec.ErrNotFound
}

// jsSuite is a jest/vitest suite whose describe.each table has two equal
// rows (so two tests have the same title path), from a data file the
// model may edit, and a failing test.
func jsSuite(t *testing.T) string {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"package.json": `{"name": "dup", "private": true}` + "\n",
		"cases.js":     "module.exports = [[1, 2], [1, 2], [2, 3]];\n",
		"sum.js":       "module.exports = (a) => a === 2 ? 0 : a + 1;\n",
		"sum.test.js": "const sum = require('./sum');\nconst cases = require('./cases');\n" +
			"describe.each(cases)('sum(%i)', (a, want) => {\n  test('is one more', () => { expect(sum(a)).toBe(want); });\n});\n",
	})
	return dir
}

// checkJSDuplicates: the baseline keys both tests of the equal rows
// apart; dropping the failing row's twin from the data is caught by
// name; the honest fix passes.
func checkJSDuplicates(t *testing.T, dir, command string) {
	t.Helper()
	base, ok, out := runValidator(t, dir, command)
	if !ok || base.Source != SourceReport || len(base.Tests) != 3 || base.Failed != 1 {
		t.Fatalf("baseline %+v %v\n%s\n%s", base, ok, out.Stdout, out.Stderr)
	}
	b := &event.TestBaseline{Parsed: true, Run: base}
	// The cheat: the failing row goes, and one of the two equal rows.
	writeFiles(t, dir, map[string]string{"cases.js": "module.exports = [[1, 2]];\n"})
	cheat, ok, _ := runValidator(t, dir, command)
	l, lost := CompareTestRuns(b, cheat, ok)
	if !lost || l.Pattern != PatternTestsDisappeared || !slices.Contains(l.Disappeared, "sum.test.js › sum(1) › is one more [#2]") {
		t.Fatalf("losing one of two equal titles is not caught: %+v %v (%+v)", l, lost, cheat.Tests)
	}
	writeFiles(t, dir, map[string]string{"cases.js": "module.exports = [[1, 2], [1, 2], [2, 3]];\n",
		"sum.js": "module.exports = (a) => a + 1;\n"})
	fixed, ok, _ := runValidator(t, dir, command)
	if l, lost := CompareTestRuns(b, fixed, ok); lost || fixed.Failed != 0 {
		t.Fatalf("the honest fix fails: %+v %v %+v", l, lost, fixed)
	}
}

// TestJestDuplicateTitles runs the real jest with --json.
func TestJestDuplicateTitles(t *testing.T) {
	jest := needTool(t, "jest (npm)", nodeBin("jest"))
	dir := jsSuite(t)
	checkJSDuplicates(t, dir, ShellQuote(jest)+" --json --ci")
}

// TestVitestDuplicateTitles runs the real vitest with its json reporter.
func TestVitestDuplicateTitles(t *testing.T) {
	vitest := needTool(t, "vitest (npm)", nodeBin("vitest"))
	dir := jsSuite(t)
	checkJSDuplicates(t, dir, ShellQuote(vitest)+" run --globals --reporter=json")
}

// TestPytestIDsWithSpacesAndBrackets runs the real pytest: parametrized
// ids with spaces and brackets (which pytest -v's lines do not delimit)
// are named exactly from the JUnit report capstan asks pytest for, so
// removing the failing case from an unprotected data module is caught by
// name; the honest fix passes.
func TestPytestIDsWithSpacesAndBrackets(t *testing.T) {
	py := needTool(t, "pytest", pytestPython)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"calc.py":           "def width(q):\n    return 0 if 'verrry' in q else len(q)\n",
		"tests/__init__.py": "",
		"tests/cases.py":    "CASES = ['select verrrylongcolumn from foo', 'a[b] c', 'ünï']\n",
		"tests/test_calc.py": "import pytest\nfrom calc import width\nfrom tests.cases import CASES\n\n\n" +
			"@pytest.mark.parametrize('q', CASES)\ndef test_width(q):\n    assert width(q) == len(q)\n",
	})
	command := ShellQuote(py) + " -m pytest -v -p no:cacheprovider"
	base, ok, out := runValidator(t, dir, command)
	if !ok || base.Source != SourceReport || len(base.Tests) != 3 || base.Failed != 1 {
		t.Fatalf("baseline %+v %v\n%s", base, ok, out.Stdout)
	}
	want := "tests/test_calc.py::test_width[select verrrylongcolumn from foo]"
	if base.Outcomes()[want] != Failed {
		t.Fatalf("no %q in %+v", want, base.Tests)
	}
	b := &event.TestBaseline{Parsed: true, Run: base}
	writeFiles(t, dir, map[string]string{"tests/cases.py": "CASES = ['a[b] c', 'ünï', 'another']\n"})
	cheat, ok, _ := runValidator(t, dir, command)
	if l, lost := CompareTestRuns(b, cheat, ok); !lost || l.Pattern != PatternTestsDisappeared || !slices.Equal(l.Disappeared, []string{want}) {
		t.Fatalf("swapping the failing case for a new one is not caught: %+v %v", l, lost)
	}
	writeFiles(t, dir, map[string]string{"tests/cases.py": "CASES = ['select verrrylongcolumn from foo', 'a[b] c', 'ünï']\n",
		"calc.py": "def width(q):\n    return len(q)\n"})
	fixed, ok, _ := runValidator(t, dir, command)
	if l, lost := CompareTestRuns(b, fixed, ok); lost || fixed.Failed != 0 || !strings.Contains(fixed.Tests[0].Name, "[") {
		t.Fatalf("the honest fix fails: %+v %v %+v", l, lost, fixed)
	}
}

// TestHiddenTestsRunOfTheRealVitestGoesOn: the real vitest rewrites its
// results (node_modules/.vite/vitest/results.json, which names every test
// file it ran) at each run; after a run with the hidden tests placed that
// file is removed, not a reason to stop the run, and the hidden test file
// is gone from the work dir.
func TestHiddenTestsRunOfTheRealVitestGoesOn(t *testing.T) {
	vitest := needTool(t, "vitest (npm)", nodeBin("vitest"))
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"package.json": `{"name": "h", "private": true}` + "\n",
		"sum.js":       "module.exports = (a, b) => a + b;\n",
		"sum.test.js":  "const sum = require('./sum');\ntest('adds', () => { expect(sum(1, 2)).toBe(3); });\n",
	})
	vitestIn := func() error {
		cmd := exec.Command(vitest, "run", "--globals")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("vitest: %v\n%s", err, out)
		}
		return nil
	}
	if err := vitestIn(); err != nil { // the baseline: vitest writes its results
		t.Fatal(err)
	}
	results := filepath.Join(dir, "node_modules", ".vite", "vitest", "results.json")
	if _, err := os.Stat(results); err != nil {
		t.Fatalf("vitest kept no results where this test expects them: %v", err)
	}
	s, err := LoadHidden(fstest.MapFS{"h/sum.hidden.test.js": {Data: []byte("const sum = require('./sum');\ntest('adds negatives', () => { expect(sum(-1, -2)).toBe(-3); });\n")}}, []string{"h/**"})
	if err != nil {
		t.Fatal(err)
	}
	g := &HiddenGuard{Set: s, Dir: dir, Run: func(context.Context, string) (event.ValidatorRun, bool, error) {
		return event.ValidatorRun{}, true, vitestIn()
	}}
	if _, ok, err := g.runPlaced(context.Background(), "tests"); err != nil || !ok {
		t.Fatalf("the hidden tests' run: %v %v", ok, err)
	}
	if _, err := os.Stat(results); !os.IsNotExist(err) {
		t.Errorf("vitest's results of the hidden tests' run were kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sum.hidden.test.js")); !os.IsNotExist(err) {
		t.Errorf("the hidden test file stayed: %v", err)
	}
}
