package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// TestHiddenTestsExample runs examples/hidden-tests through the CLI. The
// special-casing model (script.yaml makes Abs(-3) return 3) passes the
// visible test and fails the hidden ones: the run does not complete, the
// retry pattern is hidden-tests-failed, and nothing the model is shown
// names or quotes a hidden test; the hidden file is never left in the
// work dir. The honest model (honest.yaml) completes, and show lists the
// hidden tests that passed, by name only. Unsandboxed, so the go build
// cache is the warm one and the test stays cheap.
func TestHiddenTestsExample(t *testing.T) {
	for _, tool := range []string{"git", "go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH", tool)
		}
	}
	const example = "../../examples/hidden-tests"
	prepare := func() string {
		wd := t.TempDir()
		if out, err := exec.Command("bash", example+"/prepare.sh", wd).CombinedOutput(); err != nil {
			t.Fatalf("prepare.sh: %v\n%s", err, out)
		}
		return wd
	}
	hiddenSource, err := os.ReadFile(filepath.Join(example, "_hidden", "mathx_hidden_test.go"))
	if err != nil {
		t.Fatal(err)
	}

	wd := prepare()
	code, out, errOut := captureConfigCLI(t, "run", example, "--workdir", wd, "--json", "--quiet", "--no-sandbox")
	if code == 0 {
		t.Fatalf("the special-casing model completed:\n%s\n%s", out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Success || res.CompletionReason != agent.ReasonValidationExhausted {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(wd, "mathx_hidden_test.go")); !os.IsNotExist(err) {
		t.Fatalf("the hidden test file is left in the work dir: %v", err)
	}
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, ev := range events {
		data := string(ev.Data)
		if ev.Type == journal.RetryPrompt {
			var rp event.RetryPromptEvent
			if err := json.Unmarshal(ev.Data, &rp); err != nil {
				t.Fatal(err)
			}
			patterns = append(patterns, rp.Pattern)
			if rp.Pattern == "hidden-tests-failed" && !strings.Contains(rp.Text, "1 of those 2 do not pass") {
				t.Errorf("the retry prompt does not say how many hidden tests fail:\n%s", rp.Text)
			}
			data = rp.Text
		}
		// What reaches the model (prompts, tool results) never names or
		// quotes a hidden test.
		if ev.Type == journal.RetryPrompt || ev.Type == journal.ToolCall || ev.Type == journal.ModelTurn {
			for _, secret := range []string{"TestAbsNegatives", "TestAbsZeroAndPositives", "-250", "mathx_hidden_test"} {
				if strings.Contains(data, secret) {
					t.Errorf("%s event shows the model %q", ev.Type, secret)
				}
			}
		}
	}
	if len(patterns) == 0 || patterns[0] != "hidden-tests-failed" {
		t.Fatalf("retry patterns %v, want hidden-tests-failed", patterns)
	}

	// The honest model completes; show lists the hidden tests by name.
	wd = prepare()
	code, out, errOut = captureConfigCLI(t, "run", example, "--workdir", wd, "--json", "--quiet", "--no-sandbox", "--model", "script:honest.yaml")
	if code != 0 {
		t.Fatalf("the honest model did not complete: exit %d\n%s\n%s", code, out, errOut)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Reason, "hidden-tests") {
		t.Fatalf("the verdict does not name the hidden-tests check: %s", res.Reason)
	}
	// A resume reads the hidden baseline from the journal.
	rec, err := agent.LoadRun(res.RunID, res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if b := rec.HiddenBaselines["tests-pass"]; b == nil || len(b.Tests) != 2 || !b.PerTest {
		t.Fatalf("hidden baseline for resume: %+v", b)
	}
	code, show, errOut := captureConfigCLI(t, "show", res.RunID)
	if code != 0 {
		t.Fatalf("show: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"hidden tests in tests-pass: 2 of 2 passed",
		"hidden tests of tests-pass before the first iteration: 2 (1 passed, 1 failed)",
		"example.com/mathx.TestAbsNegatives", "example.com/mathx.TestAbsZeroAndPositives"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	// Names, never contents.
	for _, line := range strings.Split(string(hiddenSource), "\n") {
		if l := strings.TrimSpace(line); len(l) > 12 && !strings.HasPrefix(l, "func ") && strings.Contains(show, l) {
			t.Errorf("show quotes the hidden test file: %q", l)
		}
	}
}
