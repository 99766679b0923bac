package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/fakellm"
)

// endpointAgent is a one-step agent on openai:m that finishes when the
// model says DONE.
func endpointAgent(t *testing.T) string {
	return writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "ep", "description": "talks to a local server",
  "runner": {"model": "openai:m", "completion": {"type": "keyword", "keyword": "DONE"}, "budgets": {"maxIterations": 3}}}`,
		"steps_registry.json":                  `{"agentId": "ep", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Say DONE.",
	})
}

// rateLimited is a server that answers the first four requests (one
// call's attempts) with 429 and then "DONE".
func rateLimited(t *testing.T) *fakellm.Server {
	var replies []fakellm.Reply
	for i := 0; i < 4; i++ {
		replies = append(replies, fakellm.Reply{Fault: &fakellm.Fault{Status: 429, RetryAfterMs: "1"}})
	}
	return fakellm.NewOpenAI(t, fakellm.Options{Replies: append(replies, fakellm.Reply{Text: "DONE"})})
}

// capstanIn runs the CLI in dir with extra environment.
func capstanIn(t *testing.T, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := cliCommand(args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

var (
	continueHint = regexp.MustCompile(`continue with: (capstan resume \S+)`)
	showHint     = regexp.MustCompile(`\((capstan show \S+)\)`)
)

// pasted runs a printed "capstan ..." command as a user would paste it, in
// dir.
func pasted(t *testing.T, dir string, env []string, command string) (int, string, string) {
	t.Helper()
	args := strings.Fields(command)
	if args[0] != "capstan" {
		t.Fatalf("printed command %q", command)
	}
	return capstanIn(t, dir, env, args[1:]...)
}

// The run's base URL is recorded: the printed resume command, pasted in
// another directory, goes back to the same local server (not the public
// endpoint) and completes the run; the printed show command works there
// too.
func TestPrintedHintsWorkFromAnotherDirectoryAndResumeKeepsTheEndpoint(t *testing.T) {
	srv := rateLimited(t)
	agentDir, wd := endpointAgent(t), t.TempDir()
	env := []string{"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="}
	code, _, stderr := capstanIn(t, wd, env, "run", agentDir, "--base-url", srv.URL, "--workdir", wd, "--max-iterations", "2")
	if code != exitInternal || !strings.Contains(stderr, "SDK_RATE_LIMIT") {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	resume, show := continueHint.FindStringSubmatch(stderr), showHint.FindStringSubmatch(stderr)
	if resume == nil || show == nil {
		t.Fatalf("no hints printed:\n%s", stderr)
	}
	elsewhere := t.TempDir()
	if code, out, errOut := pasted(t, elsewhere, env, show[1]); code != 0 || !strings.Contains(out, "error SDK_RATE_LIMIT") {
		t.Fatalf("%s in another dir: exit %d\n%s\n%s", show[1], code, out, errOut)
	}
	code, _, stderr = pasted(t, elsewhere, env, resume[1])
	if code != 0 || !strings.Contains(stderr, "COMPLETED") {
		t.Fatalf("%s in another dir: exit %d\n%s", resume[1], code, stderr)
	}
	if n := len(srv.Requests()); n != 5 {
		t.Fatalf("the local server saw %d requests, want 5", n)
	}
	// The resumed run kept --max-iterations 2 and the work dir.
	code, out, _ := pasted(t, elsewhere, env, show[1]+" --json")
	if code != 0 || !strings.Contains(out, `"maxIterations": 2`) || !strings.Contains(out, `"workDir": "`+wd+`"`) {
		t.Fatalf("show --json after resume: exit %d\n%s", code, out)
	}
}

// interruptedOnEnvEndpoint runs endpointAgent against a rate-limited
// server named by OPENAI_BASE_URL until it gives up, and returns the
// server, the work dir and the printed resume command.
func interruptedOnEnvEndpoint(t *testing.T) (*fakellm.Server, string, string) {
	t.Helper()
	srv := rateLimited(t)
	agentDir, wd := endpointAgent(t), t.TempDir()
	env := []string{"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL=" + srv.URL}
	code, _, stderr := capstanIn(t, wd, env, "run", agentDir, "--workdir", wd)
	m := continueHint.FindStringSubmatch(stderr)
	if code != exitInternal || m == nil {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	return srv, wd, m[1]
}

// A run that talked to the endpoint its environment named is not resumed
// against another one silently: resume refuses until a flag says where to
// go.
func TestResumeRefusesASilentEndpointChange(t *testing.T) {
	srv, wd, resume := interruptedOnEnvEndpoint(t)
	moved := []string{"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL=http://127.0.0.1:1/v1"}
	code, _, stderr := pasted(t, wd, moved, resume)
	if code != exitUsage || !strings.Contains(stderr, "talked to "+srv.URL) || !strings.Contains(stderr, "--base-url "+srv.URL) {
		t.Fatalf("resume with a moved environment: exit %d\n%s", code, stderr)
	}
	if n := len(srv.Requests()); n != 4 {
		t.Fatalf("%d requests", n)
	}
	// Saying where explicitly continues, and says so.
	code, _, stderr = pasted(t, wd, moved, resume+" --base-url "+srv.URL)
	if code != 0 || !strings.Contains(stderr, "COMPLETED") {
		t.Fatalf("resume --base-url: exit %d\n%s", code, stderr)
	}
}

// resume never prints a base URL that carries a key: an environment that
// now names one, or a --base-url with one, is refused without quoting it.
func TestResumeRefusesABaseURLWithAKey(t *testing.T) {
	srv, wd, resume := interruptedOnEnvEndpoint(t)
	env := []string{"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL=" + srv.URL}
	keyed := []string{"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL=http://user:sk-resume-SECRET@127.0.0.1:1/v1"}
	code, _, stderr := pasted(t, wd, keyed, resume)
	if code != exitUsage || strings.Contains(stderr, "SECRET") || !strings.Contains(stderr, "OPENAI_BASE_URL carries a user or password") {
		t.Fatalf("resume with a key in the environment's base URL: exit %d\n%s", code, stderr)
	}
	code, _, stderr = pasted(t, wd, env, resume+" --base-url "+srv.URL+"?key=sk-resume-SECRET")
	if code != exitUsage || strings.Contains(stderr, "SECRET") || !strings.Contains(stderr, "carries a query string") {
		t.Fatalf("resume --base-url with a key: exit %d\n%s", code, stderr)
	}
	if n := len(srv.Requests()); n != 4 {
		t.Fatalf("%d requests", n)
	}
}

// A run killed before its first event leaves an empty journal: runs lists
// it as empty and resume says there is nothing to resume.
func TestEmptyJournalIsReportedClearly(t *testing.T) {
	wd := t.TempDir()
	store := testStore(t)
	w, err := store.Create(wd, "20261124T000000Z-e0e0e0")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	code, out, _ := capstanIn(t, wd, nil, "runs", "--workdir", wd)
	if code != 0 || !strings.Contains(out, "20261124T000000Z-e0e0e0") || !strings.Contains(out, "empty") {
		t.Fatalf("runs: exit %d\n%s", code, out)
	}
	code, _, stderr := capstanIn(t, t.TempDir(), nil, "resume", "20261124T000000Z-e0e0e0")
	if code != exitUsage || !strings.Contains(stderr, "stopped before it started") || !strings.Contains(stderr, "capstan run") {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
}

// An edited journal is reported by show (exit 3, after the record), listed
// as tampered, and not resumed.
func TestTamperedJournalIsReportedAndNotResumed(t *testing.T) {
	wd := t.TempDir()
	code, out, stderr := capstanIn(t, wd, nil, "run", helloDir(t), "--workdir", wd, "--max-iterations", "1", "--json", "--quiet")
	if code != exitNotCompleted {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	paths := runJournals(t, wd)
	if len(paths) != 1 {
		t.Fatalf("%d journals", len(paths))
	}
	b, _ := os.ReadFile(paths[0])
	forged := bytes.Replace(b, []byte(`"success":false`), []byte(`"success":true`), 1)
	if bytes.Equal(forged, b) {
		t.Fatalf("no success field to forge in:\n%s", b)
	}
	os.WriteFile(paths[0], forged, 0o600)
	id := regexp.MustCompile(`"runId": "([^"]+)"`).FindStringSubmatch(out)[1]
	code, out, stderr = capstanIn(t, t.TempDir(), nil, "show", id)
	if code != exitInternal || !strings.Contains(out, "hash chain broken") || !strings.Contains(stderr, "hash chain broken") {
		t.Fatalf("show: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, out, _ := capstanIn(t, wd, nil, "runs"); !strings.Contains(out, "tampered") {
		t.Fatalf("runs:\n%s", out)
	}
	code, _, stderr = capstanIn(t, wd, nil, "resume", id, "--max-iterations", "5")
	if code != exitInternal || !strings.Contains(stderr, "not resumed") {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
}

// Ctrl-C prints one clear line about the cancellation (not the chain of
// wrapped cancellations) and how to continue; the printed resume command
// finishes the run.
func TestInterruptPrintsOneClearLine(t *testing.T) {
	dir, wd := slowAgent(t), t.TempDir()
	cmd := cliCommand("run", dir, "--who", "Ada", "--workdir", wd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	interruptInIteration2(t, cmd, wd, stderr.String)
	var errorLines []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "context canceled") || strings.Count(line, "CANCELED") > 1 {
			t.Fatalf("a chain of cancellations: %q", line)
		}
		if strings.Contains(line, "error CANCELED") {
			errorLines = append(errorLines, line)
		}
	}
	if len(errorLines) != 1 || !strings.Contains(errorLines[0], "error CANCELED: run canceled (interrupted)") {
		t.Fatalf("error lines %q in:\n%s", errorLines, stderr.String())
	}
	m := continueHint.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no resume hint:\n%s", stderr.String())
	}
	if code, _, errOut := pasted(t, t.TempDir(), nil, m[1]); code != 0 || !strings.Contains(errOut, "COMPLETED") {
		t.Fatalf("%s: exit %d\n%s\nrun:\n%s", m[1], code, errOut, stderr.String())
	}
}

// A climpt merger-style agent (one closure step that runs a command, no
// model) whose command fails stops with a recoverable STEP_SUBPROCESS; the
// printed resume command, pasted, runs the step again without a model and
// completes. The error message is the output's last lines, one space apart.
func TestPrintedResumeOfASubprocessOnlyRun(t *testing.T) {
	agentDir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "merger", "description": "merges a PR",
  "parameters": {"prNumber": {"type": "number", "required": true, "cli": "--pr-number"}},
  "runner": {"flow": {"prompts": {"registry": "steps_registry.json"}},
    "verdict": {"type": "count:iteration", "config": {"maxIterations": 1}},
    "boundaries": {"allowedTools": [], "permissionMode": "default"}}}`,
		"steps_registry.json": `{"agentId": "merger", "c1": "steps", "entryStepMapping": {"count:iteration": "merge"},
  "steps": {"merge": {"stepId": "merge", "stepKind": "closure", "c2": "closure", "c3": "merge", "edition": "default",
    "uvVariables": [], "usesStdin": false,
    "runner": {"command": "sh", "args": ["merge.sh", "--pr", "${context.prNumber}"], "timeout": 10000}}}}`,
		"prompts/system.md": "merger",
	})
	// merge.sh fails the first time (with a blank line in its output) and
	// merges the second time.
	wd := writeFiles(t, map[string]string{"merge.sh": `if [ ! -f tried ]; then : > tried; printf 'checking #%s\n\nmerge refused: checks pending\n' "$2"; exit 1; fi
printf '{"merged": %s}\n' "$2"`})
	code, _, stderr := capstanIn(t, wd, nil, "run", agentDir, "--pr-number", "17", "--workdir", wd, "--stream=false")
	if code != exitNotCompleted || !strings.Contains(stderr, "STEP_SUBPROCESS: subprocess step merge failed: checking #17 merge refused: checks pending [exit status 1]") {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	resume := continueHint.FindStringSubmatch(stderr)
	if resume == nil {
		t.Fatalf("no resume hint printed:\n%s", stderr)
	}
	code, _, stderr = pasted(t, t.TempDir(), nil, resume[1])
	if code != 0 || !strings.Contains(stderr, "COMPLETED") || !strings.Contains(stderr, "model subprocess") {
		t.Fatalf("%s: exit %d\n%s", resume[1], code, stderr)
	}
	// The reason says the resume ran past the budget, not "iteration 2,
	// budget 1 iterations".
	if !strings.Contains(stderr, "iteration 2 ran on resume, past the budget of 1 iteration") {
		t.Fatalf("the reason does not say what happened:\n%s", stderr)
	}
}
