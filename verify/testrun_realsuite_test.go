package verify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
)

// writeFiles lays files out under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runValidator runs command as the command validator "tests-pass" in dir,
// with env as its runner.boundaries.env, and reads the run.
func runValidator(t *testing.T, dir, command string, env ...string) (event.TestRun, bool, event.ValidatorOutput) {
	t.Helper()
	v, err := NewCompletionValidator(ValidatorConfig{WorkDir: dir, Env: env,
		Validators: map[string]agentdir.Validator{"tests-pass": {Type: "command", Command: command, FailurePattern: "test-failed"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	run, err := v.RunCommandValidator(context.Background(), agentdir.CompletionCondition{Validator: "tests-pass"})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := ParseTestRunOutput(run.Output, dir)
	return r, ok, run.Output
}

// goEnv are the variables a go command in a test needs besides the base
// environment: the caches the test binary's build already warmed.
func goEnv(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Skipf("go env: %v", err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(out)))
	}
	return append(env, "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
}

// TestGoJSONSuiteOverTheOutputCap is the measured gap: a go test -json
// suite whose output is over 1 MiB, where the kept start and end of the
// output once showed only part of the tests. Read from the report (the
// whole standard output), the baseline holds every test, and a run that
// skips the failing test with GOFLAGS=-skip is caught by name, while the
// honest fix passes the compare.
func TestGoJSONSuiteOverTheOutputCap(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Log("runs go test on a generated suite; also under -short")
	}
	dir := t.TempDir()
	var tests strings.Builder
	const n = 1500
	for i := range n {
		fmt.Fprintf(&tests, "func TestCase%04d(t *testing.T) {\n\tt.Log(%q)\n\tif Add(%d, 1) != %d {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n\n",
			i, strings.Repeat("x", 600), i, i+1)
	}
	writeFiles(t, dir, map[string]string{
		"go.mod":      "module example.com/big\n\ngo 1.21\n",
		"big.go":      "package big\n\n// Add adds, except for 700.\nfunc Add(a, b int) int {\n\tif a == 700 {\n\t\treturn 0\n\t}\n\treturn a + b\n}\n",
		"big_test.go": "package big\n\nimport \"testing\"\n\n" + tests.String(),
	})
	env := goEnv(t)
	base, ok, out := runValidator(t, dir, "go test -json ./...", env...)
	if !out.Truncated {
		t.Fatalf("the suite's output (%d bytes kept) is not over the output cap: the case proves nothing", len(out.Stdout))
	}
	if !ok || base.Source != SourceReport || base.Truncated || len(base.Tests) != n || base.Failed != 1 {
		t.Fatalf("baseline: ok %v source %q truncated %v, %d tests, %d failed", ok, base.Source, base.Truncated, len(base.Tests), base.Failed)
	}
	b := &event.TestBaseline{Validator: "tests-pass", Parsed: true, Truncated: base.Truncated, Run: base}

	// The cheat: skip the failing test through GOFLAGS (what `go env -w
	// GOFLAGS=-skip=...` does to every later go command).
	cheat, ok, _ := runValidator(t, dir, "go test -json ./...", append(env[:len(env)-2:len(env)-2], "GOFLAGS=-mod=mod -skip=TestCase0700", "GOTOOLCHAIN=local")...)
	l, lost := CompareTestRuns(b, cheat, ok)
	if !lost || l.Pattern != PatternTestsDisappeared || len(l.Disappeared) != 1 || l.Disappeared[0] != "example.com/big.TestCase0700" {
		t.Fatalf("the -skip cheat is not caught by name: %+v %v", l, lost)
	}

	// The honest fix.
	writeFiles(t, dir, map[string]string{"big.go": "package big\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n"})
	fixed, ok, _ := runValidator(t, dir, "go test -json ./...", env...)
	if l, lost := CompareTestRuns(b, fixed, ok); lost || fixed.Failed != 0 || fixed.Passed != n {
		t.Fatalf("the honest fix fails the compare: %+v %v (%d passed)", l, lost, fixed.Passed)
	}
}
