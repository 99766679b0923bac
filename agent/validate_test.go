package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
)

// crossLayerAgent has a step prompt, a declared pattern and a schema
// reference, each of which a test breaks.
func crossLayerAgent(t *testing.T) string {
	return writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "x", "description": "x",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "DONE"}}}`,
		"steps_registry.json": `{"agentId": "x", "entryStep": "s",
  "completionPatterns": {"custom-failed": {"edition": "failed", "adaptation": "custom-failed"}},
  "validators": {"v": {"type": "command", "command": "true", "failurePattern": "custom-failed"}},
  "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main",
    "outputSchemaRef": {"file": "out.schema.json", "schema": "result"},
    "completionConditions": [{"validator": "v"}]}}}`,
		"prompts/steps/work/main/f_default.md":              "Do it.",
		"prompts/steps/work/main/f_failed_custom-failed.md": "It failed: {{stdout}}",
		"schemas/out.schema.json":                           `{"result": {"type": "object", "properties": {"ok": {"$ref": "#/$defs/flag"}}}, "$defs": {"flag": {"type": "boolean"}}}`,
		"script.yaml":                                       "turns:\n  - text: DONE\n",
	})
}

func codes(res agentdir.ValidationResult) string {
	var out []string
	for _, p := range res.Errors() {
		out = append(out, p.Code+"@"+p.Pointer)
	}
	return strings.Join(out, " ")
}

func TestCrossLayerChecks(t *testing.T) {
	if res := agentdir.Check(crossLayerAgent(t), ValidateOptions()); !res.Valid() {
		t.Fatalf("valid agent reported: %v", res.Problems())
	}
	cases := map[string]struct {
		breakIt func(dir string)
		want    string
	}{
		"step prompt missing": {func(d string) { os.Remove(filepath.Join(d, "prompts/steps/work/main/f_default.md")) },
			CodeStepPromptMissing + "@/steps/s"},
		"step prompt with broken frontmatter": {func(d string) {
			os.WriteFile(filepath.Join(d, "prompts/steps/work/main/f_default.md"), []byte("---\nstepId: [\n---\nbody"), 0o644)
		}, CodeStepPromptInvalid + "@/steps/s"},
		"retry prompt for a declared pattern missing": {func(d string) {
			os.Remove(filepath.Join(d, "prompts/steps/work/main/f_failed_custom-failed.md"))
		}, CodeRetryPromptMissing + "@/steps/s/completionConditions/0"},
		"schema reference dangling": {func(d string) {
			os.WriteFile(filepath.Join(d, "schemas/out.schema.json"), []byte(`{"result": {"$ref": "#/$defs/nope"}}`), 0o644)
		}, CodeSchemaUnresolved + "@/steps/s/outputSchemaRef"},
		"schema name unknown": {func(d string) {
			os.WriteFile(filepath.Join(d, "schemas/out.schema.json"), []byte(`{"other": {"type": "object"}}`), 0o644)
		}, CodeSchemaUnresolved + "@/steps/s/outputSchemaRef"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := crossLayerAgent(t)
			c.breakIt(dir)
			res := agentdir.Check(dir, ValidateOptions())
			if got := codes(res); !strings.Contains(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			for _, p := range res.Errors() {
				if p.File != "steps_registry.json" || p.Line == 0 || p.Hint == "" {
					t.Fatalf("problem without location or hint: %+v", p)
				}
			}
			// The same problems stop a run before any model call.
			if _, err := agentdir.LoadAndValidate(dir, ValidateOptions()); err == nil || !strings.Contains(err.Error(), strings.SplitN(c.want, "@", 2)[0]) {
				t.Fatalf("LoadAndValidate: %v", err)
			}
		})
	}
}
