package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/verify"
)

func TestInitScaffold(t *testing.T) {
	parent := t.TempDir()
	code, out, stderr := captureConfigCLI(t, "init", "hello-agent", "--dir", parent)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	dir := filepath.Join(parent, "hello-agent")
	if !strings.Contains(out, "created "+dir) {
		t.Errorf("output: %s", out)
	}
	for _, f := range []string{"agent.json", "steps_registry.json", "prompts/system.md",
		"prompts/steps/initial/main/f_default.md", "prompts/steps/initial/main/f_failed_file-missing.md", "script.yaml", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	// The scaffold passes validation with no warnings, and its step prompt
	// uses the parameter it declares.
	res := agentdir.Check(dir, agent.ValidateOptions())
	if len(res.Problems()) != 0 {
		t.Fatalf("scaffold has problems: %v", res.Problems())
	}
	ag, err := agentdir.LoadAndValidate(dir, agentdir.ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ag.Definition().Name != "hello-agent" || ag.Registry().AgentID != "hello-agent" {
		t.Errorf("name not substituted")
	}
	// Tests in the work dir are protected from the model.
	if p := ag.Definition().Runner.Verification.Protect; !slices.Contains(p, "**/*_test.go") || !slices.Contains(p, "**/test_*.py") {
		t.Errorf("scaffold protects %v", p)
	}
	prompt, _ := os.ReadFile(filepath.Join(dir, "prompts/steps/initial/main/f_default.md"))
	vars, err := ag.ResolveParams(nil)
	if err != nil || vars["topic"] == "" || !strings.Contains(string(prompt), "{uv-topic}") {
		t.Errorf("prompt/parameter mismatch: %v %v", vars, err)
	}
	script, _ := os.ReadFile(filepath.Join(dir, "script.yaml"))
	for _, want := range []string{"name: Write", "file_path: hello.txt", "TASK_COMPLETE"} {
		if !strings.Contains(string(script), want) {
			t.Errorf("script.yaml lacks %q", want)
		}
	}
	// No temporary folder is left behind.
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Errorf("parent holds %d entries, want only the agent folder", len(entries))
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("folder mode %v", fi.Mode().Perm())
	}
}

func TestInitRefusesToOverwrite(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "taken")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644)
	code, _, stderr := captureConfigCLI(t, "init", "taken", "--dir", parent)
	if code != 2 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "keep.txt")); string(b) != "mine" {
		t.Fatal("existing folder was touched")
	}
	if _, err := os.Stat(filepath.Join(dir, "agent.json")); err == nil {
		t.Fatal("init wrote into an existing folder")
	}
	// An empty existing folder, a file and a symlink of that name are refused too.
	os.Mkdir(filepath.Join(parent, "empty"), 0o755)
	os.WriteFile(filepath.Join(parent, "file"), nil, 0o644)
	os.Symlink(t.TempDir(), filepath.Join(parent, "link"))
	for _, name := range []string{"empty", "file", "link"} {
		if code, _, _ := captureConfigCLI(t, "init", name, "--dir", parent); code != 2 {
			t.Errorf("%s: exit %d, want 2", name, code)
		}
	}
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".init-") {
			t.Errorf("temporary folder left behind: %s", e.Name())
		}
	}
}

func TestInitRejectsBadNames(t *testing.T) {
	parent := t.TempDir()
	for _, name := range []string{"../escape", "Upper", "a/b", "", "-flag", "1abc", ".hidden", strings.Repeat("a", 65), "x\"y", "a b"} {
		code, _, _ := captureConfigCLI(t, "init", name, "--dir", parent)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", name, code)
		}
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("bad names wrote %d entries", len(entries))
	}
	if code, _, _ := captureConfigCLI(t, "init", "ok", "--dir", filepath.Join(parent, "missing")); code != 2 {
		t.Fatalf("missing --dir: exit %d", code)
	}
}

// A failure while writing leaves nothing behind: a read-only parent makes
// MkdirTemp fail before anything is created.
func TestInitReadOnlyParent(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	parent := t.TempDir()
	os.Chmod(parent, 0o555)
	defer os.Chmod(parent, 0o755)
	if code, _, _ := captureConfigCLI(t, "init", "demo", "--dir", parent); code != 3 {
		t.Fatalf("exit %d, want 3 (file system failure)", code)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("left %d entries behind", len(entries))
	}
}

// capstanOnPath puts a `capstan` command on PATH that is this test binary
// acting as the CLI, so printed commands can be run exactly as printed.
func capstanOnPath(t *testing.T) []string {
	t.Helper()
	bin := t.TempDir()
	shim := "#!/bin/sh\nCAPSTAN_TEST_CLI=1 exec " + verify.ShellQuote(os.Args[0]) + " -test.run='^$' -- \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "capstan"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestInitNextCommandsWork runs the scaffold's printed next: commands as
// printed, then the liar and the honest scripts: completion is verified.
func TestInitNextCommandsWork(t *testing.T) {
	env := capstanOnPath(t)
	parent := t.TempDir()
	sh := func(line string) (int, string) {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = parent, env
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	code, out := sh("capstan init liar")
	if code != 0 {
		t.Fatalf("init: exit %d: %s", code, out)
	}
	_, next, ok := strings.Cut(out, "next:\n")
	if !ok {
		t.Fatalf("no next: in %s", out)
	}
	lines := strings.Split(strings.TrimSpace(next), "\n")
	if len(lines) != 2 {
		t.Fatalf("next commands: %q", lines)
	}
	for _, line := range lines {
		if code, out := sh(strings.TrimSpace(line)); code != 0 {
			t.Fatalf("%s: exit %d\n%s", line, code, out)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "liar-work", "hello.txt")); err != nil {
		t.Fatalf("the scripted run did not write hello.txt: %v", err)
	}

	// A model that only says it is done does not complete: the commands
	// exactly as a new user types them.
	code, out = sh(`printf 'turns:\n  - text: "TASK_COMPLETE"\n' > liar/script.yaml`)
	if code != 0 {
		t.Fatalf("printf: exit %d: %s", code, out)
	}
	code, out = sh(`capstan run liar --workdir "$(mktemp -d)"`)
	if code != exitNotCompleted || !strings.Contains(out, "NOT COMPLETED  validation_exhausted") ||
		!strings.Contains(out, "attempt 1 of 3") {
		t.Fatalf("liar: exit %d\n%s", code, out)
	}
	code, out = sh(`capstan run liar --json --workdir "$(mktemp -d)"`)
	if code != exitNotCompleted || !strings.Contains(out, `"completionReason": "validation_exhausted"`) || !strings.Contains(out, `"success": false`) ||
		!strings.Contains(out, `"code": "VALIDATION_EXHAUSTED"`) {
		t.Fatalf("liar --json: exit %d\n%s", code, out)
	}
	// A liar with replies to spare uses every attempt, then ends the same way.
	liar3 := "turns:\n" + strings.Repeat("  - text: \"TASK_COMPLETE\"\n", 5)
	if err := os.WriteFile(filepath.Join(parent, "liar", "script.yaml"), []byte(liar3), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = sh(`capstan run liar --workdir "$(mktemp -d)"`)
	if code != exitNotCompleted || !strings.Contains(out, "NOT COMPLETED  validation_exhausted") || !strings.Contains(out, "after 3 attempts") {
		t.Fatalf("liar with 5 replies: exit %d\n%s", code, out)
	}
}
