// Test baselines: a test runner's output is read as a test run — which
// tests ran, passed, failed or were skipped — and compares a run with the
// baseline the run took before the model's first iteration, so that a
// model cannot make verification pass by losing tests: deleting them,
// skipping them, keeping them from being collected, or running none.
//
// ParseTestRun understands go test (-v and -json; without -v only whether any
// test ran), pytest (-v; -q gives counts only), python -m unittest (-v;
// without it counts only), jest (--verbose) and vitest (--reporter=verbose;
// the default reporter gives counts only) and cargo test. The output is
// what the test process printed, so code under test that prints fake
// result lines can forge it; see CompareTestRuns.

package verify

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/lazyre"
)

// Outcomes of a Test.
const (
	Passed  event.TestOutcome = event.TestPassed
	Failed  event.TestOutcome = "failed"
	Skipped event.TestOutcome = "skipped"
)

// part is what one runner's parser found.
type part struct {
	runner  string
	tests   []event.TestCase
	perTest bool
	// counted, with the counts, when the runner printed a summary (or
	// listed its tests).
	counted                 bool
	passed, failed, skipped int
	// none: the runner said that no test ran (go: no test files, no tests
	// to run).
	none bool
}

// Parse reads a test run from a validator's output (stdout and stderr
// together). ok is false when no known test runner's output is in it.
func ParseTestRun(output string) (event.TestRun, bool) {
	ls := strings.Split(strings.ReplaceAll(output, "\r\n", "\n"), "\n")
	var parts []part
	for _, p := range []func([]string) (part, bool){parseGoJSONRun, parseGoTextRun, parsePytestRun, parseUnittest, parseJestRun, parseVitest, parseCargo} {
		if pt, ok := p(ls); ok {
			parts = append(parts, pt)
		}
	}
	if len(parts) == 0 {
		return event.TestRun{}, false
	}
	return combine(parts), true
}

// combine makes one Run of what each runner's parser found.
func combine(parts []part) event.TestRun {
	r := event.TestRun{PerTest: true, Counted: true}
	seen := map[string]int{}
	for _, p := range parts {
		r.Runners = append(r.Runners, p.runner)
		r.PerTest = r.PerTest && p.perTest
		for _, t := range p.tests {
			if i, dup := seen[t.Name]; dup {
				if worse(t.Outcome, r.Tests[i].Outcome) {
					r.Tests[i].Outcome = t.Outcome
				}
				continue
			}
			seen[t.Name] = len(r.Tests)
			r.Tests = append(r.Tests, t)
		}
		switch {
		case p.perTest:
			// counted from the list below
		case p.counted:
			r.Passed, r.Failed, r.Skipped = r.Passed+p.passed, r.Failed+p.failed, r.Skipped+p.skipped
		case p.none:
		default:
			r.Counted = false
		}
	}
	// Listed tests count once each, whatever their runner printed as a
	// summary (a forged summary line cannot add to them); skipped tests a
	// runner does not list (vitest) count from its summary.
	for _, p := range parts {
		if !p.perTest {
			continue
		}
		listedSkips := 0
		for _, t := range p.tests {
			if t.Outcome == Skipped {
				listedSkips++
			}
		}
		if p.counted && p.skipped > listedSkips {
			r.Skipped += p.skipped - listedSkips
		}
		for _, t := range p.tests {
			if seen[t.Name] < 0 {
				continue
			}
			switch r.Tests[seen[t.Name]].Outcome {
			case Passed:
				r.Passed++
			case Failed:
				r.Failed++
			case Skipped:
				r.Skipped++
			}
			seen[t.Name] = -1
		}
	}
	return r
}

var rank = map[event.TestOutcome]int{Passed: 0, Skipped: 1, Failed: 2}

func worse(a, b event.TestOutcome) bool { return rank[a] > rank[b] }

// --- go test -json ---

type goRunEvent struct {
	Action  string `json:"Action"`
	Package string `json:"Package"`
	Test    string `json:"Test"`
	Output  string `json:"Output"`
}

// goJSONOutcome maps the Action of a test's last go test -json event.
var goJSONOutcome = map[string]event.TestOutcome{"pass": Passed, "fail": Failed, "skip": Skipped}

func parseGoJSONRun(ls []string) (part, bool) {
	p := part{runner: "go", perTest: true, counted: true}
	found := false
	for _, l := range ls {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, `{"`) || !strings.Contains(t, `"Action"`) {
			continue
		}
		var e goRunEvent
		if json.Unmarshal([]byte(t), &e) != nil || e.Package == "" {
			continue
		}
		found = true
		if e.Test == "" {
			continue
		}
		if o, ok := goJSONOutcome[e.Action]; ok {
			p.tests = append(p.tests, event.TestCase{Name: e.Package + "." + e.Test, Outcome: o})
		}
	}
	return p, found
}

// --- go test (text) ---

var (
	goResult  = lazyre.New(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	goRunLine = lazyre.New(`^=== RUN\s+\S+`)
	// goPackage is go test's line per package: "ok  \tpkg\t0.01s",
	// "FAIL\tpkg\t0.01s", "FAIL\tpkg [build failed]", "?   \tpkg\t[no test files]".
	goPackage = lazyre.New(`^(ok  |FAIL|\?   )\t(\S+)(?:[\t ](.*))?$`)
)

var goTextOutcome = map[string]event.TestOutcome{"PASS": Passed, "FAIL": Failed, "SKIP": Skipped}

func parseGoTextRun(ls []string) (part, bool) {
	p := part{runner: "go", perTest: false}
	var pending []event.TestCase // results since the last package line
	verbose, packages, empty := false, 0, 0
	for _, l := range ls {
		if strings.HasPrefix(strings.TrimSpace(l), `{"`) {
			continue // go test -json
		}
		if strings.HasPrefix(l, "=== RUN") && goRunLine().MatchString(l) {
			verbose = true
			continue
		}
		if !strings.Contains(l, "--- ") && !strings.Contains(l, "\t") {
			continue // neither a test result nor a package line
		}
		if m := goResult().FindStringSubmatch(l); m != nil {
			o := goTextOutcome[m[1]]
			if o == Passed {
				verbose = true
			}
			pending = append(pending, event.TestCase{Name: m[2], Outcome: o})
			continue
		}
		m := goPackage().FindStringSubmatch(l)
		if m == nil {
			continue
		}
		packages++
		rest := m[3]
		if strings.Contains(rest, "[no test files]") || strings.Contains(rest, "[no tests to run]") {
			empty++
		}
		for _, t := range pending {
			p.tests = append(p.tests, event.TestCase{Name: m[2] + "." + t.Name, Outcome: t.Outcome})
		}
		pending = pending[:0]
	}
	if packages == 0 {
		return p, false
	}
	p.perTest = verbose
	p.counted = verbose
	p.none = empty == packages && len(p.tests) == 0
	return p, true
}

// --- pytest ---

var (
	// -v: "tests/test_x.py::test_a PASSED   [ 11%]"
	pytestVerbose = lazyre.New(`^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b`)
	// -rA short summary: "PASSED tests/test_x.py::test_a", "FAILED id - msg";
	// pytest-xdist with -v: "[gw0] [ 50%] PASSED tests/test_x.py::test_a"
	pytestShort = lazyre.New(`^(?:\[gw\d+\] \[\s*\d+%\] )?(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+::\S+)`)
	// "==== 1 failed, 5 passed, 2 skipped in 0.02s ====", "no tests ran in 0.01s"
	pytestRunSummary = lazyre.New(`^=*\s*((?:\d+ \w+(?:, )?)+|no tests ran) in [\d.]+s`)
	pytestCount      = lazyre.New(`(\d+) (\w+)`)
)

var pytestOutcome = map[string]event.TestOutcome{"PASSED": Passed, "XPASS": Passed, "FAILED": Failed, "ERROR": Failed, "SKIPPED": Skipped, "XFAIL": Skipped}

func parsePytestRun(ls []string) (part, bool) {
	p := part{runner: "pytest"}
	listed, summary := false, false
	deselected := 0
	for _, l := range ls {
		t := strings.TrimSpace(l)
		if !strings.Contains(t, "::") && !strings.Contains(t, " in ") {
			continue
		}
		if m := pytestVerbose().FindStringSubmatch(t); m != nil {
			listed = true
			p.tests = append(p.tests, event.TestCase{Name: m[1], Outcome: pytestOutcome[m[2]]})
			continue
		}
		if m := pytestShort().FindStringSubmatch(t); m != nil {
			p.tests = append(p.tests, event.TestCase{Name: m[2], Outcome: pytestOutcome[m[1]]})
			if m[1] == "PASSED" || strings.HasPrefix(t, "[gw") {
				listed = true // -rA and xdist list the passing tests too
			}
			continue
		}
		if m := pytestRunSummary().FindStringSubmatch(t); m != nil {
			summary = true
			p.passed, p.failed, p.skipped, deselected = 0, 0, 0, 0
			for _, c := range pytestCount().FindAllStringSubmatch(m[1], -1) {
				n, _ := strconv.Atoi(c[1])
				switch c[2] {
				case "passed", "xpassed":
					p.passed += n
				case "failed", "error", "errors":
					p.failed += n
				case "skipped", "xfailed":
					p.skipped += n
				case "deselected":
					p.skipped += n
					deselected += n
				}
			}
		}
	}
	if !summary && !listed {
		return p, false
	}
	p.counted = summary
	// -rA names skipped tests by file and line only: the list is complete
	// only with -v.
	// Deselected tests are never listed.
	p.perTest = listed && (!summary || countOf(p.tests) == p.passed+p.failed+p.skipped-deselected)
	return p, true
}

func countOf(ts []event.TestCase) int {
	seen := map[string]bool{}
	for _, t := range ts {
		seen[t.Name] = true
	}
	return len(seen)
}

// --- python -m unittest ---

var (
	// -v: "test_u (tests.test_x.U.test_u) ... ok"; the description of a
	// test with a docstring is on a line of its own before " ... ok".
	unittestLine   = lazyre.New(`^(\w+) \(([\w.]+)\) \.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$`)
	unittestHead   = lazyre.New(`^(\w+) \(([\w.]+)\)$`)
	unittestResult = lazyre.New(`^.* \.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$`)
	unittestRan    = lazyre.New(`^Ran (\d+) tests? in [\d.]+s$`)
	unittestStatus = lazyre.New(`^(OK|FAILED|NO TESTS RAN)(?: \((.*)\))?$`)
)

func unittestOutcome(s string) event.TestOutcome {
	switch {
	case s == "ok" || s == "unexpected success":
		return Passed
	case s == "FAIL" || s == "ERROR":
		return Failed
	}
	return Skipped
}

func unittestName(method, id string) string {
	if strings.HasSuffix(id, "."+method) {
		return id // Python 3.11+: the full id
	}
	return id + "." + method
}

func parseUnittest(ls []string) (part, bool) {
	p := part{runner: "unittest"}
	ran, found := -1, false
	head := ""
	for i, l := range ls {
		t := strings.TrimRight(l, " ")
		if !strings.Contains(t, " ... ") && !strings.HasSuffix(t, ")") && !strings.HasPrefix(t, "Ran ") {
			continue
		}
		if m := unittestLine().FindStringSubmatch(t); m != nil {
			p.tests = append(p.tests, event.TestCase{Name: unittestName(m[1], m[2]), Outcome: unittestOutcome(m[3])})
			head = ""
			continue
		}
		if m := unittestHead().FindStringSubmatch(t); m != nil {
			head = unittestName(m[1], m[2])
			continue
		}
		if m := unittestResult().FindStringSubmatch(t); m != nil && head != "" {
			p.tests = append(p.tests, event.TestCase{Name: head, Outcome: unittestOutcome(m[1])})
			head = ""
			continue
		}
		if m := unittestRan().FindStringSubmatch(t); m != nil {
			ran, _ = strconv.Atoi(m[1])
			// The status line follows, after a blank line.
			for _, n := range ls[i+1:] {
				n = strings.TrimSpace(n)
				if n == "" {
					continue
				}
				if s := unittestStatus().FindStringSubmatch(n); s != nil {
					found = true
					skipped := 0
					failed := 0
					for _, kv := range strings.Split(s[2], ",") {
						k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
						n, _ := strconv.Atoi(v)
						switch k {
						case "skipped", "expected failures":
							skipped += n
						case "failures", "errors":
							failed += n
						}
					}
					p.skipped, p.failed = skipped, failed
					p.passed = max(ran-skipped-failed, 0)
				}
				break
			}
		}
	}
	if !found {
		return p, false
	}
	p.counted = true
	p.perTest = len(p.tests) > 0 && countOf(p.tests) == ran
	return p, true
}

// --- jest ---

var (
	jestFile    = lazyre.New(`^(PASS|FAIL)\s+(\S+)`)
	jestTest    = lazyre.New(`^(\s+)(✓|✕|√|×|○|✎) (?:(?:skipped|todo) )?(.+?)(?: \(\d+(?:\.\d+)? ?m?s\))?$`)
	jestSummary = lazyre.New(`^Tests:\s+(.*\d+ total)$`)
	countWord   = lazyre.New(`(\d+) (\w+)`)
)

// markOutcome maps the mark before a test's name in jest's and vitest's
// verbose reporters (each reporter's pattern admits its own marks).
var markOutcome = map[string]event.TestOutcome{
	"✓": Passed, "√": Passed,
	"✕": Failed, "×": Failed, "✗": Failed,
	"○": Skipped, "✎": Skipped, "↓": Skipped,
}

// addSummary adds the counts of a jest or vitest summary line ("1 failed,
// 2 skipped, 5 passed, 8 total") to p: todo tests count as skipped, words
// it does not know (total) are left out.
func (p *part) addSummary(s string) {
	for _, c := range countWord().FindAllStringSubmatch(s, -1) {
		n, _ := strconv.Atoi(c[1])
		switch c[2] {
		case "passed":
			p.passed += n
		case "failed":
			p.failed += n
		case "skipped", "todo":
			p.skipped += n
		}
	}
}

func parseJestRun(ls []string) (part, bool) {
	p := part{runner: "jest"}
	file := ""
	type level struct {
		indent int
		name   string
	}
	var describe []level
	listed, summary := false, false
	for _, l := range ls {
		if file == "" && !strings.HasPrefix(l, "PASS") && !strings.HasPrefix(l, "FAIL") && !strings.Contains(l, "Tests:") {
			continue
		}
		if m := jestFile().FindStringSubmatch(l); m != nil && !strings.HasPrefix(l, " ") {
			file, describe = m[2], describe[:0]
			continue
		}
		if m := jestSummary().FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			summary = true
			p.addSummary(m[1])
			continue
		}
		if file == "" || strings.TrimSpace(l) == "" {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		for len(describe) > 0 && describe[len(describe)-1].indent >= indent {
			describe = describe[:len(describe)-1]
		}
		if m := jestTest().FindStringSubmatch(l); m != nil {
			listed = true
			name := file
			for _, d := range describe {
				name += " › " + d.name
			}
			p.tests = append(p.tests, event.TestCase{Name: name + " › " + m[3], Outcome: markOutcome[m[2]]})
			continue
		}
		if indent > 0 && !strings.HasPrefix(strings.TrimSpace(l), "●") {
			describe = append(describe, level{indent, strings.TrimSpace(l)})
		}
	}
	if !summary {
		return p, false
	}
	p.counted = true
	p.perTest = listed && countOf(p.tests) == p.passed+p.failed+p.skipped
	return p, true
}

// --- vitest ---

var (
	// --reporter=verbose: " ✓ src/sum.test.ts > sum > adds 1ms",
	// " × …", " ↓ … [skipped]"; the default reporter's file lines carry
	// "(3 tests)".
	vitestTest    = lazyre.New(`^\s*(✓|×|↓|✗|√) (\S+ > .+?)(?: \[skipped\])?(?: \d+(?:\.\d+)?m?s)?$`)
	vitestSummary = lazyre.New(`^Tests\s+(.*)\((\d+)\)$`)
)

func parseVitest(ls []string) (part, bool) {
	p := part{runner: "vitest"}
	summary := false
	total := 0
	for _, l := range ls {
		t := strings.TrimSpace(l)
		if !strings.Contains(t, " > ") && !strings.HasPrefix(t, "Tests") {
			continue
		}
		if m := vitestSummary().FindStringSubmatch(t); m != nil {
			summary = true
			total, _ = strconv.Atoi(m[2])
			p.addSummary(m[1])
			continue
		}
		if m := vitestTest().FindStringSubmatch(l); m != nil {
			p.tests = append(p.tests, event.TestCase{Name: strings.ReplaceAll(m[2], " > ", " › "), Outcome: markOutcome[m[1]]})
		}
	}
	if !summary {
		return p, false
	}
	p.counted = true
	// The verbose reporter lists every test that ran; vitest 1 leaves the
	// skipped ones out (the summary counts them).
	ran := 0
	for _, t := range p.tests {
		if t.Outcome != Skipped {
			ran++
		}
	}
	p.perTest = len(p.tests) > 0 && ran == p.passed+p.failed && total == p.passed+p.failed+p.skipped
	return p, true
}

// --- cargo test ---

var (
	cargoTest    = lazyre.New(`^test (.+?) \.\.\. (ok|FAILED|ignored)\b`)
	cargoRunning = lazyre.New(`^\s*(?:Running (?:unittests )?(\S+)|Doc-tests (\S+))`)
	cargoResult  = lazyre.New(`^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored`)
)

var cargoOutcome = map[string]event.TestOutcome{"ok": Passed, "FAILED": Failed, "ignored": Skipped}

func parseCargo(ls []string) (part, bool) {
	p := part{runner: "cargo"}
	found := false
	target := ""
	total := 0
	for _, l := range ls {
		if !strings.HasPrefix(l, "test ") && !strings.Contains(l, "Running ") && !strings.Contains(l, "Doc-tests ") {
			continue
		}
		if m := cargoRunning().FindStringSubmatch(l); m != nil {
			target = m[1] + m[2]
			continue
		}
		if m := cargoTest().FindStringSubmatch(l); m != nil {
			name := m[1]
			if target != "" {
				name = target + " " + name
			}
			p.tests = append(p.tests, event.TestCase{Name: name, Outcome: cargoOutcome[m[2]]})
			continue
		}
		if m := cargoResult().FindStringSubmatch(l); m != nil {
			found = true
			n := [3]int{}
			for i := range n {
				n[i], _ = strconv.Atoi(m[i+1])
			}
			p.passed, p.failed, p.skipped = p.passed+n[0], p.failed+n[1], p.skipped+n[2]
			total += n[0] + n[1] + n[2]
		}
	}
	if !found {
		return p, false
	}
	p.counted = true
	p.perTest = countOf(p.tests) == total
	return p, true
}
