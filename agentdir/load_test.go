package agentdir

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

func TestLoadMissingAgentJSON(t *testing.T) {
	dir := writeAgent(t, nil, baseRegistry(), nil)
	_, _, err := Load(dir)
	if !errors.Is(err, agenterr.ErrConfigurationNotFound) {
		t.Fatalf("want CONFIG_NOT_FOUND, got %v", err)
	}
	e := agenterr.From(err)
	if e.File != "agent.json" || !strings.Contains(e.Hint, "capstan init") || e.Layer != agenterr.LayerConfiguration {
		t.Fatalf("error lacks file/hint: %+v", e)
	}
	if _, _, err := Load(filepath.Join(dir, "nope")); !errors.Is(err, agenterr.ErrConfigurationNotFound) {
		t.Fatalf("missing dir: %v", err)
	}
}

func TestLoadMissingRegistry(t *testing.T) {
	dir := writeAgent(t, baseAgent(), nil, nil)
	_, _, err := Load(dir)
	e := agenterr.From(err)
	if !errors.Is(err, agenterr.ErrConfigurationNotFound) || e.File != "steps_registry.json" {
		t.Fatalf("want CONFIG_NOT_FOUND for the registry, got %v", err)
	}
	a := baseAgent()
	at(a, "runner")["prompts"] = map[string]any{"registry": "flows/reg.json"}
	dir = writeAgent(t, a, nil, map[string]string{})
	_, _, err = Load(dir)
	if e := agenterr.From(err); e == nil || e.File != "flows/reg.json" {
		t.Fatalf("custom registry path not used: %v", err)
	}
}

func TestLoadParseErrorPositions(t *testing.T) {
	cases := []struct {
		name      string
		agent     string
		registry  string
		file      string
		line, col int
	}{
		{"missing comma", "{\n  \"version\": \"1.0.0\"\n  \"name\": \"x\"\n}", "{}", "agent.json", 3, 3},
		{"trailing comma", "{\n  \"name\": \"x\",\n}", "{}", "agent.json", 3, 1},
		{"unterminated", "{\"name\": \"x", "{}", "agent.json", 1, 12},
		{"empty file", "", "{}", "agent.json", 1, 1},
		{"comment", "{\n  // no comments in JSON\n}", "{}", "agent.json", 2, 3},
		{"registry garbage", `{"version":"1.0.0","name":"x","runner":{"completion":{"type":"stepFlow"}}}`, "{\n\n   \"steps\": [1,,2]}", "steps_registry.json", 3, 16},
		{"utf8 columns count characters", "{\"description\": \"日本語\" x}", "{}", "agent.json", 1, 23},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeAgent(t, tc.agent, tc.registry, nil)
			_, _, err := Load(dir)
			if !errors.Is(err, agenterr.ErrConfigurationParse) {
				t.Fatalf("want CONFIG_PARSE, got %v", err)
			}
			e := agenterr.From(err)
			if e.File != tc.file || e.Line != tc.line || e.Column != tc.col {
				t.Fatalf("got %s:%d:%d, want %s:%d:%d (%v)", e.File, e.Line, e.Column, tc.file, tc.line, tc.col, err)
			}
			// validate reports the same as a problem.
			p := findProblem(t, Check(dir, testOpts), agenterr.CodeConfigurationParse)
			if p.Line != tc.line || p.Column != tc.col || p.Hint == "" {
				t.Fatalf("problem %+v", p)
			}
		})
	}
}

func TestRegistryPathMustStayInside(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "reg.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../reg.json", "/etc/passwd", "a/../../reg.json", "link/reg.json"} {
		a := baseAgent()
		at(a, "runner")["prompts"] = map[string]any{"registry": p}
		dir := writeAgent(t, a, baseRegistry(), nil)
		if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(dir)
		e := agenterr.From(err)
		if !errors.Is(err, agenterr.ErrConfigurationValidation) || e.Pointer != "/runner/prompts/registry" || e.Line == 0 {
			t.Fatalf("%s: want CONFIG_INVALID at /runner/prompts/registry, got %v", p, err)
		}
	}
}

func TestLoadRefusesNonRegularFiles(t *testing.T) {
	dir := writeAgent(t, nil, baseRegistry(), nil)
	if err := os.Mkdir(filepath.Join(dir, AgentFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(dir); !errors.Is(err, agenterr.ErrConfigurationParse) {
		t.Fatalf("agent.json directory: %v", err)
	}
}

func TestSymlinkEscapeOfPromptFiles(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "system.md"), []byte("x"), 0o644)
	a := baseAgent()
	at(a, "runner")["systemPromptPath"] = "ext/system.md"
	dir := writeAgent(t, a, baseRegistry(), nil)
	if err := os.Symlink(outside, filepath.Join(dir, "ext")); err != nil {
		t.Fatal(err)
	}
	p := findProblem(t, Check(dir, testOpts), "AC-PATH-OUTSIDE")
	if p.Pointer != "/runner/systemPromptPath" || !strings.Contains(p.Message, "symbolic link") {
		t.Fatalf("got %s", p)
	}
}

func TestLoadAcceptsByteOrderMark(t *testing.T) {
	dir := writeAgent(t, nil, baseRegistry(), nil)
	b, _ := json.Marshal(baseAgent())
	os.WriteFile(filepath.Join(dir, AgentFile), append([]byte("\xef\xbb\xbf"), b...), 0o644)
	if r := Check(dir, testOpts); !r.Valid() {
		t.Fatalf("BOM rejected:\n%s", dump(r))
	}
}

func TestLoadRefusesHugeFiles(t *testing.T) {
	dir := writeAgent(t, nil, baseRegistry(), nil)
	f, _ := os.Create(filepath.Join(dir, AgentFile))
	f.Truncate(maxFileSize + 1)
	f.Close()
	_, _, err := Load(dir)
	if !errors.Is(err, agenterr.ErrConfigurationParse) || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("huge file: %v", err)
	}
}

// Hostile nesting neither panics nor exhausts the stack.
func TestDeepNesting(t *testing.T) {
	deep := `{"version":"1.0.0","name":"demo","runner":{"completion":{"type":"stepFlow","options":{"x":` +
		strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}}}`
	dir := writeAgent(t, deep, baseRegistry(), nil)
	Check(dir, testOpts)
	comp := `{"type":"stepFlow"}`
	for i := 0; i < 200; i++ {
		comp = `{"type":"composite","mode":"all","conditions":[` + comp + `]}`
	}
	dir = writeAgent(t, `{"version":"1.0.0","name":"demo","runner":{"completion":`+comp+`}}`, baseRegistry(), nil)
	for _, p := range Check(dir, testOpts).Errors() {
		if strings.HasPrefix(p.Code, "AC-") {
			t.Fatalf("deep composite: %s", p)
		}
	}
}

// Integers too large for Go's int are schema errors, not silently zero.
func TestHugeIntegersAreRejected(t *testing.T) {
	a := baseAgent()
	at(a, "runner", "budgets")["maxIterations"] = 1e20
	dir := writeAgent(t, a, baseRegistry(), nil)
	p := findProblem(t, Check(dir, testOpts), "AC-SCHEMA-VALUE")
	if p.Pointer != "/runner/budgets/maxIterations" {
		t.Fatalf("got %s", p)
	}
}

// 5.0 is an integer to JSON Schema; it must reach Go as 5, not as 0.
func TestIntegralFloatsDecodeAsIntegers(t *testing.T) {
	a := baseAgent()
	at(a, "runner", "budgets")["maxIterations"] = json.Number("5.0")
	at(a, "runner", "budgets")["timeoutSeconds"] = json.Number("1e2")
	dir := writeAgent(t, a, baseRegistry(), nil)
	ag, err := LoadAndValidate(dir, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if b := ag.Definition().Runner.Budgets; b.MaxIterations != 5 || b.TimeoutSeconds != 100 {
		t.Fatalf("budgets %+v", b)
	}
	at(a, "runner", "budgets")["maxIterations"] = json.Number("5.5")
	dir = writeAgent(t, a, baseRegistry(), nil)
	findProblem(t, Check(dir, testOpts), "AC-SCHEMA-TYPE")
}
