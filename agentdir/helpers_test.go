package agentdir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// baseAgent returns a valid agent.json as a generic map, for tests to mutate.
func baseAgent() map[string]any {
	return map[string]any{
		"version":     "1.0.0",
		"name":        "demo",
		"description": "test agent",
		"parameters": map[string]any{
			"topic": map[string]any{"type": "string", "required": true, "description": "topic"},
			"count": map[string]any{"type": "number", "default": 3, "validation": map[string]any{"min": 1, "max": 10}},
		},
		"runner": map[string]any{
			"model":            "script:script.yaml",
			"systemPromptPath": "prompts/system.md",
			"completion": map[string]any{
				"type": "keyword", "keyword": "TASK_COMPLETE", "validators": []any{"out-exists"},
			},
			"boundaries":   map[string]any{"allowedTools": []any{"Read", "Write", "Bash(git log:*)"}, "permissionMode": "acceptEdits"},
			"budgets":      map[string]any{"maxIterations": 5},
			"verification": map[string]any{"protect": []any{"**/*_test.go"}},
		},
	}
}

// baseRegistry returns a valid steps_registry.json as a generic map.
func baseRegistry() map[string]any {
	return map[string]any{
		"agentId":   "demo",
		"entryStep": "initial.main",
		"steps": map[string]any{
			"initial.main": map[string]any{
				"stepId": "initial.main", "c2": "initial", "c3": "main",
				"uvVariables": []any{"topic"},
				"check": map[string]any{
					"type": "keyword", "keywords": []any{"NEXT"},
					"onPass": map[string]any{"next": "review.main"},
					"onFail": map[string]any{"retry": true},
				},
				"retry": map[string]any{"maxRetries": 2, "onExhausted": "fallback", "fallbackStep": "review.main"},
			},
			"review.main": map[string]any{
				"c2": "review", "c3": "main",
				"completionConditions": []any{map[string]any{"validator": "tests-pass"}},
				"onFailure":            map[string]any{"action": "retry", "maxAttempts": 2},
				"outputSchemaRef":      map[string]any{"file": "review.schema.json", "schema": "review"},
				"check": map[string]any{
					"type":    "action",
					"actions": []any{"Bash"},
					"onPass":  map[string]any{"complete": true},
					"onFail":  map[string]any{"escalate": true},
				},
				"escalation": map[string]any{"escalateTo": "initial.main", "notificationMethod": "in_agent", "returnFlow": "resume"},
			},
		},
		"completionPatterns": map[string]any{
			"test-failed":  map[string]any{"edition": "failed", "adaptation": "test-failed", "params": []any{"errorOutput"}},
			"file-missing": map[string]any{"edition": "failed", "adaptation": "file-missing"},
		},
		"validators": map[string]any{
			"tests-pass": map[string]any{
				"type": "command", "command": "go test -v ./...", "successWhen": "exitCode:0",
				"failurePattern": "test-failed", "extractParams": map[string]any{"errorOutput": "stderr"},
			},
			"out-exists": map[string]any{"type": "file", "path": "out.txt", "failurePattern": "file-missing"},
		},
	}
}

// writeAgent writes an agent folder with the given agent.json and registry
// (maps are marshalled with indentation; strings and []byte are written
// verbatim; nil omits the file) plus the prompt, schema and script files
// the base fixtures reference.
func writeAgent(t testing.TB, agent, registry any, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"prompts/system.md":                       "You are a test agent.",
		"prompts/steps/initial/main/f_default.md": "Write about {uv-topic}.",
		"prompts/steps/review/main/f_default.md":  "Review.",
		"schemas/review.schema.json":              `{"review":{"type":"object"}}`,
		"script.yaml":                             "turns:\n  - text: done\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, v any) {
		if v == nil {
			return
		}
		var b []byte
		switch v := v.(type) {
		case string:
			b = []byte(v)
		case []byte:
			b = v
		default:
			var err error
			b, err = json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		sameFailures(t, name, b) // every fixture also holds the two schema engines to one verdict
	}
	write(AgentFile, agent)
	write(DefaultRegistryFile, registry)
	return dir
}

// at walks a generic JSON map by keys and returns the map at that path.
func at(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

// findProblem returns the first problem with code, or fails.
func findProblem(t *testing.T, r ValidationResult, code string) Problem {
	t.Helper()
	for _, p := range r.Problems() {
		if p.Code == code {
			return p
		}
	}
	t.Fatalf("no problem %s in:\n%s", code, dump(r))
	return Problem{}
}

func dump(r ValidationResult) string {
	s := ""
	for _, p := range r.Problems() {
		s += "  " + p.String() + "\n"
	}
	return s
}
