package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/spf13/pflag"
)

// Flags may come before DIR: a parameter flag's value is not taken for
// the agent folder.
func TestRunFlagsBeforeDir(t *testing.T) {
	// The example runs with any name; the journaled prompt shows the
	// parameter reached it.
	code, out, errOut := captureConfigCLI(t, "run", "--name", "bob", "--workdir", t.TempDir(), "--json", "-q", "../../examples/hello")
	var res struct{ Journal string }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(res.Journal); err != nil || !strings.Contains(string(b), "Hello, bob!") {
		t.Fatalf("journal %s lacks the prompt with the name (%v)", res.Journal, err)
	}
	dir, rest := agentDirArg([]string{"--name", "bob", "../../examples/hello", "--stream"})
	if dir != "../../examples/hello" || strings.Join(rest, " ") != "--name bob --stream" {
		t.Fatalf("agentDirArg = %q %q", dir, rest)
	}
}

// `capstan run --help` lists capstan's own flags without DIR; with DIR it
// adds the agent's parameter flags.
func TestRunHelpListsCommonFlags(t *testing.T) {
	code, out, _ := captureConfigCLI(t, "run", "--help")
	for _, want := range []string{"--model", "--workdir", "--json", "--stream", "-q, --quiet", "--max-iterations", "--base-url", "CAPSTAN_MODEL"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("run --help lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = captureConfigCLI(t, "run", "../../examples/hello", "--help")
	if code != 0 || !strings.Contains(out, "--name string") || !strings.Contains(out, "Who to greet") || !strings.Contains(out, "--workdir") {
		t.Fatalf("run DIR --help:\n%s", out)
	}
}

// Shell completion offers the agent's parameter flags once DIR is known,
// and run IDs for show, report and resume.
func TestCompletion(t *testing.T) {
	code, out, _ := captureConfigCLI(t, "__complete", "run", "../../examples/hello", "--")
	if code != 0 || !strings.Contains(out, "--name\tWho to greet") || !strings.Contains(out, "--workdir\t") {
		t.Fatalf("run flag completion:\n%s", out)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "--") && seen[line] {
			t.Errorf("run flag completion offers %q twice", line)
		}
		seen[line] = true
	}
	wd := t.TempDir()
	code, out, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", wd, "-q", "--json")
	var res struct{ RunID string }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.RunID == "" {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, cmd := range []string{"show", "report", "resume"} {
		code, out, _ = captureConfigCLI(t, "__complete", cmd, "--workdir", wd, "")
		if code != 0 || !strings.Contains(out, res.RunID) {
			t.Fatalf("%s completion:\n%s", cmd, out)
		}
	}
}

// The work dir is printed before the run; -q prints no summary block.
func TestRunAnnouncesWorkDirAndQuietIsQuiet(t *testing.T) {
	wd := t.TempDir()
	code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", wd, "--stream=false")
	abs, _ := filepath.Abs(wd)
	if code != 0 || !strings.HasPrefix(errOut, "work dir "+abs+"\n") || !strings.Contains(errOut, "COMPLETED") {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	code, out, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q")
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("-q printed (exit %d):\nstdout %q\nstderr %q", code, out, errOut)
	}
}

// An agent whose validators run git refuses a work dir that is not a git
// repository, and the hint it prints works.
func TestGitValidatorsNeedAGitWorkDir(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	wd := t.TempDir()
	code, _, errOut := captureConfigCLI(t, "run", "../../examples/fix-failing-test", "--workdir", wd, "-q")
	if code != exitUsage || !strings.Contains(errOut, "is not a git repository, but the agent's validator(s) git-clean run git there") {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	_, hint, ok := strings.Cut(errOut, "git -C ")
	if !ok {
		t.Fatalf("no hint:\n%s", errOut)
	}
	hint = strings.TrimSpace(strings.SplitN(hint, "\n", 2)[0])
	if out, err := exec.Command("sh", "-c", "git -C "+hint).CombinedOutput(); err != nil {
		t.Fatalf("hint %q: %v\n%s", hint, err, out)
	}
	if err := checkGitWorkDir(t.Context(), mustLoad(t, "../../examples/fix-failing-test"), wd); err != nil {
		t.Fatalf("after the hint: %v", err)
	}
}

// CAPSTAN_MODEL picks the model when --model is not given.
func TestRunReadsCapstanModel(t *testing.T) {
	t.Setenv("CAPSTAN_MODEL", "script:no-such-script.yaml")
	code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q")
	if code == 0 || !strings.Contains(errOut, "no-such-script.yaml") {
		t.Fatalf("exit %d, CAPSTAN_MODEL not used:\n%s", code, errOut)
	}
	code, _, errOut = captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "-q", "--model", "script:script.yaml")
	if code != 0 {
		t.Fatalf("--model does not win over CAPSTAN_MODEL (exit %d):\n%s", code, errOut)
	}
}

func mustLoad(t *testing.T, dir string) *agentdir.Agent {
	t.Helper()
	def, err := agentdir.LoadAndValidate(dir, agent.ValidateOptions())
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// The "continue with:" line of a run that used its iteration budget works
// when pasted: it raises the budget, so the resumed run goes on.
func TestContinueWithRaisesIterationBudget(t *testing.T) {
	wd := t.TempDir()
	code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", wd, "--max-iterations", "1")
	if code != exitNotCompleted {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	_, line, ok := strings.Cut(errOut, "continue with: capstan ")
	if !ok {
		t.Fatalf("no continue line:\n%s", errOut)
	}
	line, _, _ = strings.Cut(line, "\n")
	args := strings.Fields(line)
	if !strings.HasSuffix(line, "--max-iterations 2") {
		t.Fatalf("continue line %q does not raise the budget", line)
	}
	code, out, errOut := captureConfigCLI(t, append(args, "--json")...)
	if code != 0 || !strings.Contains(out, `"completionReason": "completed"`) {
		t.Fatalf("pasted %q: exit %d\n%s\n%s", line, code, out, errOut)
	}
}

// Every flag of run that takes a value takes the next word as that value
// when DIR is looked for, whichever flag it is (the set is read from run's
// own flags, so a flag added later is covered), and a bool flag does not.
func TestRunValueFlagsSkipTheirValue(t *testing.T) {
	hello := "../../examples/hello"
	runOwnFlags().VisitAll(func(f *pflag.Flag) {
		dir, _ := agentDirArg([]string{"--" + f.Name, "some-value", hello})
		takesValue := f.NoOptDefVal == ""
		if takesValue && dir != hello {
			t.Errorf("--%s some-value %s: DIR = %q", f.Name, hello, dir)
		}
		if !takesValue && isValueFlag("--"+f.Name) {
			t.Errorf("--%s takes no value but is read as taking one", f.Name)
		}
	})
	if dir, _ := agentDirArg([]string{"-q", hello}); dir != hello {
		t.Errorf("-q %s: DIR = %q", hello, dir)
	}
}

// A mistyped flag of run before a word that is no agent folder is named
// with the flag meant, not reported as a missing folder named after the
// flag's value; pasted with the suggestion, the command runs.
func TestRunMistypedFlagBeforeDir(t *testing.T) {
	wd := t.TempDir()
	// With an agent folder among the words, the agent's flags are known,
	// and --modle is reported as unknown for it.
	code, _, errOut := captureConfigCLI(t, "run", "--modle", "script", "../../examples/hello", "--workdir", wd, "-q")
	if code != exitUsage || !strings.Contains(errOut, "unknown flag: --modle; did you mean --model?") {
		t.Fatalf("run --modle script DIR: exit %d: %s", code, errOut)
	}
	// Pasted as suggested, it runs.
	if code, _, errOut = captureConfigCLI(t, "run", "--model", "script", "../../examples/hello", "--workdir", wd, "-q"); code != 0 {
		t.Fatalf("run --model script DIR: exit %d: %s", code, errOut)
	}
	code, _, errOut = captureConfigCLI(t, "run", "--modle", "x")
	if code != exitUsage || !strings.Contains(errOut, "unknown flag: --modle; did you mean --model?") || strings.Contains(errOut, "CONFIG_NOT_FOUND") {
		t.Fatalf("run --modle x: exit %d: %s", code, errOut)
	}
	code, _, errOut = captureConfigCLI(t, "run", "--workdirr", wd, "missing-folder")
	if code != exitUsage || !strings.Contains(errOut, "did you mean --workdir?") {
		t.Fatalf("run --workdirr: exit %d: %s", code, errOut)
	}
	// A parameter-like flag far from every flag of run is left for the
	// folder's error, which names the folder.
	code, _, errOut = captureConfigCLI(t, "run", "--issue", "7", "missing-folder")
	if code != exitUsage || !strings.Contains(errOut, "CONFIG_NOT_FOUND") {
		t.Fatalf("run --issue 7 missing-folder: exit %d: %s", code, errOut)
	}
}
