package verify

import (
	"github.com/capstan-dev/capstan/event"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseRunnersOutput(t *testing.T) {
	for _, c := range []struct {
		file                    string
		runner                  string
		perTest, counted        bool
		passed, failed, skipped int
		// some listed tests and their outcomes
		tests map[string]event.TestOutcome
	}{
		{"go-v.txt", "go", true, true, 2, 1, 2, map[string]event.TestOutcome{"example.com/app.TestA/x": Passed, "example.com/app.TestA/y_z": Skipped,
			"example.com/app.TestB": Failed, "example.com/app.TestC": Skipped}},
		{"go-json.txt", "go", true, true, 2, 1, 2, map[string]event.TestOutcome{"example.com/app.TestA": Passed, "example.com/app.TestA/y_z": Skipped,
			"example.com/app.TestB": Failed}},
		{"go-plain.txt", "go", false, false, 0, 0, 0, map[string]event.TestOutcome{"example.com/app.TestB": Failed}},
		{"pytest-v.txt", "pytest", true, true, 5, 1, 3, map[string]event.TestOutcome{"tests/test_x.py::test_a": Passed, "tests/test_x.py::test_b": Failed,
			"tests/test_x.py::test_c": Skipped, "tests/test_x.py::test_d": Skipped, "tests/test_x.py::test_e[2]": Passed, "tests/test_x.py::U::test_v": Skipped}},
		{"pytest-q.txt", "pytest", false, true, 5, 1, 3, map[string]event.TestOutcome{"tests/test_x.py::test_b": Failed}},
		{"unittest-v.txt", "unittest", true, true, 1, 0, 1, map[string]event.TestOutcome{"tests.test_x.U.test_u": Passed, "tests.test_x.U.test_v": Skipped}},
		{"unittest.txt", "unittest", false, true, 1, 0, 1, nil},
		{"jest-verbose.txt", "jest", true, true, 3, 1, 1, map[string]event.TestOutcome{"src/sum.test.js › top level": Passed,
			"src/sum.test.js › sum › adds 1 + 2": Passed, "src/sum.test.js › sum › skips later": Skipped,
			"src/sum.test.js › sum › nested › deep": Passed, "src/sub.test.js › sub › subtracts": Failed}},
		{"vitest-verbose.txt", "vitest", true, true, 3, 1, 1, map[string]event.TestOutcome{"src/sum.test.js › sum › adds 1 + 2": Passed,
			"src/sum.test.js › sum › nested › deep": Passed, "src/sum.test.js › top level": Passed, "src/sub.test.js › sub › subtracts": Failed}},
		{"vitest-default.txt", "vitest", false, true, 3, 1, 1, nil},
		{"cargo.txt", "cargo", true, true, 4, 0, 1, map[string]event.TestOutcome{"src/lib.rs tests::adds": Passed, "src/lib.rs tests::later": Skipped,
			"tests/it.rs integration": Passed, "rs src/lib.rs - add (line 3)": Passed}},
	} {
		t.Run(c.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			r, ok := ParseTestRun(string(b))
			if !ok || !slices.Equal(r.Runners, []string{c.runner}) || r.PerTest != c.perTest || r.Counted != c.counted ||
				r.Passed != c.passed || r.Failed != c.failed || r.Skipped != c.skipped {
				t.Fatalf("ok=%v %+v", ok, r)
			}
			got := r.Outcomes()
			for name, o := range c.tests {
				if got[name] != o {
					t.Errorf("%s: %q, want %q (all: %v)", name, got[name], o, got)
				}
			}
			if c.perTest && len(r.Tests) != c.passed+c.failed+c.skipped && c.runner != "vitest" {
				t.Errorf("%d tests listed, counts %d/%d/%d", len(r.Tests), c.passed, c.failed, c.skipped)
			}
		})
	}
}

func TestParseNoTestRun(t *testing.T) {
	for _, out := range []string{"", "hello\n", "all good\nPASS\n", "# comment\nok\n"} {
		if r, ok := ParseTestRun(out); ok {
			t.Errorf("%q parsed as %+v", out, r)
		}
	}
	// go test with no test files anywhere ran no test, and says so.
	r, ok := ParseTestRun("?   \texample.com/app\t[no test files]\nok  \texample.com/calc\t0.001s [no tests to run]\n")
	if !ok || !r.Counted || r.Ran() != 0 {
		t.Fatalf("%v %+v", ok, r)
	}
	// pytest that collected nothing.
	if r, ok := ParseTestRun("\nno tests ran in 0.01s\n"); !ok || !r.Counted || r.Ran() != 0 {
		t.Fatalf("%v %+v", ok, r)
	}
}

// A test reported twice keeps its worst outcome: a fake PASS line printed
// before the real FAIL does not turn it into a pass.
func TestParseDuplicateKeepsWorst(t *testing.T) {
	out := "=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n=== RUN   TestAdd\n--- FAIL: TestAdd (0.00s)\nFAIL\nFAIL\texample.com/app\t0.001s\n"
	r, _ := ParseTestRun(out)
	if len(r.Tests) != 1 || r.Tests[0].Outcome != Failed || r.Ran() != 1 {
		t.Fatalf("%+v", r)
	}
}

// When the listed tests and the summary disagree the run is not per test
// and the summary counts; Compare still checks the names against a
// baseline that listed every test.
func TestParseListAndSummaryDisagree(t *testing.T) {
	out := "tests/test_a.py::test_a PASSED [100%]\n====== 50 passed in 0.01s ======\n"
	r, ok := ParseTestRun(out)
	if !ok || r.PerTest || r.Passed != 50 {
		t.Fatalf("%+v", r)
	}
	out = "tests/test_a.py::test_a PASSED [100%]\n====== 1 passed in 0.01s ======\n"
	if r, _ := ParseTestRun(out); !r.PerTest || r.Passed != 1 {
		t.Fatalf("%+v", r)
	}
}

// pytest-xdist's -v lines name each test after the worker and progress.
func TestParsePytestXdist(t *testing.T) {
	out := "[gw0] [ 33%] PASSED tests/test_a.py::test_a \n[gw1] [ 66%] SKIPPED tests/test_a.py::test_b \n" +
		"[gw0] [100%] FAILED tests/test_a.py::test_c \n==== 1 failed, 1 passed, 1 skipped in 0.52s ====\n"
	r, ok := ParseTestRun(out)
	if !ok || !r.PerTest || r.Passed != 1 || r.Failed != 1 || r.Skipped != 1 || r.Outcomes()["tests/test_a.py::test_b"] != Skipped {
		t.Fatalf("%v %+v", ok, r)
	}
}
