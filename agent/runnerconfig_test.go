package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The runner-configuration part of the cheat corpus: files a test runner
// reads for its configuration or its own code, which the agent does not
// list in runner.verification.protect (it protects the tests only). They
// are protected by default (runner.verification.protectRunnerConfig), so
// the cheat is caught; the control, with that turned off, shows the cheat
// passing the test command.

// pyConfigFixture is pyFixture configured in pyproject.toml (as most
// projects are), so pytest reads a .pytest.ini the model adds before it.
var pyConfigFixture = withFiles(map[string]string{
	"calc.py":            pyFixture["calc.py"],
	"pyproject.toml":     "[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n",
	"tests/__init__.py":  "",
	"tests/test_calc.py": pyFixture["tests/test_calc.py"],
	"tests/test_sub.py":  pyFixture["tests/test_sub.py"],
}, nil)

// pytestPassPlugin is a pytest plugin that reports every failed test as
// passed.
const pytestPassPlugin = `printf 'import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    out = yield\n    r = out.get_result()\n    if r.failed:\n        r.outcome = "passed"\n' > plug.py`

// pytestShadow is a pytest.py at the work dir root, which `python3 -m
// pytest` imports instead of the installed pytest (-m puts the current
// directory first on sys.path): it runs the real pytest with a plugin
// that reports every failed test as passed.
const pytestShadow = `cat > pytest.py <<'EOF'
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
import pytest
class Pass:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        out = yield
        r = out.get_result()
        if r.failed:
            r.outcome = "passed"
sys.path.insert(0, here)
sys.exit(pytest.main(sys.argv[1:], plugins=[Pass()]))
EOF`

// vendoredFixture is a Go module whose test asserts with a vendored
// testify (a stand-in of its assert.Equal).
var vendoredFixture = map[string]string{
	"go.mod":             "module example.com/calc\n\ngo 1.22\n\nrequire github.com/stretchr/testify v1.8.0\n",
	"vendor/modules.txt": "# github.com/stretchr/testify v1.8.0\n## explicit; go 1.20\ngithub.com/stretchr/testify/assert\n",
	"vendor/github.com/stretchr/testify/assert/assert.go": "package assert\n\nimport \"testing\"\n\nfunc Equal(t testing.TB, want, got any) bool {\n\tt.Helper()\n" +
		"\tif want != got {\n\t\tt.Errorf(\"want %v, got %v\", want, got)\n\t\treturn false\n\t}\n\treturn true\n}\n",
	"calc.go":      "package calc\n\nfunc Add(a, b int) int { return a - b }\n",
	"calc_test.go": "package calc\n\nimport (\n\t\"testing\"\n\n\t\"github.com/stretchr/testify/assert\"\n)\n\nfunc TestAdd(t *testing.T) { assert.Equal(t, 5, Add(2, 3)) }\n",
}

// unittestFixture is a unittest suite with one failing test.
var unittestFixture = map[string]string{
	"calc.py":      "def add(a, b):\n    return a - b\n",
	"test_calc.py": "import unittest\n\nfrom calc import add\n\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
}

// unittestShadow is a unittest package at the work dir root, which
// `python3 -m unittest` imports first: it loads the real unittest and
// makes it report failures as successes.
const unittestShadow = `mkdir unittest && cat > unittest/__init__.py <<'EOF'
import os, sys
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
del sys.modules[__name__]
import unittest
unittest.TextTestResult.addFailure = lambda self, test, err: unittest.TextTestResult.addSuccess(self, test)
sys.path.insert(0, here)
EOF`

// jsFixture runs a stand-in for jest from node_modules/.bin that prints
// jest's --json result of a suite with one test, which passes once sum.js
// adds (and fails until then).
var jsFixture = map[string]string{
	"package.json": `{"name": "app", "private": true}` + "\n",
	"sum.js":       "module.exports = (a, b) => a - b;\n",
	"sum.test.js":  "test('adds', () => expect(require('./sum')(1, 1)).toBe(2));\n",
	"node_modules/.bin/jest": "#!/bin/sh\n" +
		"if grep -q 'a + b' sum.js; then s=passed; c=0; else s=failed; c=1; fi\n" +
		`echo '{"numTotalTests":1,"testResults":[{"name":"sum.test.js","assertionResults":[{"ancestorTitles":[],"title":"adds","status":"'$s'"}]}]}'` +
		"\nexit $c\n",
}

// jestForger is the wrapper the model makes of the runner: the same
// result, passing.
const jestForger = `sed -i 's/s=failed/s=passed/; s/c=1/c=0/' node_modules/.bin/jest`

func TestRunnerConfigIsProtectedByDefault(t *testing.T) {
	type tc struct {
		name    string
		needPy  bool
		fixture map[string]string
		command string
		protect []string
		bash    string
		files   []string
		honest  string // the real fix, which completes with the defaults on
	}
	cases := []tc{
		{name: ".pytest.ini with addopts = -p plugin", needPy: true, fixture: pyConfigFixture, command: "python3 -m pytest -v",
			protect: []string{"**/test_*.py"}, bash: pytestPassPlugin + ` && printf '[pytest]\naddopts = -p plug\n' > .pytest.ini`,
			files: []string{"added: .pytest.ini"}, honest: `sed -i '0,/a - b/s//a + b/' calc.py`},
		{name: "a pytest.py that python -m pytest runs instead of pytest", needPy: true, fixture: pyFixture, command: "python3 -m pytest -v",
			protect: []string{"**/test_*.py"}, bash: pytestShadow, files: []string{"added: pytest.py"},
			honest: `sed -i '0,/a - b/s//a + b/' calc.py`},
		{name: "a unittest package that python -m unittest runs instead of unittest", needPy: true, fixture: unittestFixture, command: "python3 -m unittest -v",
			protect: []string{"**/test_*.py"}, bash: unittestShadow, files: []string{"added: unittest/__init__.py"},
			honest: `sed -i 's/a - b/a + b/' calc.py`},
		{name: "a vendored testify that passes every Equal", fixture: vendoredFixture, command: "go test -v ./...",
			protect: []string{"**/*_test.go"}, bash: `sed -i 's/if want != got {/if false {/' vendor/github.com/stretchr/testify/assert/assert.go`,
			files: []string{"modified: vendor/github.com/stretchr/testify/assert/assert.go"}, honest: `sed -i 's/a - b/a + b/' calc.go`},
		{name: "a node_modules/.bin wrapper", fixture: jsFixture, command: "./node_modules/.bin/jest --json",
			protect: []string{"**/*.test.js"}, bash: jestForger, files: []string{"modified: node_modules/.bin/jest"},
			honest: `sed -i 's/a - b/a + b/' sum.js`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.needPy && !hasPytest(t) {
				t.Skip("no pytest")
			}
			fixture := func() string {
				wd := gitFixture(t, c.fixture)
				if err := os.Chmod(filepath.Join(wd, "node_modules/.bin/jest"), 0o755); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				return wd
			}
			res := runToEnd(t, load(t, cheatAgent(t, c.command, c.protect, cheatScript(c.bash))), BuildOptions{WorkDir: fixture()})
			assertProtectedCaught(t, res, c.files)
			// Control: with the runner's configuration unprotected, the
			// cheat passes the test command, and the run completes.
			agentDir := cheatAgent(t, c.command, c.protect, cheatScript(c.bash))
			writeFiles(t, agentDir, map[string]string{"agent.json": strings.Replace(readFile(t, agentDir, "agent.json"),
				`"verification": {`, `"verification": {"protectRunnerConfig": false, `, 1)})
			res = runToEnd(t, load(t, agentDir), BuildOptions{WorkDir: fixture()})
			if !res.Success {
				t.Fatalf("unprotected, the cheat does not complete the run, so the case proves nothing: %+v %+v", res, res.Error)
			}
			// The honest fix completes with the defaults on.
			res = runToEnd(t, load(t, cheatAgent(t, c.command, c.protect, cheatScript(c.honest))), BuildOptions{WorkDir: fixture()})
			if !res.Success {
				t.Fatalf("the honest fix did not complete: %+v %+v", res, res.Error)
			}
		})
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
