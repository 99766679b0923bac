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
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/journal"
)

// prepareFixture runs the example's prepare.sh into a temp dir.
func prepareFixture(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"git", "go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH", tool)
		}
	}
	wd := t.TempDir()
	out, err := exec.Command("bash", "../../examples/fix-failing-test/prepare.sh", wd).CombinedOutput()
	if err != nil {
		t.Fatalf("prepare.sh: %v\n%s", err, out)
	}
	return wd
}

func TestFixFailingTestExampleVerifiesAndRetriesByPattern(t *testing.T) {
	wd := prepareFixture(t)
	code, out, errOut := captureConfigCLI(t, "run", "../../examples/fix-failing-test", "--workdir", wd, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Iterations != 3 || !strings.Contains(res.Reason, "verified by protected-files, tests-pass, git-clean") {
		t.Fatalf("result %+v", res)
	}
	// The world agrees: tests pass and git is clean.
	if out, err := testenv.GoCommand("-C", wd, "test", "./...").CombinedOutput(); err != nil {
		t.Fatalf("go test in the work dir: %v\n%s", err, out)
	}
	if st, _ := exec.Command("git", "-C", wd, "status", "--porcelain").Output(); len(st) != 0 {
		t.Fatalf("work tree dirty: %s", st)
	}

	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	var retryTexts []string
	var failedTests []any
	for _, ev := range events {
		if ev.Type != journal.RetryPrompt {
			continue
		}
		var rp event.RetryPromptEvent
		if err := json.Unmarshal(ev.Data, &rp); err != nil {
			t.Fatal(err)
		}
		patterns = append(patterns, rp.Pattern)
		retryTexts = append(retryTexts, rp.Text)
		if rp.Pattern == "test-failed" {
			failedTests, _ = rp.Params["failedTests"].([]any)
			if !strings.HasSuffix(rp.Source, filepath.Join("retry", "fix", "f_failed_test-failed.md")) {
				t.Fatalf("test-failed prompt from %s", rp.Source)
			}
		}
	}
	if strings.Join(patterns, ",") != "test-failed,git-dirty" {
		t.Fatalf("retry patterns %v", patterns)
	}
	if len(failedTests) != 2 || !strings.Contains(retryTexts[0], "`TestAdd`: calc_test.go:7: Add(2, 3) = 6, want 5") {
		t.Fatalf("failedTests %v\n%s", failedTests, retryTexts[0])
	}
	// Only the failure's prompt is sent, not the step prompt again.
	if strings.Contains(retryTexts[0], "The tests of this Go module fail") || !strings.Contains(retryTexts[1], "- calc.go") {
		t.Fatalf("retry prompts:\n%s\n---\n%s", retryTexts[0], retryTexts[1])
	}
	// The model's declaration is carried into the retry prompt.
	if !strings.Contains(retryTexts[0], "**Reported Status**: completed") {
		t.Fatalf("no previous declaration in retry prompt:\n%s", retryTexts[0])
	}
}

func TestFixFailingTestExhaustsItsRetryBudget(t *testing.T) {
	wd := prepareFixture(t)
	// A model that always declares completion without fixing anything.
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-R", "../../examples/fix-failing-test/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	var sb strings.Builder
	sb.WriteString("turns:\n")
	for i := 0; i < 6; i++ {
		sb.WriteString("  - structured: {status: completed, summary: \"done, trust me\", next_action: {action: complete, reason: \"sure\"}}\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd, "--json", "--quiet")
	if code != exitNotCompleted {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Success || res.CompletionReason != agent.ReasonValidationExhausted || res.Iterations != 4 || res.Error == nil || res.Error.Code != "VALIDATION_EXHAUSTED" {
		t.Fatalf("faked completion was accepted or misreported: %+v %+v", res, res.Error)
	}
}
