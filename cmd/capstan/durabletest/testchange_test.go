package durabletest

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
	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/journal"
)

// testChangeAgent writes an agent (testChanges "human", protected
// *_test.go, a go test validator) whose scripted model is script, and a
// work dir: a Go module whose test expects Add(2, 3) == 6 although Add is
// specified (and written) to return the sum.
func testChangeAgent(t *testing.T, script string) (agentDir, workDir string) {
	return testChangeAgentWith(t, script, `"testChanges":"human"`, addSource, nil)
}

// addSource is a correct Add.
const addSource = "package calc\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int { return a + b }\n"

// testChangeAgentWith is testChangeAgent with verification fields
// (besides protect), calc.go's source and more files of the agent folder.
func testChangeAgentWith(t *testing.T, script, verification, calc string, more map[string]string) (agentDir, workDir string) {
	t.Helper()
	files := map[string]string{
		"agent.json": `{"version":"1.0.0","name":"testchange","displayName":"d","description":"Add returns the sum of its arguments.",
 "runner":{"model":"script:script.yaml","completion":{"type":"keyword","keyword":"TASK_DONE"},
  "boundaries":{"allowedTools":["Read","Edit","Write","Bash"],"permissionMode":"acceptEdits","maxTurns":6},
  "budgets":{"maxIterations":6},
  "verification":{"protect":["**/*_test.go"],` + verification + `}}}`,
		"steps_registry.json": `{"agentId":"testchange","version":"1.0.0","c1":"steps","entryStep":"initial.fix",
 "validators":{"tests":{"type":"command","command":"go test -v ./...","successWhen":"exitCode:0","failurePattern":"test-failed","timeoutSeconds":120}},
 "steps":{"initial.fix":{"stepId":"initial.fix","name":"Fix","c2":"initial","c3":"fix",
  "completionConditions":[{"validator":"tests"}],"onFailure":{"action":"retry","maxAttempts":2}}}}`,
		"prompts/steps/initial/fix/f_default.md": "Make the tests pass. Add returns the sum of its arguments. Say TASK_DONE when done.\n",
		"script.yaml":                            script,
	}
	for k, v := range more {
		files[k] = v
	}
	agentDir = clitest.WriteFiles(t, files)
	workDir = clitest.WriteFiles(t, map[string]string{
		"go.mod":       "module calc\n\ngo 1.21\n",
		"calc.go":      calc,
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 6 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 6\", got)\n\t}\n}\n",
		"more_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAddZero(t *testing.T) {\n\tif Add(0, 0) != 0 {\n\t\tt.Fatal(\"Add(0, 0)\")\n\t}\n}\n",
	})
	clitest.Git(t, workDir, "init", "-q")
	clitest.Git(t, workDir, "add", "-A")
	clitest.Git(t, workDir, "commit", "-qm", "calc")
	return agentDir, workDir
}

// The model's first iteration: fix the wrong expectation, then ask.
const requestTurns = `turns:
  - tool_calls:
      - name: Edit
        input: {file_path: calc_test.go, old_string: "got != 6", new_string: "got != 5"}
  - text: |
      The test contradicts the specification (Add returns the sum).
      REQUEST_TEST_CHANGE: calc_test.go Add(2, 3) is 5 by the specification; the test expects 6
`

// pastedCommand finds the line "<prefix> capstan ..." in out and returns
// the command's arguments after "capstan", as a user would paste it.
func pastedCommand(t *testing.T, out, prefix string) []string {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(prefix) + ` capstan ([^\n]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q command in:\n%s", prefix, out)
	}
	return strings.Fields(m[1])
}

// requestRun runs the agent to its request: exit 5, the diff in the
// summary and in show, and show's decide commands. It returns the run id.
func requestRun(t *testing.T, agentDir, workDir string) string {
	t.Helper()
	code, out, errOut := captureConfigCLI(t, "run", agentDir, "--workdir", workDir, "--json", "--no-sandbox")
	if code != 5 {
		t.Fatalf("run exit %d, want 5 (test change requested):\n%s\n%s", code, out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.CompletionReason != agent.ReasonTestChangeRequested || res.TestChange == nil ||
		len(res.TestChange.Files) != 1 || res.TestChange.Files[0].Path != "calc_test.go" {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(errOut, "+\tif got := Add(2, 3); got != 5 {") || !strings.Contains(errOut, "approve with: capstan approve "+res.RunID) {
		t.Fatalf("the summary does not show the diff and the commands:\n%s", errOut)
	}
	// The resume before a decision is refused, naming the commands.
	if code, _, errOut := captureConfigCLI(t, "resume", res.RunID); code != 2 || !strings.Contains(errOut, "capstan approve "+res.RunID) {
		t.Fatalf("resume before a decision: exit %d\n%s", code, errOut)
	}
	code, show, errOut := captureConfigCLI(t, "show", res.RunID)
	if code != 0 || !strings.Contains(show, "test change requested in iteration 1: calc_test.go") ||
		!strings.Contains(show, "got != 5") || !strings.Contains(show, "approve with: capstan approve "+res.RunID) {
		t.Fatalf("show exit %d:\n%s\n%s", code, show, errOut)
	}
	return res.RunID
}

// TestTestChangeApproved: a run whose model asks to change a wrong test
// stops (exit 5); a human approves with the command show prints; the
// printed resume command, pasted, continues the run, whose model is told
// of the approval and completes against the approved baseline. The
// decision is journaled with who decided and the diff.
func TestTestChangeApproved(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not on PATH")
	}
	agentDir, workDir := testChangeAgent(t, requestTurns+`  - expect: {prompt_contains: ["was approved by alice"]}
    text: "TASK_DONE"
`)
	id := requestRun(t, agentDir, workDir)
	_, show, _ := captureConfigCLI(t, "show", id)
	code, out, errOut := captureConfigCLI(t, pastedCommand(t, show, "approve with:")...)
	if code != 0 {
		// the pasted command has no --by: the current user decides
		t.Fatalf("approve exit %d:\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := captureConfigCLI(t, "approve", id, "--by", "alice"); code != 2 || !strings.Contains(errOut, "already approved") {
		t.Fatalf("a second approve: exit %d\n%s", code, errOut)
	}
	// Redo with a known approver: a fresh run.
	agentDir, workDir = testChangeAgent(t, requestTurns+`  - expect: {prompt_contains: ["was approved by alice"]}
    text: "TASK_DONE"
`)
	id = requestRun(t, agentDir, workDir)
	code, out, errOut = captureConfigCLI(t, "approve", id, "--by", "alice")
	if code != 0 || !strings.Contains(out, "approved by alice") || !strings.Contains(out, "got != 5") {
		t.Fatalf("approve exit %d:\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = captureConfigCLI(t, append(pastedCommand(t, out, "continue with:"), "--json")...)
	if code != 0 {
		var r event.RunResult
		_ = json.Unmarshal([]byte(out), &r)
		evs, _ := journal.ReadFile(r.Journal)
		for _, ev := range evs {
			if ev.Type == string(event.KindCleanRun) {
				t.Log(string(ev.Data))
			}
		}
		t.Fatalf("resume exit %d:\n%s\n%s", code, out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Success {
		t.Fatalf("%v %+v", err, res)
	}
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	var decided []event.TestChangeDecision
	for _, ev := range events {
		if ev.Type == string(event.KindTestChangeDecided) {
			var d event.TestChangeDecision
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			decided = append(decided, d)
		}
	}
	if len(decided) != 1 || decided[0].By != "alice" || decided[0].At.IsZero() || len(decided[0].Files) != 1 ||
		!strings.Contains(decided[0].Files[0].Diff, "got != 5") {
		t.Fatalf("decisions journaled: %+v", decided)
	}
	if _, show, _ := captureConfigCLI(t, "show", id); !strings.Contains(show, "approved by alice at ") {
		t.Fatalf("show after the approval:\n%s", show)
	}
}

// TestTestChangeApprovedThenOtherFile: an approval covers exactly the
// file it names: after it, the model changes another protected test and
// claims completion; verification fails naming that file.
func TestTestChangeApprovedThenOtherFile(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not on PATH")
	}
	agentDir, workDir := testChangeAgent(t, requestTurns+`  - tool_calls:
      - name: Write
        input: {file_path: more_test.go, content: "package calc\n"}
  - text: "TASK_DONE"
  - expect: {prompt_contains: ["more_test.go"]}
    text: "TASK_DONE"
`)
	id := requestRun(t, agentDir, workDir)
	if code, _, errOut := captureConfigCLI(t, "approve", id, "--by", "alice"); code != 0 {
		t.Fatalf("approve exit %d\n%s", code, errOut)
	}
	code, out, errOut := captureConfigCLI(t, "resume", id, "--json")
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	if code != 1 || res.Success || res.CompletionReason != agent.ReasonValidationExhausted ||
		!strings.Contains(res.Reason, "protected-files") {
		t.Fatalf("exit %d, result %+v", code, res)
	}
}

// TestTestChangeRejected: a human rejects the request with a reason; on
// resume the model is told (the reason and the diff to undo), and a model
// that keeps its change and claims completion still fails verification.
func TestTestChangeRejected(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not on PATH")
	}
	agentDir, workDir := testChangeAgent(t, requestTurns+`  - expect: {prompt_contains: ["was rejected by bob: the spec is being changed to match the test", "-\tif got := Add(2, 3); got != 6 {"]}
    text: "TASK_DONE"
  - text: "TASK_DONE"
`)
	id := requestRun(t, agentDir, workDir)
	code, out, errOut := captureConfigCLI(t, "reject", id, "--by", "bob", "--reason", "the spec is being changed to match the test")
	if code != 0 || !strings.Contains(out, "rejected by bob") {
		t.Fatalf("reject exit %d:\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = captureConfigCLI(t, append(pastedCommand(t, out, "continue with:"), "--json")...)
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	if code != 1 || res.Success || res.CompletionReason != agent.ReasonValidationExhausted || !strings.Contains(res.Reason, "protected-files") {
		t.Fatalf("exit %d, result %+v\n%s", code, res, errOut)
	}
	if got := clitest.ReadFile(t, filepath.Join(workDir, "calc_test.go")); !strings.Contains(got, "got != 5") {
		t.Fatalf("capstan changed the work dir:\n%s", got)
	}
	if _, show, _ := captureConfigCLI(t, "show", id); !strings.Contains(show, "rejected by bob at ") {
		t.Fatalf("show after the rejection:\n%s", show)
	}
}

// TestTestChangeByHiddenTests: under testChanges "hiddenTests" the hidden
// tests decide. A request that fixes a wrong expectation of a correct Add
// is accepted (the hidden tests pass) and the run completes without a
// human; a request that bends a right expectation to a wrong Add (a - b)
// is rejected (the hidden tests fail), the model is told, and keeping the
// change still fails verification.
func TestTestChangeByHiddenTests(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not on PATH")
	}
	hiddenFiles := map[string]string{"_hidden/calc_hidden_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAddMore(t *testing.T) {\n\tif Add(10, 20) != 30 {\n\t\tt.Fatal(\"Add(10, 20)\")\n\t}\n}\n"}
	const verification = `"hidden":["_hidden/**"],"testChanges":"hiddenTests"`

	agentDir, workDir := testChangeAgentWith(t, requestTurns+`  - expect: {prompt_contains: ["was approved by hidden tests"]}
    text: "TASK_DONE"
`, verification, addSource, hiddenFiles)
	code, out, errOut := captureConfigCLI(t, "run", agentDir, "--workdir", workDir, "--json", "--quiet", "--no-sandbox")
	if code != 0 {
		t.Fatalf("the honest request: exit %d\n%s\n%s", code, out, errOut)
	}

	const wrongAdd = "package calc\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int { return a - b }\n"
	agentDir, workDir = testChangeAgentWith(t, `turns:
  - tool_calls:
      - name: Edit
        input: {file_path: calc_test.go, old_string: "got != 6", new_string: "got != -1"}
  - text: |
      REQUEST_TEST_CHANGE: calc_test.go Add(2, 3) is -1
  - expect: {prompt_contains: ["was rejected by hidden tests: 1 of 1 hidden tests do not pass"]}
    text: "TASK_DONE"
  - text: "TASK_DONE"
`, verification, wrongAdd, hiddenFiles)
	code, out, errOut = captureConfigCLI(t, "run", agentDir, "--workdir", workDir, "--json", "--quiet", "--no-sandbox")
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	if code != 1 || res.CompletionReason != agent.ReasonValidationExhausted || !strings.Contains(res.Reason, "protected-files") {
		t.Fatalf("the cheating request: exit %d, result %+v\n%s", code, res, errOut)
	}
}

// TestCleanRunCatchesStateOutsideTheWorkDir: the model makes Add right
// only while a file it wrote to the temporary directory exists (state
// outside the work dir, which the run's validators share with its Bash
// commands, unsandboxed). The verification passes; the clean run after
// its last turn, with a fresh temporary directory, does not confirm it,
// and the run fails with CLEAN_RUN_DIFFERS naming the test. With
// cleanRun false the same run completes (the control).
func TestCleanRunCatchesStateOutsideTheWorkDir(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not on PATH")
	}
	const stateful = "package calc\n\nimport (\n\t\"os\"\n\t\"path/filepath\"\n)\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int {\n\tif _, err := os.Stat(filepath.Join(os.TempDir(), \"capstan-clean-marker\")); err == nil && a == 2 && b == 3 {\n\t\treturn 6\n\t}\n\treturn a + b\n}\n"
	script := `turns:
  - tool_calls:
      - name: Bash
        input: {command: "touch \"${TMPDIR:-/tmp}/capstan-clean-marker\""}
  - text: "TASK_DONE"
`
	t.Cleanup(func() { os.Remove(filepath.Join(os.TempDir(), "capstan-clean-marker")) })
	for _, on := range []bool{true, false} {
		verification := `"cleanRun":false`
		if on {
			verification = `"cleanRun":true`
		}
		agentDir, workDir := testChangeAgentWith(t, script, verification, stateful, nil)
		code, out, errOut := captureConfigCLI(t, "run", agentDir, "--workdir", workDir, "--json", "--quiet", "--no-sandbox")
		var res event.RunResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v\n%s\n%s", err, out, errOut)
		}
		if !on {
			if code != 0 || !res.Success {
				t.Fatalf("cleanRun false: exit %d, result %+v\n%s", code, res, errOut)
			}
			continue
		}
		if code != 1 || res.Success || res.CompletionReason != agent.ReasonCleanRunDiffers || res.Error == nil ||
			res.Error.Code != "CLEAN_RUN_DIFFERS" || !strings.Contains(res.Error.Message, "calc.TestAdd failed") {
			t.Fatalf("exit %d, result %+v\n%s", code, res, errOut)
		}
	}
}
