package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scaffold creates the `capstan init` agent and returns its folder.
func scaffold(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	if code, _, stderr := captureConfigCLI(t, "init", "demo", "--dir", parent); code != 0 {
		t.Fatalf("init exit %d: %s", code, stderr)
	}
	return filepath.Join(parent, "demo")
}

// TestValidateChecksScriptAndRetrySyntax: validate parses the model's
// script.yaml and the retry templates, which used to fail only in run.
func TestValidateChecksScriptAndRetrySyntax(t *testing.T) {
	dir := scaffold(t)
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("turns:\n  - text: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	retry := filepath.Join(dir, "prompts", "steps", "initial", "main", "f_failed_file-missing.md")
	if err := os.WriteFile(retry, []byte("Write it. {{#if missing}}unclosed block\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := captureConfigCLI(t, "validate", dir)
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out)
	}
	for _, want := range []string{"AG-MODEL-SCRIPT-INVALID", "script script.yaml", "SR-RETRY-PROMPT-INVALID", "f_failed_file-missing.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestValidateRejectsInvalidUTF8: a Latin-1 byte in agent.json is a coded
// error with its position, not silently replaced.
func TestValidateRejectsInvalidUTF8(t *testing.T) {
	dir := scaffold(t)
	p := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(p)
	bad := strings.Replace(string(b), `"description": "`, "\"description\": \"caf\xe9 ", 1)
	if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := captureConfigCLI(t, "validate", dir)
	if code != 2 || !strings.Contains(out+errOut, "CONFIG_PARSE") || !strings.Contains(out+errOut, "not valid UTF-8") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
}

// TestValidateWarnsOfUVPlaceholdersInRetryPrompts: a retry prompt is a
// Handlebars template, so a {uv-name} placeholder in it (the spelling of
// step prompts) would reach the model as written; validate (and so run)
// says so, naming the prompt from the agent folder and the spelling to use.
func TestValidateWarnsOfUVPlaceholdersInRetryPrompts(t *testing.T) {
	dir := scaffold(t)
	retry := filepath.Join(dir, "prompts", "steps", "initial", "main", "f_failed_file-missing.md")
	if err := os.WriteFile(retry, []byte("Check {uv-pattern} failed for {uv-topic}. Write hello.txt.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := captureConfigCLI(t, "validate", dir)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (a warning):\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"warning SR-RETRY-PROMPT-UV", "retry prompt prompts/steps/initial/main/f_failed_file-missing.md",
		"{uv-pattern}, {uv-topic}", "write {{pattern}} instead", "topic is not a param of this failure"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	_, line, _ := strings.Cut(out, "SR-RETRY-PROMPT-UV")
	if line, _, _ = strings.Cut(line, "\n"); strings.Contains(line, filepath.Dir(dir)) {
		t.Errorf("the warning names a machine path:\n%s", line)
	}
	if err := os.WriteFile(retry, []byte("Check {{pattern}} failed. Write hello.txt.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := captureConfigCLI(t, "validate", dir); strings.Contains(out, "SR-RETRY-PROMPT-UV") {
		t.Errorf("warned of a Handlebars retry prompt:\n%s", out)
	}
}
