package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testenv"

	"github.com/capstan-dev/capstan/internal/clitest"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/sandbox"
)

// TestMain lets a test re-execute the test binary as the capstan CLI: with
// CAPSTAN_TEST_CLI=1 the process runs execute(os.Args after "--") and exits.
func TestMain(m *testing.M) {
	sandbox.Init()       // the sandbox re-executes this binary as its helper
	testenv.FakeGHMain() // so do the workflow tests, as a fake gh
	if os.Getenv("CAPSTAN_TEST_CLI") != "1" {
		// Run journals go to a temporary state dir, never the user's
		// home; CLI subprocesses inherit it.
		os.Exit(testenv.Run(m))
	}
	if os.Getenv("CAPSTAN_TEST_NO_LANDLOCK") == "1" {
		denyLandlock() // a machine without Landlock, for real
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(runProcess(args))
}

// testStore is the test state dir's store (TestMain sets it).
func testStore(t testing.TB) journal.Store { return clitest.Store(t) }

// runJournals returns the journal paths of wd's runs in the test state dir.
func runJournals(t testing.TB, wd string) []string {
	t.Helper()
	runs, err := testStore(t).List(wd)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range runs {
		paths = append(paths, r.Path)
	}
	return paths
}

// cliCommand returns the test binary set up to act as capstan with args.
func cliCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "CAPSTAN_TEST_CLI=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func writeFiles(t *testing.T, files map[string]string) string { return clitest.WriteFiles(t, files) }

// slowAgent finishes iteration 1, then runs a slow Bash command (2 s) in
// iteration 2, after which it finishes.
func slowAgent(t *testing.T) string { return sleepingAgent(t, 2) }

// sleepingAgent is an agent whose first iteration writes a file and whose
// second sleeps for the given seconds in Bash, then says ALL_DONE.
func sleepingAgent(t *testing.T, seconds int) string { return clitest.SleepingAgent(t, seconds) }

func TestKilledRunIsReadableAndResumable(t *testing.T) {
	dir, wd := slowAgent(t), t.TempDir()
	cmd := cliCommand("run", dir, "--who", "Ada", "--workdir", wd, "--quiet")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until iteration 2's model turn asked for the slow command.
	var journalPath string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		matches := runJournals(t, wd)
		if len(matches) == 1 {
			journalPath = matches[0]
			b, _ := os.ReadFile(journalPath)
			if strings.Contains(string(b), `"type":"model.turn","iteration":2`) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if journalPath == "" {
		t.Fatal("no journal appeared")
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	runID := filepath.Base(filepath.Dir(journalPath))

	code, out, _ := captureConfigCLI(t, "show", runID, "--workdir", wd)
	if code != 0 || !strings.Contains(out, "── iteration 2 · step s") || !strings.Contains(out, "(cut short: the run stopped during this iteration)") || !strings.Contains(out, "UNFINISHED") ||
		!strings.Contains(out, "Iteration 1 for Ada") {
		t.Fatalf("show after kill (exit %d):\n%s", code, out)
	}
	code, out, _ = captureConfigCLI(t, "runs", "--workdir", wd, "--json")
	var listed []runSummary
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].Status != "unfinished" ||
		listed[0].Iterations != 1 || listed[0].Tokens == 0 {
		t.Fatalf("runs after kill (exit %d): want 1 finished iteration and its tokens\n%s", code, out)
	}

	// The resumed run replays the killed iteration (its turns were never
	// committed to the session) and then finishes, in the same session.
	code, out, errOut := captureConfigCLI(t, "resume", runID, "--workdir", wd, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("resume exit %d\n%s\n%s", code, out, errOut)
	}
	var res struct {
		Success    bool   `json:"success"`
		Iterations int    `json:"iterations"`
		RunID      string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("resume --json: %v\n%s", err, out)
	}
	if !res.Success || res.Iterations != 2 || res.RunID != runID {
		t.Fatalf("resumed result %+v", res)
	}
	code, out, _ = captureConfigCLI(t, "show", runID, "--workdir", wd)
	if code != 0 || !strings.Contains(out, "COMPLETED  completed") || strings.Contains(out, "(cut short") {
		t.Fatalf("show after resume:\n%s", out)
	}
}

func TestRunUsageErrors(t *testing.T) {
	dir := slowAgent(t)
	code, _, errOut := captureConfigCLI(t, "run", dir, "--workdir", t.TempDir(), "--quiet")
	if code != exitUsage || !strings.Contains(errOut, "--who") {
		t.Fatalf("missing required parameter: exit %d: %s", code, errOut)
	}
	code, _, errOut = captureConfigCLI(t, "run", dir, "--who", "x", "--bogus", "1", "--workdir", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "--bogus") || !strings.Contains(errOut, "--who") {
		t.Fatalf("unknown flag: exit %d: %s", code, errOut)
	}
	code, _, errOut = captureConfigCLI(t, "run", dir, "--who", "x", "--model", "nope:m", "--workdir", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "script") {
		t.Fatalf("unknown provider: exit %d: %s", code, errOut)
	}
	code, _, errOut = captureConfigCLI(t, "run", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "CONFIG_NOT_FOUND") {
		t.Fatalf("missing agent.json: exit %d: %s", code, errOut)
	}
	// The flags that tune a run on Temporal act on no local run: refused,
	// not ignored.
	for _, flag := range []string{"--namespace", "--task-queue", "--repo", "--worker-timeout", "--continue-every", "--chain-for"} {
		value := map[string]string{"--worker-timeout": "5s", "--continue-every": "3", "--chain-for": "2s"}[flag]
		if value == "" {
			value = "x"
		}
		code, _, errOut = captureConfigCLI(t, "run", dir, "--who", "x", flag, value, "--workdir", t.TempDir(), "--quiet")
		if code != exitUsage || !strings.Contains(errOut, flag+" tunes a run on Temporal") {
			t.Errorf("%s without --temporal: exit %d: %s", flag, code, errOut)
		}
	}
	code, out, _ := captureConfigCLI(t, "run", dir, "--help")
	if code != 0 || !strings.Contains(out, "--who") {
		t.Fatalf("run DIR --help: exit %d: %s", code, out)
	}
}

func TestHelloExampleRunsOffline(t *testing.T) {
	wd := t.TempDir()
	code, out, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", wd, "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json is not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"success", "completionReason", "iterations", "runId", "sessionId", "usage", "durationMs"} {
		if _, ok := res[k]; !ok {
			t.Fatalf("--json lacks %s: %s", k, out)
		}
	}
	if res["success"] != true || res["iterations"].(float64) != 2 {
		t.Fatalf("result %s", out)
	}
	b, err := os.ReadFile(filepath.Join(wd, "greeting.txt"))
	if err != nil || string(b) != "Hello, world!\nHave a nice day.\n" {
		t.Fatalf("greeting.txt = %q, %v", b, err)
	}
	if !strings.Contains(errOut, "COMPLETED") || !strings.Contains(errOut, "[iteration 1] step initial.greet") {
		t.Fatalf("human summary on stderr:\n%s", errOut)
	}
	code, out, _ = captureConfigCLI(t, "show", res["runId"].(string), "--workdir", wd)
	if code != 0 || !strings.Contains(out, "→ step initial.greet → continuation.greet (next)") || !strings.Contains(out, "Append a second line") {
		t.Fatalf("show:\n%s", out)
	}
}

// capstan init scaffolds an agent that validate accepts and run completes
// offline.
func TestInitThenValidateThenRun(t *testing.T) {
	parent := t.TempDir()
	code, _, errOut := captureConfigCLI(t, "init", "my-agent", "--dir", parent)
	if code != 0 {
		t.Fatalf("init exit %d: %s", code, errOut)
	}
	dir := filepath.Join(parent, "my-agent")
	if code, out, _ := captureConfigCLI(t, "validate", dir); code != 0 {
		t.Fatalf("validate exit %d:\n%s", code, out)
	}
	wd := t.TempDir()
	code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd, "--json", "--quiet")
	if code != 0 || !strings.Contains(out, `"success": true`) {
		t.Fatalf("run exit %d\n%s\n%s", code, out, errOut)
	}
}

// interruptInIteration2 starts cmd (a run of slowAgent in wd), sends it
// Ctrl-C (SIGINT) once iteration 2's model has asked for the slow command,
// and fails the test unless the run exits with exitNotCompleted; output
// gives what to show when it does not.
func interruptInIteration2(t *testing.T, cmd *exec.Cmd, wd string, output func() string) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		matches := runJournals(t, wd)
		if len(matches) == 1 {
			if b, _ := os.ReadFile(matches[0]); strings.Contains(string(b), `"type":"model.turn","iteration":2`) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("exit: %v, want 130 (128 + SIGINT)\n%s", err, output())
	}
}

// Ctrl-C (SIGINT) stops a run cleanly: exit 130, completionReason canceled,
// and a journal that ends with run.end.
func TestInterruptStopsCleanly(t *testing.T) {
	dir, wd := slowAgent(t), t.TempDir()
	cmd := cliCommand("run", dir, "--who", "Ada", "--workdir", wd, "--quiet", "--json")
	var stdout strings.Builder
	cmd.Stdout = &stdout
	interruptInIteration2(t, cmd, wd, stdout.String)
	var res struct {
		CompletionReason string `json:"completionReason"`
		Journal          string `json:"journal"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil || res.CompletionReason != "canceled" {
		t.Fatalf("result %v %s", err, stdout.String())
	}
	b, _ := os.ReadFile(res.Journal)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !strings.Contains(strings.Join(lines[len(lines)-2:], "\n"), `"type":"run.end"`) {
		t.Fatalf("journal does not end with run.end:\n%s", strings.Join(lines[len(lines)-3:], "\n"))
	}
}

// A parameter flag's help names the parameter's type (climpt's number and
// boolean parameters: "--issue number", "--resume" without a value), and
// the values still reach the prompt.
func TestRunParamFlagsShowTheirType(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "typed", "description": "typed parameters",
  "parameters": {"issue": {"type": "number", "required": true, "cli": "--issue"},
    "resume": {"type": "boolean", "default": false, "cli": "--resume"},
    "branch": {"type": "string", "cli": "--branch"}},
  "runner": {"model": "script:script.yaml", "verdict": {"type": "count:iteration", "config": {"maxIterations": 1}}}}`,
		"steps_registry.json":                  `{"agentId": "typed", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main", "uvVariables": ["issue", "resume"]}}}`,
		"prompts/steps/work/main/f_default.md": "Issue {uv-issue}, resume {uv-resume}.",
		"script.yaml":                          "turns:\n  - expect: {prompt_contains: [\"Issue 5, resume true.\"]}\n    text: ok\n",
	})
	code, out, _ := captureConfigCLI(t, "run", dir, "--help")
	for _, re := range []string{`--issue number\s`, `--resume\s{2,}`, `--branch string\s`} {
		if code != 0 || !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("run DIR --help lacks %s: exit %d\n%s", re, code, out)
		}
	}
	code, _, errOut := captureConfigCLI(t, "run", dir, "--issue", "5", "--resume", "--workdir", t.TempDir(), "--quiet")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
}
