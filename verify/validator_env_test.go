package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
)

// TestValidatorEnvironmentPolicy: a validator command gets the minimal
// base plus the allow-list, never capstan's whole environment, and a
// secret passed on purpose is redacted in the output the journal and the
// retry prompt see.
func TestValidatorEnvironmentPolicy(t *testing.T) {
	t.Setenv("VALIDATOR_TEST_TOKEN", "vt-0123456789-secret")
	t.Setenv("VALIDATOR_UNLISTED", "not-for-validators")
	v := newValidator(t, ValidatorConfig{
		Validators: map[string]agentdir.Validator{
			"env": {Type: "command", Command: "env; exit 1", SuccessWhen: "exitCode:0", FailurePattern: "env-failed"},
		},
		Patterns: map[string]agentdir.CompletionPattern{"env-failed": {Edition: "failed"}},
		WorkDir:  t.TempDir(),
		Env:      []string{"VALIDATOR_TEST_TOKEN"},
	})
	r, err := v.Validate(context.Background(), []agentdir.CompletionCondition{{Validator: "env"}})
	if err != nil || r.Valid || r.Output == nil {
		t.Fatalf("%+v %v", r, err)
	}
	out := r.Output.Stdout
	if strings.Contains(out, "vt-0123456789-secret") || !strings.Contains(out, "VALIDATOR_TEST_TOKEN=[REDACTED]") {
		t.Errorf("secret not redacted:\n%s", out)
	}
	if strings.Contains(out, "VALIDATOR_UNLISTED") || !strings.Contains(out, "PATH=") {
		t.Errorf("environment is not the base plus the allow-list:\n%s", out)
	}
}

// TestValidatorFindsProgramsOutsideTheWorkDir: the user's PATH lists a
// folder of the work dir (as direnv's PATH_add node_modules/.bin does) and
// a relative entry; a runner wrapper the model writes there is not what
// the validator's command starts — the one outside the work dir is.
func TestValidatorFindsProgramsOutsideTheWorkDir(t *testing.T) {
	wd, outside := t.TempDir(), t.TempDir()
	for dir, says := range map[string]string{filepath.Join(wd, "node_modules", ".bin"): "wrapper", wd: "relative", outside: "real"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "runner-tool"), []byte("#!/bin/sh\necho "+says+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", strings.Join([]string{filepath.Join(wd, "node_modules", ".bin"), ".", outside, os.Getenv("PATH")}, string(filepath.ListSeparator)))
	out, err := RunCommand(context.Background(), CommandSpec{Command: "runner-tool", Dir: wd})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.Stdout); got != "real" {
		t.Fatalf("the validator ran the %s runner-tool (want the one outside the work dir): %q %q", got, out.Stdout, out.Stderr)
	}
	// A program found only there is "not found", with a note that says why
	// and how to start it.
	if err := os.WriteFile(filepath.Join(wd, "node_modules", ".bin", "only-here"), []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = RunCommand(context.Background(), CommandSpec{Command: "only-here", Dir: wd})
	if err != nil || out.ExitCode != 127 || !strings.Contains(out.Stderr, "validators do not search the PATH entries inside the work dir") ||
		!strings.Contains(out.Stderr, filepath.Join(wd, "node_modules", ".bin")) {
		t.Fatalf("no note for a program found only in the work dir: %+v %v", out, err)
	}
	// Control: the same PATH as it is finds the wrapper first.
	cmd := exec.Command("sh", "-c", "runner-tool")
	cmd.Dir = wd
	if b, _ := cmd.Output(); strings.TrimSpace(string(b)) != "wrapper" {
		t.Fatalf("the wrapper is not first on the PATH, so the case proves nothing: %q", b)
	}
}
