package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A validator's Python run writes no bytecode cache and pytest no
// .pytest_cache into the work dir: git-clean after it sees only what the
// model did.
func TestValidatorLeavesNoPythonCaches(t *testing.T) {
	needPython3(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "calc.py"), []byte("def add(a, b):\n    return a + b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := RunCommand(context.Background(), CommandSpec{Command: `python3 -c 'import calc; import os; print(os.environ["PYTEST_ADDOPTS"])'`, Dir: dir})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("run: %v %+v", err, out)
	}
	if out.Stdout != "-p no:cacheprovider\n" {
		t.Errorf("PYTEST_ADDOPTS = %q", out.Stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "__pycache__")); err == nil {
		t.Error("the validator's python3 wrote __pycache__ into the work dir")
	}
	// A value the environment passes on purpose wins.
	out, err = RunCommand(context.Background(), CommandSpec{Command: `echo "$PYTEST_ADDOPTS"`, Dir: dir, Env: []string{"PYTEST_ADDOPTS=-x"}})
	if err != nil || out.Stdout != "-x\n" {
		t.Errorf("a passed PYTEST_ADDOPTS: %v %q", err, out.Stdout)
	}
}

// Nor does it read the work dir's __pycache__: a .pyc of a fix, left
// beside the broken source put back with the time stamp the .pyc
// records, is not run (without a build cache, as on a resumed run).
func TestValidatorDoesNotRunStaleBytecode(t *testing.T) {
	needPython3(t)
	dir := t.TempDir()
	plant := exec.Command("sh", "-c", `printf 'def add(a, b):\n    return a + b\n' > calc.py && `+
		`python3 -c "import py_compile, importlib.util; py_compile.compile('calc.py', cfile=importlib.util.cache_from_source('calc.py'))" && `+
		`M=$(stat -c %Y calc.py) && printf 'def add(a, b):\n    return a - b\n' > calc.py && touch -d @$M calc.py && `+
		`python3 -c 'import calc; print(calc.add(2, 3))'`)
	plant.Dir = dir
	if out, err := plant.CombinedOutput(); err != nil || string(out) != "5\n" {
		t.Fatalf("the stale bytecode is not what python3 runs, so the case proves nothing: %v %q", err, out)
	}
	out, err := RunCommand(context.Background(), CommandSpec{Command: `python3 -c 'import calc; print(calc.add(2, 3))'`, Dir: dir})
	if err != nil || out.Stdout != "-1\n" {
		t.Fatalf("the validator ran %q (%v), want the source's -1", out.Stdout, err)
	}
}

// needPython3 skips the test when python3 is missing, and fails it in CI.
func needPython3(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is missing (CI installs it)")
		}
		t.Skip("no python3")
	}
}
