package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// captureConfigCLI runs execute(args) and returns its exit code, stdout and
// stderr. It swaps os.Stdout/os.Stderr, so tests using it must not run in
// parallel.
func captureConfigCLI(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	oldOut, oldErr := os.Stdout, os.Stderr
	ro, wo, _ := os.Pipe()
	re, we, _ := os.Pipe()
	os.Stdout, os.Stderr = wo, we
	outc, errc := make(chan string), make(chan string)
	go func() { b, _ := io.ReadAll(ro); outc <- string(b) }()
	go func() { b, _ := io.ReadAll(re); errc <- string(b) }()
	code := execute(context.Background(), args)
	wo.Close()
	we.Close()
	os.Stdout, os.Stderr = oldOut, oldErr
	return code, <-outc, <-errc
}

func TestValidateScaffoldIsValid(t *testing.T) {
	parent := t.TempDir()
	if code, _, stderr := captureConfigCLI(t, "init", "demo", "--dir", parent); code != 0 {
		t.Fatalf("init exit %d: %s", code, stderr)
	}
	code, out, _ := captureConfigCLI(t, "validate", filepath.Join(parent, "demo"))
	if code != 0 || !strings.Contains(out, "valid (0 warnings)") {
		t.Fatalf("validate exit %d:\n%s", code, out)
	}
}

func TestValidateReportsProblemsAndExit2(t *testing.T) {
	parent := t.TempDir()
	captureConfigCLI(t, "init", "demo", "--dir", parent)
	dir := filepath.Join(parent, "demo")
	agent := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(agent)
	s := strings.Replace(string(b), `"permissionMode": "acceptEdits"`, `"permissionMode": "accept", "allowedTool": []`, 1)
	os.WriteFile(agent, []byte(s), 0o644)
	reg := filepath.Join(dir, "steps_registry.json")
	b, _ = os.ReadFile(reg)
	os.WriteFile(reg, []byte(strings.Replace(string(b), `"entryStep": "initial.main"`, `"entryStep": "initial.mian"`, 1)), 0o644)

	code, out, _ := captureConfigCLI(t, "validate", dir)
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out)
	}
	for _, want := range []string{
		filepath.Join(dir, "agent.json") + `:28:25: error AC-SCHEMA-ENUM "accept" is not allowed`,
		`(/runner/boundaries/permissionMode) — `,
		filepath.Join(dir, "agent.json") + `:28:35: warning AC-UNKNOWN-KEY unknown key "allowedTool"; did you mean "allowedTools"?`,
		filepath.Join(dir, "steps_registry.json") + `:6:16: error SR-ENTRY-STEP entryStep "initial.mian" is not a step (/entryStep) — set entryStep to one of the step ids (known: initial.main)`,
		dir + ": invalid (2 errors, 1 warning)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = captureConfigCLI(t, "validate", "--json", dir)
	if code != 2 {
		t.Fatalf("--json exit %d", code)
	}
	var res struct {
		Valid    bool
		Errors   []map[string]any
		Warnings []map[string]any
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if res.Valid || len(res.Errors) != 2 || len(res.Warnings) != 1 || res.Errors[0]["line"] != 28.0 {
		t.Fatalf("--json result: %+v", res)
	}
}

func TestValidateWarningsOnlyExit0(t *testing.T) {
	parent := t.TempDir()
	captureConfigCLI(t, "init", "demo", "--dir", parent)
	dir := filepath.Join(parent, "demo")
	agent := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(agent)
	os.WriteFile(agent, []byte(strings.Replace(string(b), `"version"`, `"colour": "blue", "version"`, 1)), 0o644)
	code, out, _ := captureConfigCLI(t, "validate", dir)
	if code != 0 || !strings.Contains(out, "AC-UNKNOWN-KEY") || !strings.Contains(out, "valid (1 warning)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestValidateLoadFailures(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := captureConfigCLI(t, "validate", dir)
	if code != 2 || !strings.Contains(out, "error CONFIG_NOT_FOUND") || !strings.Contains(out, "capstan init") {
		t.Fatalf("missing agent.json: exit %d\n%s", code, out)
	}
	os.WriteFile(filepath.Join(dir, "agent.json"), []byte("{\n  \"name\": \"x\",\n}\n"), 0o644)
	code, out, _ = captureConfigCLI(t, "validate", dir)
	if code != 2 || !strings.Contains(out, filepath.Join(dir, "agent.json")+":3:1: error CONFIG_PARSE") {
		t.Fatalf("broken JSON: exit %d\n%s", code, out)
	}
	code, out, _ = captureConfigCLI(t, "validate", "--json", filepath.Join(dir, "missing"))
	if code != 2 || !strings.Contains(out, `"code": "CONFIG_NOT_FOUND"`) {
		t.Fatalf("missing dir --json: exit %d\n%s", code, out)
	}
	if code, _, _ := captureConfigCLI(t, "validate"); code != 2 {
		t.Fatalf("no DIR: exit %d, want 2", code)
	}
}

// A step's output schema that is not a valid JSON Schema (a typo in a
// keyword's value) is a clear error at validate, naming where it is.
func TestValidateChecksOutputSchemasAgainstTheirDraft(t *testing.T) {
	dir := copyDir(t, filepath.Join("..", "..", "examples", "fix-failing-test"))
	p := filepath.Join(dir, "schemas", "fix.schema.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(b), `"reason": { "type": "string" }`, `"reason": { "type": "strin" }`, 1)
	if broken == string(b) {
		t.Fatal("the example schema changed; update this test")
	}
	if err := os.WriteFile(p, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := captureConfigCLI(t, "validate", dir)
	// The problem is in the $defs the step's schema refers to: it is
	// reported there, at the keyword, with the pointer into the file.
	if code != 2 || !strings.Contains(out, filepath.Join("schemas", "fix.schema.json")+":8:21: error SR-SCHEMA-INVALID step complete.fix:") ||
		!strings.Contains(out, `not a valid JSON Schema (2020-12): value "strin" must be one of`) ||
		!strings.Contains(out, "(/$defs/nextAction/properties/reason/type)") || strings.Contains(out, "SR-SCHEMA-UNRESOLVED") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// capstan run refuses the folder with the same located problem.
	code, out, errOut := captureConfigCLI(t, "run", dir)
	if code == 0 || !strings.Contains(out+errOut, "fix.schema.json:8:21: error SR-SCHEMA-INVALID") {
		t.Fatalf("run: exit %d:\n%s%s", code, out, errOut)
	}
}

// scaffoldWithSteps makes an agent folder with capstan init and returns
// it with a function that rewrites its registry's steps with edit.
func scaffoldWithSteps(t *testing.T) (dir string, editSteps func(edit func(step map[string]any))) {
	t.Helper()
	parent := t.TempDir()
	if code, _, stderr := captureConfigCLI(t, "init", "demo", "--dir", parent); code != 0 {
		t.Fatalf("init exit %d: %s", code, stderr)
	}
	dir = filepath.Join(parent, "demo")
	regPath := filepath.Join(dir, "steps_registry.json")
	orig, err := os.ReadFile(regPath)
	if err != nil {
		t.Fatal(err)
	}
	return dir, func(edit func(step map[string]any)) {
		t.Helper()
		var reg map[string]any
		if err := json.Unmarshal(orig, &reg); err != nil {
			t.Fatal(err)
		}
		for _, st := range reg["steps"].(map[string]any) {
			edit(st.(map[string]any))
		}
		b, err := json.MarshalIndent(reg, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(regPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A step without c2 is one problem, said once: SR-STEP-PROMPT, not also
// its prompt file and the retry prompt of its validator's pattern, which
// without c2 cannot be named either. A step whose c2 cannot be a path
// segment is told with the c1 its prompt is looked up under.
func TestValidateSaysAStepWithoutC2Once(t *testing.T) {
	dir, editSteps := scaffoldWithSteps(t)
	editSteps(func(st map[string]any) { delete(st, "c2") })
	code, out, _ := captureConfigCLI(t, "validate", dir)
	if code != exitUsage || !strings.Contains(out, "invalid (1 error, 0 warnings)") || !strings.Contains(out, "error SR-STEP-PROMPT step") {
		t.Fatalf("exit %d, want one SR-STEP-PROMPT:\n%s", code, out)
	}
	editSteps(func(st map[string]any) { st["c2"] = "in/itial" })
	code, out, _ = captureConfigCLI(t, "validate", dir)
	if code != exitUsage || !strings.Contains(out, `SR-STEP-PROMPT-INVALID`) || !strings.Contains(out, `(c1="steps" c2="in/itial"`) {
		t.Fatalf("exit %d, want SR-STEP-PROMPT-INVALID naming c1:\n%s", code, out)
	}
}

// A schema file that is not valid JSON (cut short, or with a stray
// character) is reported in that file, at the line and column where its
// syntax breaks, not only at the step that refers to it.
func TestValidateLocatesABrokenSchemaFile(t *testing.T) {
	dir, editSteps := scaffoldWithSteps(t)
	editSteps(func(st map[string]any) {
		st["outputSchemaRef"] = map[string]any{"file": "out.schema.json", "schema": "out"}
	})
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ text, at string }{
		{"{\"$defs\": {\"out\": {\"type\": \"object\",\n  \"properties\": {\"a\": {\"type\": \"strin", ":2:"},
		{"{\"$defs\": {\"out\":\n  {\"type\": \"object\" \"x\"}}}", ":2:"},
	} {
		if err := os.WriteFile(filepath.Join(dir, "schemas", "out.schema.json"), []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, _ := captureConfigCLI(t, "validate", dir)
		want := filepath.Join(dir, "schemas", "out.schema.json") + c.at
		if code != exitUsage || !strings.Contains(out, want) || !strings.Contains(out, "error SR-SCHEMA-UNRESOLVED") || !strings.Contains(out, "— fix the JSON syntax") {
			t.Errorf("exit %d, want the problem at %s…:\n%s", code, want, out)
		}
	}
}

// A prompt base, fallback directory or system prompt path outside the
// agent folder is one problem (AC-PATH-OUTSIDE at its field), not also one
// unusable prompt and one missing retry prompt per step.
func TestValidateSaysAPromptPathOutsideOnce(t *testing.T) {
	dir, _ := scaffoldWithSteps(t)
	orig, err := os.ReadFile(filepath.Join(dir, "agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set     func(runner map[string]any)
		pointer string
	}{
		{func(r map[string]any) { r["systemPromptPath"] = "/etc/passwd" }, "/runner/systemPromptPath"},
		{func(r map[string]any) { r["prompts"].(map[string]any)["base"] = "../elsewhere" }, "/runner/prompts/base"},
		{func(r map[string]any) { r["prompts"].(map[string]any)["fallbackDir"] = "/etc" }, "/runner/prompts/fallbackDir"},
	} {
		var def map[string]any
		if err := json.Unmarshal(orig, &def); err != nil {
			t.Fatal(err)
		}
		c.set(def["runner"].(map[string]any))
		b, _ := json.MarshalIndent(def, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "agent.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, _ := captureConfigCLI(t, "validate", dir)
		if code != exitUsage || !strings.Contains(out, "invalid (1 error, 0 warnings)") || !strings.Contains(out, "error AC-PATH-OUTSIDE") || !strings.Contains(out, "("+c.pointer+")") {
			t.Errorf("exit %d, want one AC-PATH-OUTSIDE at %s:\n%s", code, c.pointer, out)
		}
	}
}

// capstan validate of a folder of Agent Skills (no agent.json) says what
// the folder holds, and the command it prints, run as printed, lists them.
func TestValidateOfASkillsFolderPointsToSkillsList(t *testing.T) {
	for _, dir := range []string{"../../examples/skills", "../../examples/skills/status-report"} {
		code, out, _ := captureConfigCLI(t, "validate", dir)
		cmd, ok := strings.CutPrefix(out[strings.Index(out, "list them with: ")+len("list them with: "):], "capstan ")
		if code != exitUsage || !strings.Contains(out, "CONFIG_NOT_FOUND") || !strings.Contains(out, "holds Agent Skills") || !ok {
			t.Fatalf("%s: exit %d:\n%s", dir, code, out)
		}
		cmd, _, _ = strings.Cut(cmd, "\n")
		code, out, errOut := captureConfigCLI(t, strings.Fields(cmd)...) // the paths need no quotes
		if code != 0 || !strings.Contains(out, "status-report") {
			t.Errorf("the printed %q: exit %d\n%s%s", cmd, code, out, errOut)
		}
	}
}
