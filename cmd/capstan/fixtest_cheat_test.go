package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// cheatingExample copies examples/fix-failing-test with script as its
// model; allowBash lets the model run any command.
func cheatingExample(t *testing.T, script string, allowBash bool) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-R", "../../examples/fix-failing-test/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if allowBash {
		b, err := os.ReadFile(filepath.Join(dir, "agent.json"))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.Replace(string(b), `"Bash(go test:*)"`, `"Bash"`, 1))
		if err := os.WriteFile(filepath.Join(dir, "agent.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const declareDone = `  - structured: {status: completed, summary: "tests pass", next_action: {action: complete, reason: "tests pass"}}
`

// The cheat of the issue: the model edits calc_test.go so that the
// expected values match what the broken Add returns, commits, and declares
// completion. The example protects its tests: Edit refuses, and the run
// does not complete.
func TestFixFailingTestExampleRefusesEditingItsTests(t *testing.T) {
	wd := prepareFixture(t)
	script := `turns:
  - tool_calls:
      - name: Edit
        input: {file_path: calc_test.go, old_string: "want 5", new_string: "want -1"}
` + strings.Repeat(declareDone, 5)
	code, out, errOut := captureConfigCLI(t, "run", cheatingExample(t, script, false), "--workdir", wd, "--json", "--quiet")
	if code != exitNotCompleted {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	orig, _ := os.ReadFile("../../examples/fix-failing-test/fixture/calc_test.go")
	if now, _ := os.ReadFile(filepath.Join(wd, "calc_test.go")); string(now) != string(orig) {
		t.Fatalf("calc_test.go changed:\n%s", now)
	}
}

// The same cheat through Bash (which Write/Edit protection cannot stop)
// is caught by the verdict stage: protected-changed, with the diff, until
// the run gives up.
func TestFixFailingTestExampleCatchesTestsEditedThroughBash(t *testing.T) {
	wd := prepareFixture(t)
	script := `turns:
  - tool_calls:
      - name: Bash
        input: {command: "sed -i 's/!= 5/!= -1/; s/want 5/want -1/; s/!= 7/!= -7/; s/want 7/want -7/' calc_test.go && git commit -qam 'tests: fix expectations'"}
` + strings.Repeat(declareDone, 5)
	code, out, errOut := captureConfigCLI(t, "run", cheatingExample(t, script, true), "--workdir", wd, "--json", "--quiet")
	if code != exitNotCompleted {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Success || res.CompletionReason != agent.ReasonValidationExhausted || !strings.Contains(res.Reason, `"protected-changed"`) {
		t.Fatalf("cheat not caught: %+v", res)
	}
	_, _, texts := retryEvents(t, res.Journal)
	if len(texts) == 0 || !strings.Contains(texts[0], "- modified: calc_test.go") || !strings.Contains(texts[0], "-\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)") ||
		!strings.HasPrefix(texts[0], "## The tests were changed") {
		t.Fatalf("retry prompt:\n%s", strings.Join(texts, "\n---\n"))
	}
	// The same failure again: the retry prompt offers the honest way out.
	if len(texts) < 2 || strings.Contains(texts[0], "### If the task cannot be done as specified") ||
		!strings.Contains(texts[1], "### If the task cannot be done as specified") {
		t.Fatalf("retry prompts:\n%s", strings.Join(texts, "\n---\n"))
	}
	// show prints the baseline and the failed check.
	code, out, errOut = captureConfigCLI(t, "show", res.RunID, "--workdir", wd)
	if code != 0 || !strings.Contains(out, "protected (**/*_test.go, **/go.mod, **/go.sum, **/go.work, **/go.work.sum, **/vendor/github.com/frankban/quicktest/**, "+
		"**/vendor/github.com/google/go-cmp/**, **/vendor/github.com/onsi/**, **/vendor/github.com/stretchr/testify/**, **/vendor/gotest.tools/**, **/vendor/modules.txt): 2 files at the start") ||
		!regexp.MustCompile(`sha256:[0-9a-f]{64}  calc_test.go`).MatchString(out) || !strings.Contains(out, "pattern protected-changed") {
		t.Fatalf("show: exit %d\n%s\n%s", code, out, errOut)
	}
}

// retryEvents returns the patterns, sources and texts of a journal's
// retry prompts.
func retryEvents(t *testing.T, path string) (patterns, sources, texts []string) {
	t.Helper()
	events, err := journal.ReadFile(path)
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
		patterns, sources, texts = append(patterns, rp.Pattern), append(sources, rp.Source), append(texts, rp.Text)
	}
	return patterns, sources, texts
}

// A model that declares the task cannot be done as specified ends the run
// with exit code 4, and show prints its reason and evidence.
func TestRunExitsFourWhenTheModelCannotComplete(t *testing.T) {
	wd := prepareFixture(t)
	script := `turns:
  - text: "CANNOT_COMPLETE: TestAddZero expects Add(0, 7) == 7 but the issue says Add must subtract\ncalc_test.go:13: want 7"
`
	code, out, errOut := captureConfigCLI(t, "run", cheatingExample(t, script, false), "--workdir", wd, "--json", "--quiet")
	if code != exitCannotComplete {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.CompletionReason != "cannot_complete" || res.CannotComplete == nil || res.CannotComplete.Evidence != "calc_test.go:13: want 7" {
		t.Fatalf("result %+v", res)
	}
	code, out, errOut = captureConfigCLI(t, "show", res.RunID, "--workdir", wd)
	if code != 0 || !strings.Contains(out, "NOT COMPLETED  cannot_complete") ||
		!strings.Contains(out, "the model declared in iteration 1 that the task cannot be done as specified:\n   TestAddZero expects") ||
		!strings.Contains(out, "evidence:\n   calc_test.go:13: want 7") {
		t.Fatalf("show: exit %d\n%s\n%s", code, out, errOut)
	}
}
