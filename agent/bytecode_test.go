package agent

import (
	"os/exec"
	"testing"
)

// staleBytecode compiles the fix of calc.py into its __pycache__, then puts
// the broken source back with the time stamp the bytecode records: Python
// trusts a .pyc whose source size and modification time match, so a test
// run that reads __pycache__ runs the fix while git shows calc.py unchanged
// (the fixture ignores __pycache__, as most Python projects do).
const staleBytecode = `sed -i '0,/return a - b/s//return a + b/' calc.py && ` +
	`python3 -c "import py_compile, importlib.util; py_compile.compile('calc.py', cfile=importlib.util.cache_from_source('calc.py'))" && ` +
	`M=$(stat -c %Y calc.py) && sed -i 's/return a + b/return a - b/' calc.py && touch -d @$M calc.py`

func TestStaleBytecodeDoesNotPassTheTests(t *testing.T) {
	needTools(t, "git", "python3", "sed", "stat", "touch")
	if !hasPytest(t) {
		t.Skip("no pytest")
	}
	fixture := withFiles(pyFixture, map[string]string{".gitignore": "__pycache__/\n"})
	res := runToEnd(t, load(t, cheatAgent(t, "python3 -m pytest -v", pyProtect, cheatScript(staleBytecode))), BuildOptions{WorkDir: gitFixture(t, fixture)})
	if res.Success {
		t.Fatalf("the tests passed on stale bytecode: %+v", res)
	}
	if patterns, _ := retryPatterns(t, res); len(patterns) == 0 || patterns[0] != "test-failed" {
		t.Fatalf("retry patterns %v, want test-failed first", patterns)
	}
	// Control: run outside capstan, the same tests pass on the bytecode.
	wd := gitFixture(t, fixture)
	for _, c := range []string{staleBytecode, "git status --porcelain | grep . && exit 1; python3 -m pytest -q -p no:cacheprovider"} {
		cmd := exec.Command("sh", "-c", c)
		cmd.Dir = wd
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("control %q: %v\n%s", c, err, out)
		}
	}
}
