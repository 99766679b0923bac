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
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is missing (CI installs it)")
		}
		t.Skip("no python3")
	}
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
