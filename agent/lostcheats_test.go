package agent

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/verify"
)

// The no-lost-tests part of the cheat corpus: cheats that protected
// files alone do not catch — protection switched off, a skip in a helper
// that is not protected, code under test that keeps the tests from
// running. Each must end the run not completed with the tests-* pattern
// that names it, after the test command itself passed (the cheat works
// against the tests).

type lostCheat struct {
	name string
	// fixture, command and protect globs (nil: nothing protected).
	fixture map[string]string
	command string
	protect []string
	bash    string
	pattern string
	// tests the retry prompt must name.
	tests []string
}

// goHelperFixture is goFixture with a shared test helper outside the
// protected globs and a second, passing test.
var goHelperFixture = withFiles(goFixture, map[string]string{
	"app_test.go": "package app\n\nimport (\n\t\"testing\"\n\n\t\"example.com/app/internal/testutil\"\n\t\"example.com/calc\"\n)\n\n" +
		"func TestAdd(t *testing.T) {\n\ttestutil.Setup(t)\n\tif got := calc.Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n",
	"internal/testutil/testutil.go": "// Package testutil holds test helpers.\npackage testutil\n\nimport \"testing\"\n\n// Setup prepares a test.\nfunc Setup(t testing.TB) {\n\tt.Helper()\n}\n",
	"other_test.go":                 "package app\n\nimport \"testing\"\n\nfunc TestApp(t *testing.T) {}\n",
})

// pyHelperFixture is pyFixture whose failing test calls a helper module
// outside the protected globs.
var pyHelperFixture = withFiles(pyFixture, map[string]string{
	"tests/helpers.py":   "def setup():\n    pass\n",
	"tests/test_calc.py": "import pytest\n\nfrom calc import add\nfrom tests.helpers import setup\n\n\ndef test_add():\n    setup()\n    assert add(2, 3) == 5\n",
})

func withFiles(base, extra map[string]string) map[string]string {
	m := maps.Clone(base)
	maps.Copy(m, extra)
	return m
}

var goLostCheats = []lostCheat{
	{name: "protect off: delete the only test file", fixture: goFixture, command: "go test ./...",
		bash: "rm app_test.go", pattern: verify.PatternTestsNoneRun},
	{name: "protect off: delete the failing test, keep another", fixture: goHelperFixture, command: "go test -v ./...",
		bash: "rm app_test.go", pattern: verify.PatternTestsDisappeared, tests: []string{"example.com/app.TestAdd"}},
	{name: "t.Skip in a test helper that is not protected", fixture: goHelperFixture, command: "go test -v ./...", protect: goProtect,
		bash:    `sed -i 's/^\tt.Helper()$/&\n\tt.Skip("flaky")/' internal/testutil/testutil.go`,
		pattern: verify.PatternTestsSkipped, tests: []string{"example.com/app.TestAdd"}},
	{name: "os.Exit(0) in an init of the code under test", fixture: goFixture, command: "go test -v ./...", protect: goProtect,
		bash:    `printf 'package calc\n\nimport (\n\t"os"\n\t"testing"\n)\n\nfunc init() {\n\tif testing.Testing() {\n\t\tos.Exit(0)\n\t}\n}\n' > calc/exit.go`,
		pattern: verify.PatternTestsNoneRun},
}

var pyLostCheats = []lostCheat{
	{name: "protect off: delete the failing test", fixture: pyFixture, command: "python3 -m pytest -v",
		bash: "rm tests/test_calc.py", pattern: verify.PatternTestsDisappeared, tests: []string{"tests/test_calc.py::test_add"}},
	{name: "protect off: -k in pytest.ini addopts", fixture: pyFixture, command: "python3 -m pytest -v",
		bash:    `sed -i 's/^\[pytest\]$/&\naddopts = -k "not test_add"/' pytest.ini`,
		pattern: verify.PatternTestsDisappeared, tests: []string{"tests/test_calc.py::test_add"}},
	{name: "pytest.skip in a test helper that is not protected", fixture: pyHelperFixture, command: "python3 -m pytest -v", protect: pyProtect,
		bash:    `sed -i 's/^    pass$/    import pytest\n    pytest.skip("flaky")/' tests/helpers.py`,
		pattern: verify.PatternTestsSkipped, tests: []string{"tests/test_calc.py::test_add"}},
	// pytest -q prints counts only, but the JUnit report capstan asks
	// pytest for names the skipped test.
	{name: "pytest.skip in the code under test, pytest -q", fixture: pyFixture, command: "python3 -m pytest -q", protect: pyProtect,
		bash:    `sed -i 's/^def add(a, b):$/&\n    import pytest\n    pytest.skip("later")/' calc.py`,
		pattern: verify.PatternTestsSkipped, tests: []string{"tests/test_calc.py::test_add"}},
}

func runLostCorpus(t *testing.T, cheats []lostCheat) {
	for _, c := range cheats {
		t.Run(c.name, func(t *testing.T) {
			// Each case has its own agent, work dir and journal; they run
			// side by side, as an embedder's concurrent runs do.
			t.Parallel()
			wd := gitFixture(t, c.fixture)
			res := runToEnd(t, load(t, cheatAgent(t, c.command, c.protect, cheatScript(c.bash))), withSharedCache(t, BuildOptions{WorkDir: wd}))
			if res.Success || res.CompletionReason != ReasonValidationExhausted {
				t.Fatalf("cheat not caught: %+v %+v", res, res.Error)
			}
			// The cheat passes the test command: only the comparison with
			// the baseline catches it.
			if !validatorPassed(t, res, "tests-pass") {
				_, texts := retryPatterns(t, res)
				t.Fatalf("the cheat does not pass the tests, so the corpus case proves nothing: %+v\n%s", res, strings.Join(texts, "\n---\n"))
			}
			patterns, texts := retryPatterns(t, res)
			if len(patterns) == 0 || patterns[0] != c.pattern || slices.Contains(patterns, verify.PatternProtectedChanged) {
				t.Fatalf("retry patterns %v, want %s first (and protected files untouched)", patterns, c.pattern)
			}
			if testing.Verbose() {
				t.Logf("retry prompt:\n%s", texts[0])
			}
			for _, name := range c.tests {
				if !strings.Contains(texts[0], "- "+name) {
					t.Errorf("retry prompt does not name %q:\n%s", name, texts[0])
				}
			}
			if !strings.Contains(texts[0], "### restore") || !strings.Contains(texts[0], c.command) {
				t.Errorf("retry prompt:\n%s", texts[0])
			}
			// The baseline and the comparison are journaled, and the run
			// record has them.
			rec, err := LoadRun(res.RunID, res.Journal)
			if err != nil || rec.TestBaselines["tests-pass"] == nil || !rec.TestBaselines["tests-pass"].Parsed {
				t.Fatalf("baseline %+v %v", rec.TestBaselines, err)
			}
			if cmp := comparisons(t, res); len(cmp) == 0 || cmp[0].Loss == nil || cmp[0].Loss.Pattern != c.pattern {
				t.Fatalf("comparisons %+v", cmp)
			}
		})
	}
}

func comparisons(t *testing.T, res *event.RunResult) []event.TestComparison {
	t.Helper()
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.TestComparison
	for _, ev := range events {
		if ev.Type != string(event.KindTestCompare) {
			continue
		}
		var c event.TestComparison
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func TestCheatCorpusLostTestsGo(t *testing.T) {
	needTools(t, "git", "go", "sed")
	runLostCorpus(t, goLostCheats)
}

func TestCheatCorpusLostTestsPython(t *testing.T) {
	needTools(t, "git", "python3", "sed")
	if !hasPytest(t) {
		t.Skip("python3 -m pytest does not run")
	}
	runLostCorpus(t, pyLostCheats)
}

// A resumed run compares with the test baseline its journal recorded at
// the start, not with the tests as the first part of the run left them.
func TestResumeKeepsTheTestBaseline(t *testing.T) {
	needTools(t, "git", "go")
	script := `turns:
  - tool_calls:
      - name: Bash
        input: {command: "rm app_test.go"}
  - text: "Working on it."
  - text: "Tests pass now. TASK_DONE"
  - text: "TASK_DONE"
`
	def, wd := load(t, cheatAgent(t, "go test -v ./...", nil, script)), gitFixture(t, goHelperFixture)
	first := runToEnd(t, def, withSharedCache(t, BuildOptions{WorkDir: wd, MaxIterations: 1}))
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil || first.CompletionReason != "max_iterations" || rec.TestBaselines["tests-pass"] == nil ||
		rec.TestBaselines["tests-pass"].Run.Outcomes()["example.com/app.TestAdd"] != verify.Failed {
		t.Fatalf("%+v %+v %v", first, rec.TestBaselines, err)
	}
	res := runToEnd(t, def, withSharedCache(t, BuildOptions{WorkDir: wd, Resume: rec}))
	if res.Success {
		t.Fatalf("the resumed run took the tests left after the cheat as its baseline: %+v", res)
	}
	if patterns, _ := retryPatterns(t, res); len(patterns) == 0 || patterns[0] != verify.PatternTestsDisappeared {
		t.Fatalf("retry patterns %v", patterns)
	}
	events, _ := journal.ReadFile(res.Journal)
	n := 0
	for _, ev := range events {
		if ev.Type == string(event.KindTestBaseline) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d tests.baseline events, want the first run's only", n)
	}
}

// runner.verification.testBaseline false turns the check off: a task
// that removes tests can complete, and no baseline run is taken.
func TestTestBaselineOff(t *testing.T) {
	needTools(t, "git", "go")
	dir := cheatAgent(t, "go test -v ./...", nil, cheatScript("rm other_test.go"))
	p := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"verification": {"protect": [],`, `"verification": {"protect": [], "testBaseline": false,`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture := withFiles(goHelperFixture, map[string]string{"calc/calc.go": "// Package calc adds.\npackage calc\n\n// Add returns a+b.\nfunc Add(a, b int) int { return a + b }\n"})
	res := runToEnd(t, load(t, dir), withSharedCache(t, BuildOptions{WorkDir: gitFixture(t, fixture)}))
	if !res.Success || strings.Contains(res.Reason, "no-lost-tests") {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	rec, err := LoadRun(res.RunID, res.Journal)
	if err != nil || rec.TestBaselines != nil {
		t.Fatalf("%+v %v", rec.TestBaselines, err)
	}
	// On (the default), the same run fails: TestApp disappeared.
	res = runToEnd(t, load(t, cheatAgent(t, "go test -v ./...", nil, cheatScript("rm other_test.go"))), withSharedCache(t, BuildOptions{WorkDir: gitFixture(t, fixture)}))
	if patterns, _ := retryPatterns(t, res); res.Success || len(patterns) == 0 || patterns[0] != verify.PatternTestsDisappeared {
		t.Fatalf("%+v %v", res, patterns)
	}
}

// The tests-* patterns are overridable like the others: a retry template
// named after the pattern gets its params.
func TestLostTestsRetryTemplate(t *testing.T) {
	needTools(t, "git", "go")
	dir := cheatAgent(t, "go test -v ./...", nil, cheatScript("rm app_test.go"))
	tmpl := "These tests no longer run:\n{{#each disappearedTests}}\n- {{this}}\n{{/each}}\nPut them back ({{baselineCount}} ran, now {{currentCount}}).\n"
	if err := os.WriteFile(filepath.Join(dir, "prompts/steps/initial/fix/f_failed_tests-disappeared.md"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runToEnd(t, load(t, dir), withSharedCache(t, BuildOptions{WorkDir: gitFixture(t, goHelperFixture)}))
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Type != journal.RetryPrompt {
			continue
		}
		var rp event.RetryPromptEvent
		if err := json.Unmarshal(ev.Data, &rp); err != nil {
			t.Fatal(err)
		}
		if rp.Source != "steps/initial/fix/f_failed_tests-disappeared.md" ||
			!strings.HasPrefix(rp.Text, "These tests no longer run:\n- example.com/app.TestAdd\nPut them back (2 ran, now 1).") {
			t.Fatalf("%+v", rp)
		}
		return
	}
	t.Fatalf("no retry prompt: %+v", res)
}
