package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// announced matches the line a run prints before it starts.
var announced = regexp.MustCompile(`(?m)^work dir `)

// pasteShell runs command lines with sh in dir, capstan on PATH being this
// test binary: what a user does with a printed hint.
func pasteShell(t *testing.T, dir string) func(line string) (int, string) {
	t.Helper()
	env := capstanOnPath(t)
	return func(line string) (int, string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		return exitAndOutput(t, cmd)
	}
}

// exitAndOutput runs cmd and returns its exit code and combined output;
// a command that cannot be started fails the test.
func exitAndOutput(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// pastedCommand returns the command that follows marker in out, up to the
// end of its line or a closing parenthesis.
func pastedCommand(t *testing.T, out, marker string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, marker)
	if !ok {
		t.Fatalf("no %q in:\n%s", marker, out)
	}
	line, _, _ := strings.Cut(rest, "\n")
	line = strings.TrimSpace(line)
	if i := strings.LastIndex(line, ")"); i >= 0 && !strings.Contains(line[:i], "(") {
		line = line[:i]
	}
	return line
}

// A work dir that does not exist is a usage error before anything runs,
// and the hint, pasted, creates it: the same command then completes.
func TestMissingWorkDirHintWorks(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	hello, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	run := "capstan run " + shellQuote(hello) + " --workdir 'hello work'"
	code, out := sh(run)
	if code != exitUsage || !strings.Contains(out, "does not exist") || announced.MatchString(out) {
		t.Fatalf("missing work dir: exit %d, want %d (and no run announced)\n%s", code, exitUsage, out)
	}
	fix := pastedCommand(t, out, "create it first (")
	if !strings.HasPrefix(fix, "mkdir -p ") {
		t.Fatalf("hint %q is not a mkdir command:\n%s", fix, out)
	}
	if code, out := sh(fix); code != 0 {
		t.Fatalf("%s: exit %d\n%s", fix, code, out)
	}
	if code, out := sh(run); code != 0 {
		t.Fatalf("after the hint: exit %d\n%s", code, out)
	}
}

// An agent whose validators run git, given a work dir that does not exist
// yet: the hint makes it a git repository (git -C DIR init would fail).
func TestGitWorkDirHintWorksForAMissingDir(t *testing.T) {
	def, err := agentdir.LoadAndValidate(filepath.Join("..", "..", "examples", "fix-failing-test"), agent.ValidateOptions())
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	wd := filepath.Join(parent, "new project")
	err = checkGitWorkDir(t.Context(), def, wd)
	if err == nil {
		t.Fatal("a missing work dir passed the git check")
	}
	fix := pastedCommand(t, err.Error(), "make this one: ")
	if code, out := pasteShell(t, parent)(fix); code != 0 {
		t.Fatalf("%s: exit %d\n%s", fix, code, out)
	}
	if err := checkGitWorkDir(t.Context(), def, wd); err != nil {
		t.Fatalf("after the hint: %v", err)
	}
}

// `capstan run` of an invalid folder lists the problems, named from the
// current directory, and prints a validate command that works when pasted.
func TestInvalidAgentPrintsAWorkingValidateCommand(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	if code, out := sh("capstan init bad"); code != 0 {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	path := filepath.Join(parent, "bad", "agent.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(`"maxIterations": 3`), []byte(`"maxIterations": "3"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := sh("mkdir w && capstan run bad --workdir w")
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s", code, exitUsage, out)
	}
	problem := regexp.MustCompile(`(?m)^bad/agent\.json:\d+:\d+: error AC-SCHEMA-TYPE `)
	if !problem.MatchString(out) || !strings.Contains(out, "(1 error, listed above)") {
		t.Fatalf("problem not named from the current directory, or wrong count:\n%s", out)
	}
	validate := pastedCommand(t, out, "check the folder again with: ")
	code, vout := sh(validate)
	if code != exitUsage || !problem.MatchString(vout) {
		t.Fatalf("%s: exit %d\n%s", validate, code, vout)
	}
}

// The summary of a run stopped by its budget prints the hint once, and
// its "continue with:" command completes the run; resuming it again is a
// usage error whose command starts the agent anew.
func TestSummaryHintOnceAndResumeCommandsWork(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	hello, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	code, out := sh("mkdir w && capstan run " + shellQuote(hello) + " --workdir w --max-iterations 1")
	if code != exitNotCompleted {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if n := strings.Count(out, "hint:"); n != 1 {
		t.Fatalf("the hint is printed %d times, want once:\n%s", n, out)
	}
	resume := pastedCommand(t, out, "continue with: ")
	if code, out := sh(resume); code != 0 {
		t.Fatalf("%s: exit %d\n%s", resume, code, out)
	}
	code, out = sh(resume)
	if code != exitUsage || !strings.Contains(out, "already completed") || announced.MatchString(out) {
		t.Fatalf("resume of a completed run: exit %d, want %d before any run output\n%s", code, exitUsage, out)
	}
	again := pastedCommand(t, out, "run the agent again with: ")
	if code, out := sh(again); code != 0 {
		t.Fatalf("%s: exit %d\n%s", again, code, out)
	}
}

// The progress line keeps a reason as long as the README shows, and a cut
// never splits a UTF-8 character.
func TestProgressLineKeepsTheReason(t *testing.T) {
	reason := "completion declared (structured.status), but tests-pass failed (pattern test-failed); attempt 1 of 4 failed, retry prompt sent"
	var buf bytes.Buffer
	p := newProgressPrinter(&buf)
	p.Consume(event.Event{Kind: journal.IterationEnd, Payload: &event.IterationEvent{Summary: &event.IterationSummary{Iteration: 1, StepID: "complete.fix"}, Outcome: event.OutcomeEvent{Reason: reason}}})
	if !strings.HasSuffix(strings.TrimSpace(buf.String()), "continue: "+reason) {
		t.Fatalf("reason cut: %q", buf.String())
	}
	long := strings.Repeat("→", 100)
	for n := 190; n <= 200; n++ {
		if got := firstLine(long, n); !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > n+len("…") {
			t.Fatalf("firstLine(…, %d) = %q", n, got)
		}
	}
}

// The README lists every completion reason a run can end with.
func TestREADMEListsEveryCompletionReason(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(b), "`completionReason` is one of")
	if !ok {
		t.Fatal("README.md has no list of completion reasons")
	}
	list, _, _ = strings.Cut(list, "\n\n")
	for _, reason := range []string{agent.ReasonCompleted, agent.ReasonEmergencyStop, agent.ReasonMaxIterations, agent.ReasonTimeBudget,
		agent.ReasonTokenBudget, agent.ReasonCostBudget, agent.ReasonCanceled, agent.ReasonAborted, agent.ReasonError,
		agent.ReasonValidationExhausted, agent.ReasonStepLoopLimit, agent.ReasonCannotComplete} {
		if !strings.Contains(list, "`"+reason+"`") {
			t.Errorf("README.md's list of completion reasons lacks %s", reason)
		}
	}
}

// A command given the wrong number of arguments or an unknown flag says
// what it takes.
func TestUsageErrorsShowTheUsageLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate"}, "(usage: capstan validate DIR [flags])"},
		{[]string{"show", "a", "b"}, "(usage: capstan show RUN [flags])"},
		{[]string{"init", "--bogus", "x"}, "(usage: capstan init NAME [flags])"},
		{[]string{"skills", "run"}, "[--model M] [flags])"},
	} {
		code, _, errOut := captureConfigCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("capstan %s: exit %d, want %d and %q:\n%s", strings.Join(tc.args, " "), code, exitUsage, tc.want, errOut)
		}
	}
}

// An agent that names no model is refused before the run is announced:
// the hint names every way to give one, and the environment variable it
// names works.
func TestNoModelHintNamesEveryWay(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	if code, out := sh("capstan init nomodel && mkdir w"); code != 0 {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	path := filepath.Join(parent, "nomodel", "agent.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(`"model": "script:script.yaml",`), nil, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := sh("env -u CAPSTAN_MODEL capstan run nomodel --workdir w")
	if code != exitUsage || !strings.Contains(out, "CONFIG_INVALID: no model") || announced.MatchString(out) {
		t.Fatalf("exit %d, want %d before any run output\n%s", code, exitUsage, out)
	}
	for _, way := range []string{"--model", "runner.model", "CAPSTAN_MODEL", "default_model"} {
		if !strings.Contains(out, way) {
			t.Errorf("the hint does not name %s:\n%s", way, out)
		}
	}
	if code, out := sh("CAPSTAN_MODEL=script:script.yaml capstan run nomodel --workdir w"); code != 0 {
		t.Fatalf("with CAPSTAN_MODEL: exit %d\n%s", code, out)
	}
}

// Help shows each flag's value type: a usage text with a word in
// backquotes would show that word in its place ("--temporal capstan
// worker").
func TestFlagHelpShowsValueTypes(t *testing.T) {
	check := func(path string, f *pflag.Flag) {
		if name, _ := pflag.UnquoteUsage(f); strings.Contains(name, " ") {
			t.Errorf("%s --%s: help shows %q as its value", path, f.Name, name)
		}
	}
	walkCommands(newRootCmd(), func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { check(c.CommandPath(), f) })
	})
	var flags runFlags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	flags.registerRun(fs)
	fs.VisitAll(func(f *pflag.Flag) { check("capstan run DIR", f) })
}

// A problem prints one hint: a missing step prompt, a schema and a script
// that do not parse carry their own hint, which replaces the generic one.
func TestValidateProblemsHaveOneHint(t *testing.T) {
	parent := t.TempDir()
	if code, _, errOut := captureConfigCLI(t, "init", "twice", "--dir", parent); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	dir := filepath.Join(parent, "twice")
	if err := os.Remove(filepath.Join(dir, "prompts", "steps", "initial", "main", "f_default.md")); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "steps_registry.json")
	b, err := os.ReadFile(reg)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"uvVariables"`), []byte(`"outputSchemaRef": {"file": "out.schema.json", "schema": "done"}, "uvVariables"`), 1)
	if err := os.WriteFile(reg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schemas", "out.schema.json"), []byte("{\"done\": {},}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("turns:\n  - txet: done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := captureConfigCLI(t, "validate", dir)
	if code != exitUsage || !strings.Contains(out, "SR-STEP-PROMPT-MISSING") || !strings.Contains(out, "SR-SCHEMA-UNRESOLVED") ||
		!strings.Contains(out, "AG-MODEL-SCRIPT-INVALID") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "; hint:") {
			t.Errorf("two hints: %s", line)
		}
	}
	if !strings.Contains(out, "— create prompts/steps/initial/main/f_default.md") {
		t.Errorf("the missing prompt's hint does not name the file:\n%s", out)
	}
}

// A run whose work dir is gone cannot be resumed elsewhere: a usage error
// that says so instead of suggesting --workdir, which resume refuses.
func TestResumeOfARunWhoseWorkDirIsGone(t *testing.T) {
	wd := t.TempDir()
	code, out, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", wd, "--max-iterations", "1", "--json", "-q")
	if code != exitNotCompleted {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var res struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(wd); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = captureConfigCLI(t, "resume", res.RunID, "--max-iterations", "2")
	if code != exitUsage || !strings.Contains(errOut, "no longer a directory") || strings.Contains(errOut, "pass an existing --workdir") {
		t.Fatalf("exit %d, want %d\n%s", code, exitUsage, errOut)
	}
}

// A skill run without --expect is not reported as completed (nothing was
// verified, exit 1), and its summary names the show command, which works.
func TestSkillRunWithoutExpectIsNotCompleted(t *testing.T) {
	var args []string
	for _, a := range exampleSkillArgs(t, filepath.Join("..", "..", "examples", "skills"), t.TempDir()) {
		if a == "--expect" || strings.HasPrefix(a, "report.json:") || a == "summary.md" {
			continue
		}
		args = append(args, a)
	}
	code, _, errOut := captureConfigCLI(t, args...)
	if code != exitNotCompleted || !strings.HasPrefix(errOut, "NOT VERIFIED  skill status-report") {
		t.Fatalf("exit %d, want %d and NOT VERIFIED:\n%s", code, exitNotCompleted, errOut)
	}
	show := strings.Fields(pastedCommand(t, errOut, "(capstan show "))
	if len(show) != 1 {
		t.Fatalf("show command %q", show)
	}
	if code, out, errOut := captureConfigCLI(t, "show", show[0]); code != 0 || !strings.Contains(out, "skill status-report") {
		t.Fatalf("capstan show %s: exit %d\n%s%s", show[0], code, out, errOut)
	}
}

// A missing required parameter is refused before the run is announced.
func TestMissingParameterBeforeTheRun(t *testing.T) {
	code, _, errOut := captureConfigCLI(t, "run", slowAgent(t), "--workdir", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "PARAM_MISSING") || announced.MatchString(errOut) {
		t.Fatalf("exit %d, want %d before any run output:\n%s", code, exitUsage, errOut)
	}
}

// `capstan runs` in a work dir without runs names that dir as a path a
// reader can recognize, not ".".
func TestNoRunsNamesTheAbsoluteWorkDir(t *testing.T) {
	wd := t.TempDir()
	code, _, errOut := captureConfigCLI(t, "runs", "--workdir", wd)
	if code != 0 || !strings.Contains(errOut, "no runs of work dir "+wd+" ") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rel, err := filepath.Rel(mustGetwd(t), wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, errOut := captureConfigCLI(t, "runs", "--workdir", rel); !strings.Contains(errOut, "no runs of work dir "+wd+" ") {
		t.Fatalf("relative --workdir %s: %s", rel, errOut)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// A pipeline's agent stage that does not complete prints a show command
// that works when pasted, even from elsewhere and with a space in the
// work dir.
func TestPipelineAgentStageShowHintWorks(t *testing.T) {
	dir := filepath.Join(writeFiles(t, withWriterAgent("kites", "Kites", map[string]string{
		"p.yaml": `version: 1
inputs: [request]
stages:
  - id: writer
    kind: agent
    dir: ../agents/writer
    params: {topic: "{{input.request}}"}
    preconditions: [input.request]
    postconditions: [custom.headline]
`,
	})), "pipe work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..", "p.yaml"), filepath.Join(dir, "p.yaml")); err != nil {
		t.Fatal(err)
	}
	sh := pasteShell(t, dir)
	if code, out := sh("git init -q && capstan pipeline run --file p.yaml not-kites"); code == 0 || !strings.Contains(out, "see capstan show ") {
		t.Fatalf("a stage whose agent fails: exit %d\n%s", code, out)
	} else {
		show := pastedCommand(t, out, "see ")
		if code, out := pasteShell(t, t.TempDir())(show); code != 0 || !strings.Contains(out, "writer") {
			t.Fatalf("%s: exit %d\n%s", show, code, out)
		}
		// Without --journal-dir the pipeline run is journaled too, in the
		// state directory, and its show command works pasted elsewhere.
		show = pastedCommand(t, out, "events.jsonl  (")
		if code, out := pasteShell(t, t.TempDir())(show); code != 0 || !strings.Contains(out, "pipeline p.yaml") || !strings.Contains(out, "✗ writer  failed") {
			t.Fatalf("%s: exit %d\n%s", show, code, out)
		}
	}
}

// Runs started in the same second are listed by when they started, not
// by the random suffix of their ids.
func TestRunsOrderWithinASecond(t *testing.T) {
	work := t.TempDir()
	store, err := runStore()
	if err != nil {
		t.Fatal(err)
	}
	// The first run started has the larger suffix.
	for _, id := range []string{"20260102T030405Z-ffffff", "20260102T030405Z-000000"} {
		w, err := store.Create(work, id)
		if err != nil {
			t.Fatal(err)
		}
		w.Append("run.start", agent.RunStartEvent{RunID: id, Agent: "a", WorkDir: work})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // a later clock reading for the next run
	}
	code, out, errOut := captureConfigCLI(t, "runs", "--workdir", work)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	first, second := strings.Index(out, "-000000"), strings.Index(out, "-ffffff")
	if first < 0 || second < 0 || first > second {
		t.Fatalf("the run started last is not listed first:\n%s", out)
	}
}

// `capstan run` of a folder that cannot be loaded (broken JSON, a missing
// registry) names the file from the current directory, as validate does,
// so the location can be opened as printed.
func TestRunOfAnUnloadableFolderNamesItsFile(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	for _, name := range []string{"broken", "noreg", "noagent"} {
		if code, out := sh("capstan init " + name); code != 0 {
			t.Fatalf("init: exit %d\n%s", code, out)
		}
	}
	path := filepath.Join(parent, "broken", "agent.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(`"maxIterations": 3`), []byte(`"maxIterations": 3,`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(parent, "noreg", "steps_registry.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(parent, "noagent", "agent.json")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, code, file string }{
		{"broken", "CONFIG_PARSE", "(broken/agent.json:"},
		{"noreg", "CONFIG_NOT_FOUND", "(noreg/steps_registry.json)"},
		{"noagent", "CONFIG_NOT_FOUND", "(noagent/agent.json)"},
	} {
		code, out := sh("mkdir -p w && capstan run " + c.dir + " --workdir w")
		if code != exitUsage || !strings.Contains(out, c.code) || !strings.Contains(out, c.file) || announced.MatchString(out) {
			t.Fatalf("run %s: exit %d, want %d, %s naming %s\n%s", c.dir, code, exitUsage, c.code, c.file, out)
		}
		_, vout := sh("capstan validate " + c.dir)
		if !strings.Contains(vout, strings.Trim(c.file, "()")) {
			t.Fatalf("validate %s names another file than run:\n%s", c.dir, vout)
		}
		// capstan's words, not the OS's ("openat steps_registry.json: no
		// such file or directory")
		if strings.Contains(out+vout, "openat") || strings.Contains(out+vout, "no such file") {
			t.Errorf("%s: the OS's error text:\n%s%s", c.dir, out, vout)
		}
	}
	// A required parameter not given names the agent.json that declares it.
	if code, out := sh("capstan init needy"); code != 0 {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	path = filepath.Join(parent, "needy", "agent.json")
	if b, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(`"default": "capstan"`), []byte(`"required": true`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := sh("capstan run needy --workdir w"); code != exitUsage || !strings.Contains(out, "PARAM_MISSING") || !strings.Contains(out, "(needy/agent.json)") {
		t.Fatalf("missing parameter: exit %d\n%s", code, out)
	}
	// An MCP server that cannot start names its entry in agent.json, in
	// mcp list and in a run.
	if err := os.WriteFile(path, bytes.Replace(b, []byte(`"runner": {`), []byte(`"runner": {"mcpServers": {"srv": {"command": "no-such-mcp-server"}},`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"capstan mcp list needy", "capstan run needy --workdir w"} {
		if code, out := sh(line); code != exitInternal || !strings.Contains(out, "(needy/agent.json#/runner/mcpServers/srv)") {
			t.Fatalf("%s: exit %d\n%s", line, code, out)
		}
	}
}

// An agent that closes its issue through capstan, run in a work dir with no
// GitHub remote, fails before the model runs with a hint that works: for an
// agent without a repository parameter it says how to declare one (its
// flag is otherwise an unknown flag), then the flag to pass, which, pasted,
// completes the run.
func TestNoGitHubRemoteHintWorks(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	if code, out := sh("capstan init closer && mkdir fakebin w && git -C w init -q"); code != 0 {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(parent, "fakebin", "gh"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(parent, "closer", "agent.json")
	edit := func(f func(map[string]any)) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var def map[string]any
		if err := json.Unmarshal(b, &def); err != nil {
			t.Fatal(err)
		}
		f(def)
		if b, err = json.MarshalIndent(def, "", "  "); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit(func(def map[string]any) {
		def["parameters"].(map[string]any)["issue"] = map[string]any{"type": "number", "required": true}
		def["runner"].(map[string]any)["integrations"] = map[string]any{"github": map[string]any{"enabled": true, "defaultClosureAction": "close"}}
	})
	run := `unset GH_REPO GH_HOST; PATH="$PWD/fakebin:$PATH" capstan run closer --workdir w --issue 7`
	code, out := sh(run)
	if code == 0 || !strings.Contains(out, "has no GitHub remote") || !strings.Contains(out, `declare a "repository" parameter (type string) in agent.json and pass --repository OWNER/NAME`) {
		t.Fatalf("no remote, no repository parameter: exit %d\n%s", code, out)
	}
	edit(func(def map[string]any) {
		def["parameters"].(map[string]any)["repository"] = map[string]any{"type": "string"}
	})
	code, out = sh(run)
	if code == 0 || !strings.Contains(out, "hint: pass --repository OWNER/NAME,") {
		t.Fatalf("no remote, a repository parameter: exit %d\n%s", code, out)
	}
	if code, out := sh(run + " --repository octo/app"); code != 0 {
		t.Fatalf("with the flag the hint names: exit %d\n%s", code, out)
	}
}

// `capstan report -o FILE` into a folder that does not exist is a usage
// error before anything is written, whose hint, pasted (mkdir and the
// same command), writes the report; a folder given as FILE is refused too.
func TestReportOutputDirHintWorks(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	hello, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	code, out := sh("mkdir w && capstan run " + shellQuote(hello) + " --workdir w -q --json")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	var res struct{ RunID string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	report := "capstan report " + res.RunID + " -o 'out dir/r.html'"
	code, out = sh(report)
	if code != exitUsage || !strings.Contains(out, "does not exist") || strings.Contains(out, ".r.html.") {
		t.Fatalf("report into a missing folder: exit %d, want %d\n%s", code, exitUsage, out)
	}
	fix := pastedCommand(t, out, "create the directory first: ")
	if code, out := sh(fix); code != 0 || !strings.Contains(out, "wrote out dir/r.html") {
		t.Fatalf("%s: exit %d\n%s", fix, code, out)
	}
	if code, out := sh("capstan report " + res.RunID + " -o w"); code != exitUsage || !strings.Contains(out, "is a directory") {
		t.Fatalf("report onto a folder: exit %d\n%s", code, out)
	}
}
