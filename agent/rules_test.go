package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
)

// ruleAgent and ruleRegistry are a valid two-step agent (a check with a
// retry policy and a fallback, an escalation, completion conditions, an
// output schema) as generic JSON maps, for tests to break one rule at a
// time.
func ruleAgent() map[string]any {
	return map[string]any{
		"version": "1.0.0", "name": "demo", "description": "test agent",
		"parameters": map[string]any{"topic": map[string]any{"type": "string", "required": true, "description": "topic"}},
		"runner": map[string]any{
			"model":            "script:script.yaml",
			"systemPromptPath": "prompts/system.md",
			"completion":       map[string]any{"type": "keyword", "keyword": "TASK_COMPLETE", "validators": []any{"out-exists"}},
			"boundaries":       map[string]any{"allowedTools": []any{"Read", "Write"}, "permissionMode": "acceptEdits"},
			"budgets":          map[string]any{"maxIterations": 5},
			"verification":     map[string]any{"protect": []any{"**/*_test.go"}},
		},
	}
}

func ruleRegistry() map[string]any {
	return map[string]any{
		"agentId": "demo", "entryStep": "initial.main",
		"steps": map[string]any{
			"initial.main": map[string]any{
				"stepId": "initial.main", "c2": "initial", "c3": "main", "uvVariables": []any{"topic"},
				"check": map[string]any{"type": "keyword", "keywords": []any{"NEXT"},
					"onPass": map[string]any{"next": "review.main"}, "onFail": map[string]any{"retry": true}},
				"retry": map[string]any{"maxRetries": 2, "onExhausted": "fallback", "fallbackStep": "review.main"},
			},
			"review.main": map[string]any{
				"c2": "review", "c3": "main",
				"completionConditions": []any{map[string]any{"validator": "tests-pass"}},
				"onFailure":            map[string]any{"action": "retry", "maxAttempts": 2},
				"outputSchemaRef":      map[string]any{"file": "review.schema.json", "schema": "review"},
				"check": map[string]any{"type": "action", "actions": []any{"Bash"},
					"onPass": map[string]any{"complete": true}, "onFail": map[string]any{"escalate": true}},
				"escalation": map[string]any{"escalateTo": "initial.main", "notificationMethod": "in_agent", "returnFlow": "resume"},
			},
		},
		"completionPatterns": map[string]any{
			"test-failed":  map[string]any{"edition": "failed", "adaptation": "test-failed", "params": []any{"errorOutput"}},
			"file-missing": map[string]any{"edition": "failed", "adaptation": "file-missing"},
		},
		"validators": map[string]any{
			"tests-pass": map[string]any{"type": "command", "command": "go test -v ./...", "successWhen": "exitCode:0",
				"failurePattern": "test-failed", "extractParams": map[string]any{"errorOutput": "stderr"}},
			"out-exists": map[string]any{"type": "file", "path": "out.txt", "failurePattern": "file-missing"},
		},
	}
}

// writeRuleAgent writes an agent folder with agent.json a, registry r and
// the prompt, schema and script files the fixture references.
func writeRuleAgent(t *testing.T, a, r map[string]any) string {
	t.Helper()
	files := map[string]string{
		"prompts/system.md":                                   "You are a test agent.",
		"prompts/steps/initial/main/f_default.md":             "Write about {uv-topic}.",
		"prompts/steps/initial/main/f_failed_file-missing.md": "out.txt is missing.",
		"prompts/steps/review/main/f_default.md":              "Review.",
		"prompts/steps/review/main/f_failed_file-missing.md":  "out.txt is missing.",
		"prompts/steps/review/main/f_failed_test-failed.md":   "Tests fail: {{errorOutput}}",
		"schemas/review.schema.json":                          `{"review":{"type":"object"}}`,
		"script.yaml":                                         "turns:\n  - text: done\n",
	}
	for name, v := range map[string]any{agentdir.AgentFile: a, agentdir.DefaultRegistryFile: r} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	return writeAgent(t, files)
}

// at walks a generic JSON map by keys and returns the map at that path.
func at(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

// TestBuilderRulesAreReportedByValidate: the rules that the builders
// check — verdict.CompletionFromConfig for runner.completion, verdict.NewMachine for
// the step graph — are the rules `capstan validate` reports, once, with
// their problem codes, located, with hints, all at once; the rules live
// only in the builders.
func TestBuilderRulesAreReportedByValidate(t *testing.T) {
	if res := agentdir.Check(writeRuleAgent(t, ruleAgent(), ruleRegistry()), ValidateOptions()); !res.Valid() || len(res.Warnings()) > 0 {
		t.Fatalf("the base fixture is not clean:\n%v", res.Problems())
	}
	cases := []struct {
		name     string
		mutate   func(a, r map[string]any, _ map[string]string)
		code     string
		severity agentdir.Severity
		file     string
		pointer  string
	}{
		{"entry step missing", func(a, r map[string]any, _ map[string]string) { r["entryStep"] = "nope" },
			"SR-ENTRY-STEP", agentdir.SeverityError, "steps_registry.json", "/entryStep"},
		{"transition to missing step", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "initial.main", "check", "onPass")["next"] = "ghost"
		}, "SR-TRANSITION-TARGET", agentdir.SeverityError, "steps_registry.json", "/steps/initial.main/check/onPass/next"},
		{"escalate without escalation", func(a, r map[string]any, _ map[string]string) {
			delete(at(r, "steps", "review.main"), "escalation")
		}, "SR-TRANSITION-ESCALATE", agentdir.SeverityError, "steps_registry.json", "/steps/review.main/check/onFail/escalate"},
		{"fallback without fallbackStep", func(a, r map[string]any, _ map[string]string) {
			delete(at(r, "steps", "initial.main", "retry"), "fallbackStep")
		}, "SR-RETRY-FALLBACK", agentdir.SeverityError, "steps_registry.json", "/steps/initial.main/retry/fallbackStep"},
		{"fallbackStep missing", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "initial.main", "retry")["fallbackStep"] = "ghost"
		}, "SR-RETRY-FALLBACK-TARGET", agentdir.SeverityError, "steps_registry.json", "/steps/initial.main/retry/fallbackStep"},
		{"escalateTo missing", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main", "escalation")["escalateTo"] = "human"
		}, "SR-ESCALATE-TARGET", agentdir.SeverityError, "steps_registry.json", "/steps/review.main/escalation/escalateTo"},
		{"webhook without url", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main", "escalation")["notificationMethod"] = "webhook"
		}, "SR-ESCALATE-WEBHOOK", agentdir.SeverityError, "steps_registry.json", "/steps/review.main/escalation/webhookUrl"},
		{"webhook with file url", func(a, r map[string]any, _ map[string]string) {
			e := at(r, "steps", "review.main", "escalation")
			e["notificationMethod"], e["webhookUrl"] = "webhook", "file:///etc/passwd"
		}, "SR-ESCALATE-WEBHOOK", agentdir.SeverityError, "steps_registry.json", "/steps/review.main/escalation/webhookUrl"},
		{"substep missing", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["subSteps"] = []any{"ghost"}
		}, "SR-SUBSTEP-MISSING", agentdir.SeverityError, "steps_registry.json", "/steps/review.main/subSteps/0"},
		{"parallel substeps", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["sequential"] = false
		}, "SR-SUBSTEP-PARALLEL", agentdir.SeverityError, "steps_registry.json", "/steps/review.main/sequential"},
		{"gateway without check", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps")["route"] = map[string]any{"type": "gateway"}
			at(r, "steps", "initial.main", "check", "onPass")["next"] = "route"
		}, "SR-GATEWAY-CHECK", agentdir.SeverityError, "steps_registry.json", "/steps/route"},
		{"unknown completion validator", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "completion")["validators"] = []any{"ghost"}
		}, "AC-COMPLETION-VALIDATOR", agentdir.SeverityError, "agent.json", "/runner/completion/validators/0"},
		{"iterationBudget without max", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "iterationBudget"}
		}, "AC-COMPLETION-MAX-ITERATIONS", agentdir.SeverityError, "agent.json", "/runner/completion/maxIterations"},
		{"keyword without keyword", func(a, r map[string]any, _ map[string]string) { delete(at(a, "runner", "completion"), "keyword") },
			"AC-COMPLETION-KEYWORD", agentdir.SeverityError, "agent.json", "/runner/completion/keyword"},
		{"composite without mode", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "composite", "conditions": []any{map[string]any{"type": "stepFlow"}}}
		}, "AC-COMPLETION-MODE", agentdir.SeverityError, "agent.json", "/runner/completion/mode"},
		{"composite without conditions", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "composite", "mode": "any"}
		}, "AC-COMPLETION-CONDITIONS", agentdir.SeverityError, "agent.json", "/runner/completion/conditions"},
		{"nested composite checked", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "composite", "mode": "all", "conditions": []any{
				map[string]any{"type": "stepFlow"},
				map[string]any{"type": "composite", "mode": "any", "conditions": []any{map[string]any{"type": "keyword"}}},
			}}
		}, "AC-COMPLETION-KEYWORD", agentdir.SeverityError, "agent.json", "/runner/completion/conditions/1/conditions/0/keyword"},
		{"duplicate condition names", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "composite", "mode": "all", "conditions": []any{
				map[string]any{"type": "stepFlow", "name": "x"},
				map[string]any{"type": "iterationBudget", "maxIterations": 3, "name": "x"},
			}}
		}, "AC-COMPLETION-NAME", agentdir.SeverityError, "agent.json", "/runner/completion/conditions/1/name"},
		{"custom without handler", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "custom"}
		}, "AC-COMPLETION-HANDLER", agentdir.SeverityError, "agent.json", "/runner/completion/handler"},
		// A validator's definition: verify.NewCompletionValidator.
		{"unknown failure pattern", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "out-exists")["failurePattern"] = "ghost"
		}, "SR-PATTERN-UNKNOWN", agentdir.SeverityError, "steps_registry.json", "/validators/out-exists/failurePattern"},
		{"empty failure pattern", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "out-exists")["failurePattern"] = ""
		}, "SR-PATTERN-UNKNOWN", agentdir.SeverityError, "steps_registry.json", "/validators/out-exists/failurePattern"},
		{"unknown extractor", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "tests-pass", "extractParams")["errorOutput"] = "parseMagic"
		}, "SR-EXTRACTOR-UNKNOWN", agentdir.SeverityError, "steps_registry.json", "/validators/tests-pass/extractParams/errorOutput"},
		{"command validator without command", func(a, r map[string]any, _ map[string]string) {
			delete(at(r, "validators", "tests-pass"), "command")
		}, "SR-VALIDATOR-FIELD", agentdir.SeverityError, "steps_registry.json", "/validators/tests-pass/command"},
		{"file validator without path", func(a, r map[string]any, _ map[string]string) {
			delete(at(r, "validators", "out-exists"), "path")
		}, "SR-VALIDATOR-FIELD", agentdir.SeverityError, "steps_registry.json", "/validators/out-exists/path"},
		{"custom validator without handler", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "out-exists")["type"] = "custom"
			delete(at(r, "validators", "out-exists"), "path")
		}, "SR-VALIDATOR-FIELD", agentdir.SeverityError, "steps_registry.json", "/validators/out-exists/handler"},
		{"file validator path escapes", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "out-exists")["path"] = "../../etc/passwd"
		}, "SR-PATH-OUTSIDE", agentdir.SeverityError, "steps_registry.json", "/validators/out-exists/path"},
		{"bad successWhen", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "tests-pass")["successWhen"] = "exitcode=0"
		}, "SR-SUCCESS-WHEN", agentdir.SeverityError, "steps_registry.json", "/validators/tests-pass/successWhen"},
		{"successWhen regexp", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "tests-pass")["successWhen"] = "matches:(unclosed"
		}, "SR-SUCCESS-WHEN", agentdir.SeverityError, "steps_registry.json", "/validators/tests-pass/successWhen"},
		{"path on a command validator", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "tests-pass")["path"] = "out.txt"
		}, "SR-IGNORED-FIELD", agentdir.SeverityError, "steps_registry.json", "/validators/tests-pass/path"},
		{"successWhen on a file validator", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "out-exists")["successWhen"] = "empty"
		}, "SR-IGNORED-FIELD", agentdir.SeverityError, "steps_registry.json", "/validators/out-exists/successWhen"},
		{"validator schema does not resolve", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "out-exists")["schema"] = map[string]any{"file": "review.schema.json", "schema": "nope"}
		}, "SR-SCHEMA-UNRESOLVED", agentdir.SeverityError, "steps_registry.json", "/validators/out-exists/schema"},
		// climpt's spellings: the builder's problem points where the user
		// wrote the value.
		{"climpt composite without operator", func(a, r map[string]any, _ map[string]string) {
			delete(at(a, "runner"), "completion")
			at(a, "runner")["verdict"] = map[string]any{"type": "meta:composite", "config": map[string]any{"conditions": []any{
				map[string]any{"type": "detect:keyword", "config": map[string]any{"verdictKeyword": "DONE"}}}}}
		}, "AC-COMPLETION-MODE", agentdir.SeverityError, "agent.json", "/runner/verdict/config/operator"},
		{"climpt entry mapping to a missing step", func(a, r map[string]any, _ map[string]string) {
			delete(at(a, "runner"), "completion")
			at(a, "runner")["verdict"] = map[string]any{"type": "count:iteration", "config": map[string]any{"maxIterations": 3}}
			delete(r, "entryStep")
			r["entryStepMapping"] = map[string]any{"count:iteration": "ghost"}
		}, "SR-ENTRY-STEP", agentdir.SeverityError, "steps_registry.json", "/entryStepMapping/count:iteration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, r := ruleAgent(), ruleRegistry()
			tc.mutate(a, r, nil)
			dir := writeRuleAgent(t, a, r)
			res := agentdir.Check(dir, ValidateOptions())
			var found []agentdir.Problem
			for _, p := range res.Problems() {
				if p.Code == tc.code {
					found = append(found, p)
				}
				if p.Code == "CONFIG_INVALID" && p.Pointer == tc.pointer {
					t.Errorf("the rule is reported twice, once without its code: %s", p)
				}
			}
			if len(found) != 1 {
				t.Fatalf("want one %s, got %d:\n%v", tc.code, len(found), res.Problems())
			}
			p := found[0]
			if p.Severity != tc.severity || p.File != tc.file || p.Pointer != tc.pointer || p.Hint == "" || p.Line == 0 {
				t.Fatalf("got %s (line %d), want %s %s %s with a hint", p, p.Line, tc.severity, tc.file, tc.pointer)
			}
			// What validate reports, New refuses with the same code.
			_, err := Load(dir, Config{})
			if err == nil || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("Load: %v", err)
			}
		})
	}
}

// TestBuilderProblemsComeAllAtOnce: one validate reports the broken rules
// of the completion builder, of the step machine and of configuration
// together; a value of the wrong type is one schema problem, not also the
// builder's.
func TestBuilderProblemsComeAllAtOnce(t *testing.T) {
	a, r := ruleAgent(), ruleRegistry()
	delete(at(a, "runner", "completion"), "keyword")
	r["entryStep"] = "nope"
	at(r, "steps", "initial.main")["stepId"] = "other"
	res := agentdir.Check(writeRuleAgent(t, a, r), ValidateOptions())
	codes := map[string]int{}
	for _, p := range res.Errors() {
		codes[p.Code]++
	}
	for _, want := range []string{"AC-COMPLETION-KEYWORD", "SR-ENTRY-STEP", "SR-STEP-ID"} {
		if codes[want] != 1 {
			t.Errorf("want one %s: %v", want, res.Problems())
		}
	}
	r = ruleRegistry()
	r["entryStep"] = 42
	res = agentdir.Check(writeRuleAgent(t, ruleAgent(), r), ValidateOptions())
	if len(res.Errors()) != 1 || res.Errors()[0].Code != "SR-SCHEMA-TYPE" {
		t.Fatalf("want exactly SR-SCHEMA-TYPE: %v", res.Problems())
	}
}

// TestValidatorRulesWithoutCode: the validator builder's rules that have
// no problem code of their own (an unknown type, a custom validator whose
// Go validator nobody gave) are reported once as CONFIG_INVALID, located,
// with a hint, unless the schema already reports the value; New refuses
// them. A validator schema whose file is missing is one problem
// (SR-SCHEMA-FILE), not also SR-SCHEMA-UNRESOLVED.
func TestValidatorRulesWithoutCode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(v map[string]any)
		code    string
		pointer string
	}{
		{"no Go validator", func(v map[string]any) {
			v["type"], v["handler"] = "custom", "nobody-registered-this"
			delete(v, "path")
		},
			"CONFIG_INVALID", "/validators/out-exists/handler"},
		{"unknown type", func(v map[string]any) { v["type"] = "http" },
			"SR-SCHEMA-ENUM", "/validators/out-exists/type"},
		{"failurePattern missing", func(v map[string]any) { delete(v, "failurePattern") },
			"SR-SCHEMA-REQUIRED", "/validators/out-exists/failurePattern"},
		{"schema file missing", func(v map[string]any) { v["schema"] = map[string]any{"file": "nope.schema.json", "schema": "x"} },
			"SR-SCHEMA-FILE", "/validators/out-exists/schema/file"},
		{"schema file outside", func(v map[string]any) { v["schema"] = map[string]any{"file": "../agent.json", "schema": "x"} },
			"SR-PATH-OUTSIDE", "/validators/out-exists/schema/file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, r := ruleAgent(), ruleRegistry()
			tc.mutate(at(r, "validators", "out-exists"))
			dir := writeRuleAgent(t, a, r)
			res := agentdir.Check(dir, ValidateOptions())
			errs := res.Errors()
			if len(errs) != 1 || errs[0].Code != tc.code || errs[0].Pointer != tc.pointer || errs[0].Hint == "" || errs[0].Line == 0 {
				t.Fatalf("want one %s at %s, got:\n%v", tc.code, tc.pointer, res.Problems())
			}
			if _, err := Load(dir, Config{}); err == nil {
				t.Fatal("Load accepted it")
			}
		})
	}
}

// TestClimptFailurePatternsAreFound: a validator's failurePattern finds a
// pattern declared under climpt's failurePatterns as under
// completionPatterns.
func TestClimptFailurePatternsAreFound(t *testing.T) {
	a, r := ruleAgent(), ruleRegistry()
	r["failurePatterns"] = r["completionPatterns"]
	delete(r, "completionPatterns")
	if res := agentdir.Check(writeRuleAgent(t, a, r), ValidateOptions()); !res.Valid() || len(res.Warnings()) > 0 {
		t.Fatalf("failurePatterns not read:\n%v", res.Problems())
	}
}

// TestMissingStepSchemaFileIsOneProblem: a step's output schema file that
// does not exist is SR-SCHEMA-FILE only, not also SR-SCHEMA-UNRESOLVED.
func TestMissingStepSchemaFileIsOneProblem(t *testing.T) {
	a, r := ruleAgent(), ruleRegistry()
	at(r, "steps", "review.main", "outputSchemaRef")["file"] = "nope.schema.json"
	res := agentdir.Check(writeRuleAgent(t, a, r), ValidateOptions())
	if errs := res.Errors(); len(errs) != 1 || errs[0].Code != "SR-SCHEMA-FILE" || errs[0].Pointer != "/steps/review.main/outputSchemaRef/file" {
		t.Fatalf("want one SR-SCHEMA-FILE:\n%v", res.Problems())
	}
}

// TestInvalidSchemaIsLocated: a schema file that is not a valid JSON
// Schema is reported at each bad keyword in that file, with the pointer
// into the whole file (a $ref target included) and the line and column
// of the keyword, for a step's output schema and a file validator's
// schema alike; an invalid regular expression is one of them, next to
// the meta-schema's problems. What validate reports, a run refuses.
func TestInvalidSchemaIsLocated(t *testing.T) {
	a, r := ruleAgent(), ruleRegistry()
	at(r, "validators", "out-exists")["schema"] = map[string]any{"file": "review.schema.json", "schema": "check"}
	dir := writeRuleAgent(t, a, r)
	schemaText := `{
  "$defs": {"flag": {"type": "bool"}},
  "review": {
    "type": "object",
    "properties": {
      "summary": {"type": "strin", "minLength": -1, "pattern": "(["},
      "ok": {"$ref": "#/$defs/flag"}
    }
  },
  "check": {"patternProperties": {"[": {}}}
}`
	if err := os.WriteFile(filepath.Join(dir, "schemas", "review.schema.json"), []byte(schemaText), 0o644); err != nil {
		t.Fatal(err)
	}
	res := agentdir.Check(dir, ValidateOptions())
	var got []string
	for _, p := range res.Problems() {
		if p.Code == "SR-SCHEMA-UNRESOLVED" {
			t.Errorf("also reported unlocated: %s", p)
		}
		if p.Code != CodeSchemaInvalid {
			continue
		}
		if p.Hint == "" || p.Severity != agentdir.SeverityError {
			t.Errorf("no hint or not an error: %s", p)
		}
		who, _, _ := strings.Cut(p.Message, ":")
		got = append(got, fmt.Sprintf("%s:%d:%d %s %s", p.File, p.Line, p.Column, p.Pointer, who))
	}
	want := []string{
		"schemas/review.schema.json:2:22 /$defs/flag/type step review.main",
		"schemas/review.schema.json:6:19 /review/properties/summary/type step review.main",
		"schemas/review.schema.json:6:36 /review/properties/summary/minLength step review.main",
		"schemas/review.schema.json:6:53 /review/properties/summary/pattern step review.main",
		"schemas/review.schema.json:10:35 /check/patternProperties/[ validator out-exists",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s\nall:\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"), res.Problems())
	}
	_, err := agentdir.LoadAndValidate(dir, ValidateOptions())
	if err == nil || !strings.Contains(err.Error(), "schemas/review.schema.json:6:53: error SR-SCHEMA-INVALID") ||
		!strings.Contains(err.Error(), "schemas/review.schema.json:10:35: error SR-SCHEMA-INVALID") {
		t.Fatalf("LoadAndValidate: %v", err)
	}
}

// A schema file that names draft-07 is checked as draft-07 by validate:
// its tuple items is valid there (2020-12 would refuse it).
func TestDraft07SchemaFileValidates(t *testing.T) {
	a, r := ruleAgent(), ruleRegistry()
	dir := writeRuleAgent(t, a, r)
	schemaText := `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "review": {
    "type": "object",
    "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}}
  }
}`
	if err := os.WriteFile(filepath.Join(dir, "schemas", "review.schema.json"), []byte(schemaText), 0o644); err != nil {
		t.Fatal(err)
	}
	res := agentdir.Check(dir, ValidateOptions())
	for _, p := range res.Problems() {
		if p.Severity == agentdir.SeverityError {
			t.Errorf("draft-07 schema refused: %s", p)
		}
	}
	// The same file without $schema is read as 2020-12, where items is one schema.
	if err := os.WriteFile(filepath.Join(dir, "schemas", "review.schema.json"), []byte(strings.Replace(schemaText, `"$schema": "http://json-schema.org/draft-07/schema#",`, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := false
	for _, p := range agentdir.Check(dir, ValidateOptions()).Problems() {
		refused = refused || p.Code == CodeSchemaInvalid && p.Pointer == "/review/properties/pair/items"
	}
	if !refused {
		t.Fatal("2020-12 accepted an array items")
	}
}
