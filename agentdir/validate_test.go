package agentdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

var testOpts = ValidateOptions{
	Providers: []string{"anthropic", "openai", "script", "claude-code"},
}

func TestBaseFixtureIsValidWithoutWarnings(t *testing.T) {
	dir := writeAgent(t, baseAgent(), baseRegistry(), nil)
	r := Check(dir, testOpts)
	if len(r.Problems()) != 0 {
		t.Fatalf("base fixture has problems:\n%s", dump(r))
	}
	a, err := LoadAndValidate(dir, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(a.Dir()) {
		t.Errorf("Dir %q is not absolute", a.Dir())
	}
	reg := a.Registry()
	if reg.C1 != "steps" || reg.StepLoopLimit != 0 || reg.Steps["review.main"].StepID != "review.main" ||
		reg.Steps["review.main"].Edition != "default" || reg.Steps["review.main"].Type != "normal" {
		t.Errorf("defaults not applied: %+v", reg)
	}
	if *reg.Steps["initial.main"].Retry.MaxRetries != 2 {
		t.Errorf("explicit maxRetries overwritten")
	}
	def := a.Definition()
	if def.Runner.Prompts.Base != "prompts" || def.Runner.Prompts.Registry != "steps_registry.json" {
		t.Errorf("prompt defaults not applied: %+v", def.Runner.Prompts)
	}
	// Accessors return copies: mutating one does not change the Agent.
	def.Name = "changed"
	reg.Steps["initial.main"] = Step{}
	if a.Definition().Name != "demo" || a.Registry().Steps["initial.main"].C2 != "initial" {
		t.Fatal("Agent accessors expose internal state")
	}
}

func TestApplyDefaultsRetry(t *testing.T) {
	reg := &Registry{Steps: map[string]Step{"a": {Retry: &RetryPolicy{}}}}
	ApplyDefaults(nil, reg)
	r := reg.Steps["a"].Retry
	if r.MaxRetries == nil || *r.MaxRetries != 3 || r.OnExhausted != "error" {
		t.Fatalf("retry defaults: %+v", r)
	}
	def := &Definition{}
	ApplyDefaults(def, nil)
	if def.Runner.Boundaries.PermissionMode != "default" {
		t.Fatalf("permissionMode default: %q", def.Runner.Boundaries.PermissionMode)
	}
}

// mutation cases: each breaks the base fixture in one way and names the
// problem it must produce.
func TestValidateProblems(t *testing.T) {
	type mut func(a, r map[string]any, files map[string]string)
	cases := []struct {
		name     string
		mutate   mut
		code     string
		severity Severity
		file     string
		pointer  string
	}{
		{"unknown key warning", func(a, r map[string]any, _ map[string]string) { at(a, "runner")["modle"] = "x" },
			"AC-UNKNOWN-KEY", SeverityWarning, "agent.json", "/runner/modle"},
		{"unknown registry key", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "initial.main")["uvVariable"] = []any{}
		}, "SR-UNKNOWN-KEY", SeverityWarning, "steps_registry.json", "/steps/initial.main/uvVariable"},
		{"wrong type", func(a, r map[string]any, _ map[string]string) { at(a, "runner", "budgets")["maxIterations"] = "five" },
			"AC-SCHEMA-TYPE", SeverityError, "agent.json", "/runner/budgets/maxIterations"},
		{"missing required", func(a, r map[string]any, _ map[string]string) { delete(a, "name") },
			"AC-SCHEMA-REQUIRED", SeverityError, "agent.json", "/name"},
		{"bad enum", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "boundaries")["permissionMode"] = "yolo"
		},
			"AC-SCHEMA-ENUM", SeverityError, "agent.json", "/runner/boundaries/permissionMode"},
		{"negative budget", func(a, r map[string]any, _ map[string]string) { at(a, "runner", "budgets")["maxCostUsd"] = -1 },
			"AC-SCHEMA-VALUE", SeverityError, "agent.json", "/runner/budgets/maxCostUsd"},
		{"path segment traversal", func(a, r map[string]any, _ map[string]string) { at(r, "steps", "review.main")["c3"] = "../../etc" },
			"SR-SCHEMA-VALUE", SeverityError, "steps_registry.json", "/steps/review.main/c3"},
		{"registry wrong type", func(a, r map[string]any, _ map[string]string) { r["steps"] = []any{} },
			"SR-SCHEMA-TYPE", SeverityError, "steps_registry.json", "/steps"},
		{"transition with two actions", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "initial.main", "check", "onFail")["complete"] = true
		}, "SR-TRANSITION-AMBIGUOUS", SeverityError, "steps_registry.json", "/steps/initial.main/check/onFail"},
		{"empty transition", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "initial.main", "check")["onFail"] = map[string]any{}
		}, "SR-TRANSITION-AMBIGUOUS", SeverityError, "steps_registry.json", "/steps/initial.main/check/onFail"},
		{"keyword check without keywords", func(a, r map[string]any, _ map[string]string) {
			delete(at(r, "steps", "initial.main", "check"), "keywords")
		}, "SR-CHECK-FIELD", SeverityError, "steps_registry.json", "/steps/initial.main/check/keywords"},
		{"fallbackStep ignored", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "initial.main", "retry")["onExhausted"] = "skip"
		}, "SR-IGNORED-FIELD", SeverityError, "steps_registry.json", "/steps/initial.main/retry/fallbackStep"},
		{"substep cycle", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["subSteps"] = []any{"initial.main"}
			at(r, "steps", "initial.main")["subSteps"] = []any{"review.main"}
		}, "SR-SUBSTEP-CYCLE", SeverityError, "steps_registry.json", "/steps/initial.main/subSteps"},
		{"substep self cycle", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["subSteps"] = []any{"review.main"}
		}, "SR-SUBSTEP-CYCLE", SeverityError, "steps_registry.json", "/steps/review.main/subSteps"},
		{"orphan substep", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps")["part"] = map[string]any{"type": "subStep", "c2": "part", "c3": "main"}
		}, "SR-SUBSTEP-ORPHAN", SeverityWarning, "steps_registry.json", "/steps/part"},
		{"unreachable step", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps")["lonely"] = map[string]any{"c2": "lonely", "c3": "main"}
		}, "SR-STEP-UNREACHABLE", SeverityWarning, "steps_registry.json", "/steps/lonely"},
		{"step without prompt", func(a, r map[string]any, _ map[string]string) { delete(at(r, "steps", "review.main"), "c2") },
			"SR-STEP-PROMPT", SeverityError, "steps_registry.json", "/steps/review.main"},
		{"stepId mismatch", func(a, r map[string]any, _ map[string]string) { at(r, "steps", "initial.main")["stepId"] = "other" },
			"SR-STEP-ID", SeverityError, "steps_registry.json", "/steps/initial.main/stepId"},
		{"unknown condition validator", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["completionConditions"] = []any{map[string]any{"validator": "ghost"}}
		}, "SR-CONDITION-VALIDATOR", SeverityError, "steps_registry.json", "/steps/review.main/completionConditions/0/validator"},
		{"pattern param not extracted", func(a, r map[string]any, _ map[string]string) {
			delete(at(r, "validators", "tests-pass"), "extractParams")
		}, "SR-PATTERN-PARAM", SeverityWarning, "steps_registry.json", "/validators/tests-pass/extractParams"},
		{"unused validator", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators")["spare"] = map[string]any{"type": "command", "command": "true", "failurePattern": "test-failed"}
		}, "SR-VALIDATOR-UNUSED", SeverityWarning, "steps_registry.json", "/validators/spare"},
		{"tests unprotected", func(a, r map[string]any, _ map[string]string) {
			delete(at(a, "runner"), "verification")
		}, "SR-TESTS-UNPROTECTED", SeverityWarning, "steps_registry.json", "/validators/tests-pass/command"},
		{"tests not verbose", func(a, r map[string]any, _ map[string]string) {
			at(r, "validators", "tests-pass")["command"] = "go test ./..."
		}, "SR-TESTS-NOT-VERBOSE", SeverityWarning, "steps_registry.json", "/validators/tests-pass/command"},
		{"bad step protect glob", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "initial.main")["protect"] = []any{"tests/**", "C:\\tests"}
		}, "SR-PROTECT-GLOB", SeverityError, "steps_registry.json", "/steps/initial.main/protect/1"},
		{"unused pattern", func(a, r map[string]any, _ map[string]string) {
			at(r, "completionPatterns")["spare"] = map[string]any{"edition": "failed"}
		}, "SR-PATTERN-UNUSED", SeverityWarning, "steps_registry.json", "/completionPatterns/spare"},
		{"bad onFailure action", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main", "onFailure")["action"] = "panic"
		}, "SR-SCHEMA-ENUM", SeverityError, "steps_registry.json", "/steps/review.main/onFailure/action"},
		{"onFailure without conditions", func(a, r map[string]any, _ map[string]string) {
			delete(at(r, "steps", "review.main"), "completionConditions")
			delete(at(a, "runner", "completion"), "validators")
			delete(at(r, "steps", "review.main"), "outputSchemaRef")
		}, "SR-IGNORED-FIELD", SeverityError, "steps_registry.json", "/steps/review.main/onFailure"},
		{"missing schema file", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main", "outputSchemaRef")["file"] = "nope.schema.json"
		}, "SR-SCHEMA-FILE", SeverityError, "steps_registry.json", "/steps/review.main/outputSchemaRef/file"},
		{"schema file escapes", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main", "outputSchemaRef")["file"] = "../agent.json"
		}, "SR-PATH-OUTSIDE", SeverityError, "steps_registry.json", "/steps/review.main/outputSchemaRef/file"},
		{"step fallback escapes", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["fallback"] = "/etc/passwd"
		}, "SR-PATH-OUTSIDE", SeverityError, "steps_registry.json", "/steps/review.main/fallback"},
		{"agentId mismatch", func(a, r map[string]any, _ map[string]string) { r["agentId"] = "other" },
			"SR-AGENT-ID", SeverityWarning, "steps_registry.json", "/agentId"},
		{"step model syntax", func(a, r map[string]any, _ map[string]string) { at(r, "steps", "review.main")["model"] = "anthropic:" },
			"SR-MODEL-SYNTAX", SeverityError, "steps_registry.json", "/steps/review.main/model"},
		// agent.json semantics
		{"model syntax", func(a, r map[string]any, _ map[string]string) { at(a, "runner")["model"] = "Claude Sonnet" },
			"AC-MODEL-SYNTAX", SeverityError, "agent.json", "/runner/model"},
		{"unknown provider", func(a, r map[string]any, _ map[string]string) { at(a, "runner")["model"] = "gemini:pro" },
			"AC-MODEL-PROVIDER", SeverityError, "agent.json", "/runner/model"},
		{"script file missing", func(a, r map[string]any, _ map[string]string) { at(a, "runner")["model"] = "script:missing.yaml" },
			"AC-MODEL-SCRIPT", SeverityError, "agent.json", "/runner/model"},
		{"script file escapes", func(a, r map[string]any, _ map[string]string) { at(a, "runner")["model"] = "script:../../x.yaml" },
			"AC-PATH-OUTSIDE", SeverityError, "agent.json", "/runner/model"},
		{"bad base url", func(a, r map[string]any, _ map[string]string) { at(a, "runner")["baseUrl"] = "localhost:11434" },
			"AC-BASE-URL", SeverityError, "agent.json", "/runner/baseUrl"},
		{"compaction target not below threshold", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["compaction"] = map[string]any{"threshold": 0.6, "target": 0.7}
		}, "AC-COMPACTION-TARGET", SeverityError, "agent.json", "/runner/compaction/target"},
		{"compaction summary model syntax", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["compaction"] = map[string]any{"summaryModel": "anthropic:"}
		}, "AC-MODEL-SYNTAX", SeverityError, "agent.json", "/runner/compaction/summaryModel"},
		{"compaction with claude-code", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["model"] = "claude-code"
			at(a, "runner")["contextWindow"] = 200000
		}, "AC-COMPACTION-IGNORED", SeverityWarning, "agent.json", "/runner/contextWindow"},
		{"request timeouts with claude-code", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["model"] = "claude-code"
			at(a, "runner")["requests"] = map[string]any{"connectTimeoutSeconds": 5}
		}, "AC-REQUESTS-IGNORED", SeverityWarning, "agent.json", "/runner/requests"},
		{"idempotent MCP server with claude-code", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["model"] = "claude-code"
			at(a, "runner")["mcpServers"] = map[string]any{"pay": map[string]any{"command": "pay-mcp", "idempotent": true}}
		}, "AC-IDEMPOTENT-IGNORED", SeverityWarning, "agent.json", "/runner/mcpServers/pay/idempotent"},
		{"tool calls per turn with claude-code", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["model"] = "claude-code"
			at(a, "runner", "boundaries")["maxToolCallsPerTurn"] = 8
		}, "AC-TOOL-CALLS-IGNORED", SeverityWarning, "agent.json", "/runner/boundaries/maxToolCallsPerTurn"},
		{"tool calls per turn negative", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "boundaries")["maxToolCallsPerTurn"] = -1
		}, "AC-SCHEMA-VALUE", SeverityError, "agent.json", "/runner/boundaries/maxToolCallsPerTurn"},
		{"context window too small", func(a, r map[string]any, _ map[string]string) { at(a, "runner")["contextWindow"] = 100 },
			"AC-SCHEMA-VALUE", SeverityError, "agent.json", "/runner/contextWindow"},
		{"bad tool pattern", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "boundaries")["allowedTools"] = []any{"Read", "Bash(git log:*"}
		}, "AC-TOOL-PATTERN", SeverityError, "agent.json", "/runner/boundaries/allowedTools/1"},
		{"bad protect glob", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "verification")["protect"] = []any{"tests/[ab", "**/*_test.go"}
		}, "AC-PROTECT-GLOB", SeverityError, "agent.json", "/runner/verification/protect/0"},
		{"absolute protect glob", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "verification")["protect"] = []any{"**/*_test.go", "/etc/*"}
		}, "AC-PROTECT-GLOB", SeverityError, "agent.json", "/runner/verification/protect/1"},
		{"hidden glob leaves the agent folder", func(a, r map[string]any, files map[string]string) {
			files["_hidden/x_test.go"] = "package x\n"
			at(a, "runner", "verification")["hidden"] = []any{"_hidden/**", "../tests/**"}
		}, "AC-HIDDEN-GLOB", SeverityError, "agent.json", "/runner/verification/hidden/1"},
		{"hidden glob matches nothing", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "verification")["hidden"] = []any{"_hidden/**"}
		}, "AC-HIDDEN-MISSING", SeverityError, "agent.json", "/runner/verification/hidden/0"},
		{"hidden tests without a test validator", func(a, r map[string]any, files map[string]string) {
			files["_hidden/x_test.go"] = "package x\n"
			at(a, "runner", "verification")["hidden"] = []any{"_hidden/**"}
			at(r, "validators", "tests-pass")["command"] = "echo ok"
		}, "AC-HIDDEN-INERT", SeverityError, "agent.json", "/runner/verification/hidden"},
		{"test changes decided by hidden tests without hidden tests", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "verification")["testChanges"] = "hiddenTests"
		}, "AC-TESTCHANGES-HIDDEN", SeverityError, "agent.json", "/runner/verification/testChanges"},
		{"unknown test changes policy", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "verification")["testChanges"] = "auto"
		}, "AC-SCHEMA-ENUM", SeverityError, "agent.json", "/runner/verification/testChanges"},
		{"bad disallowed pattern", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "boundaries")["disallowedTools"] = []any{"[", "Bash()"}
		}, "AC-TOOL-PATTERN", SeverityError, "agent.json", "/runner/boundaries/disallowedTools/0"},
		{"system prompt missing", func(a, r map[string]any, files map[string]string) { delete(files, "prompts/system.md") },
			"AC-SYSTEM-PROMPT-MISSING", SeverityError, "agent.json", "/runner/systemPromptPath"},
		{"system prompt escapes", func(a, r map[string]any, _ map[string]string) { at(a, "runner")["systemPromptPath"] = "../secret.md" },
			"AC-PATH-OUTSIDE", SeverityError, "agent.json", "/runner/systemPromptPath"},
		{"prompts base missing", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["prompts"] = map[string]any{"base": "tmpl"}
		},
			"AC-PROMPTS-DIR-MISSING", SeverityError, "agent.json", "/runner/prompts/base"},
		{"skill missing", func(a, r map[string]any, _ map[string]string) { at(a, "runner")["skills"] = []any{"skills/pdf"} },
			"AC-SKILL-MISSING", SeverityError, "agent.json", "/runner/skills/0"},
		{"skill without SKILL.md", func(a, r map[string]any, files map[string]string) {
			at(a, "runner")["skills"] = []any{"skills/pdf"}
			files["skills/pdf/notes.txt"] = "x"
		}, "AC-SKILL-MISSING", SeverityError, "agent.json", "/runner/skills/0"},
		{"ignored completion field", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "stepFlow", "keyword": "DONE"}
		}, "AC-IGNORED-FIELD", SeverityError, "agent.json", "/runner/completion/keyword"},
		{"maxIterations on keyword", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "keyword", "keyword": "DONE", "maxIterations": 3}
		}, "AC-IGNORED-FIELD", SeverityError, "agent.json", "/runner/completion/maxIterations"},
		{"options on stepFlow", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "stepFlow", "options": map[string]any{"x": 1}}
		}, "AC-IGNORED-FIELD", SeverityError, "agent.json", "/runner/completion/options"},
		{"top-level name", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["completion"] = map[string]any{"type": "stepFlow", "name": "x"}
		}, "AC-IGNORED-FIELD", SeverityError, "agent.json", "/runner/completion/name"},
		{"mcp both transports", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["mcpServers"] = map[string]any{"gh": map[string]any{"command": "x", "url": "http://x"}}
		}, "AC-MCP-TRANSPORT", SeverityError, "agent.json", "/runner/mcpServers/gh"},
		{"hard limit", func(a, r map[string]any, _ map[string]string) { at(a, "runner", "budgets")["maxIterations"] = 500 },
			"AC-BUDGET-HARD-LIMIT", SeverityWarning, "agent.json", "/runner/budgets/maxIterations"},
		// parameters
		{"param name", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters")["my topic"] = map[string]any{"type": "string"}
		},
			"PA-NAME", SeverityError, "agent.json", "/parameters/my topic"},
		{"cli syntax", func(a, r map[string]any, _ map[string]string) { at(a, "parameters", "topic")["cli"] = "-t" },
			"PA-CLI-SYNTAX", SeverityError, "agent.json", "/parameters/topic/cli"},
		{"cli duplicate", func(a, r map[string]any, _ map[string]string) { at(a, "parameters", "count")["cli"] = "--topic" },
			"PA-CLI-DUPLICATE", SeverityError, "agent.json", "/parameters/topic"},
		{"default flag duplicate", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters")["top_ic"] = map[string]any{"type": "string", "cli": "--topic"}
		}, "PA-CLI-DUPLICATE", SeverityError, "agent.json", "/parameters/topic"},
		{"flag clash", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters")["model"] = map[string]any{"type": "string"}
		},
			"PA-CLI-RESERVED", SeverityError, "agent.json", "/parameters/model"},
		{"flag clash via underscore", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters")["max_iterations"] = map[string]any{"type": "number"}
		}, "PA-CLI-RESERVED", SeverityError, "agent.json", "/parameters/max_iterations"},
		{"explicit cli clash", func(a, r map[string]any, _ map[string]string) { at(a, "parameters", "count")["cli"] = "--json" },
			"PA-CLI-RESERVED", SeverityError, "agent.json", "/parameters/count"},
		{"default type", func(a, r map[string]any, _ map[string]string) { at(a, "parameters", "count")["default"] = "three" },
			"PA-DEFAULT-TYPE", SeverityError, "agent.json", "/parameters/count/default"},
		{"default out of range", func(a, r map[string]any, _ map[string]string) { at(a, "parameters", "count")["default"] = 11 },
			"PA-DEFAULT-INVALID", SeverityError, "agent.json", "/parameters/count/default"},
		{"default pattern", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters")["mode"] = map[string]any{"type": "string", "default": "Fast", "validation": map[string]any{"pattern": "[a-z]+"}}
		}, "PA-DEFAULT-INVALID", SeverityError, "agent.json", "/parameters/mode/default"},
		{"default enum", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters")["mode"] = map[string]any{"type": "string", "default": "slow", "validation": map[string]any{"enum": []any{"fast"}}}
		}, "PA-DEFAULT-INVALID", SeverityError, "agent.json", "/parameters/mode/default"},
		{"required with default", func(a, r map[string]any, _ map[string]string) { at(a, "parameters", "topic")["default"] = "x" },
			"PA-REQUIRED-DEFAULT", SeverityWarning, "agent.json", "/parameters/topic/default"},
		{"bad pattern", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters", "topic")["validation"] = map[string]any{"pattern": "(["}
		}, "PA-VALIDATION", SeverityError, "agent.json", "/parameters/topic/validation/pattern"},
		{"min above max", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters", "count")["validation"] = map[string]any{"min": 5, "max": 1}
		}, "PA-VALIDATION", SeverityError, "agent.json", "/parameters/count/validation/min"},
		{"min on string", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters", "topic")["validation"] = map[string]any{"min": 5}
		}, "PA-VALIDATION", SeverityError, "agent.json", "/parameters/topic/validation/min"},
		{"uv without supplier", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "initial.main")["uvVariables"] = []any{"topic", "issue"}
		}, "PA-UV-UNSUPPLIED", SeverityError, "steps_registry.json", "/steps/initial.main/uvVariables/1"},
		{"uv with prefix", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "initial.main")["uvVariables"] = []any{"uv-topic"}
		}, "PA-UV-UNSUPPLIED", SeverityError, "steps_registry.json", "/steps/initial.main/uvVariables/0"},
		{"required uv from optional param", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters", "topic")["required"] = false
		}, "PA-UV-OPTIONAL", SeverityWarning, "steps_registry.json", "/steps/initial.main/uvVariables/0"},
		{"step model provider", func(a, r map[string]any, _ map[string]string) { at(r, "steps", "review.main")["model"] = "gemini:pro" },
			"SR-MODEL-PROVIDER", SeverityError, "steps_registry.json", "/steps/review.main/model"},
		{"step script missing", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["model"] = "script:none.yaml"
		},
			"SR-MODEL-SCRIPT", SeverityError, "steps_registry.json", "/steps/review.main/model"},
		{"registry missing required", func(a, r map[string]any, _ map[string]string) { delete(r, "steps") },
			"SR-SCHEMA-REQUIRED", SeverityError, "steps_registry.json", "/steps"},
		{"two steps and no entry step", func(a, r map[string]any, _ map[string]string) { delete(r, "entryStep") },
			"SR-ENTRY-STEP", SeverityError, "steps_registry.json", "/entryStep"},
		{"stepLoopLimit zero", func(a, r map[string]any, _ map[string]string) { r["stepLoopLimit"] = 0 },
			"SR-SCHEMA-VALUE", SeverityError, "steps_registry.json", "/stepLoopLimit"},
		{"github disabled with a closure action", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["integrations"] = map[string]any{"github": map[string]any{"enabled": false, "defaultClosureAction": "label-only"}}
		}, "AC-GITHUB-DISABLED", SeverityWarning, "agent.json", "/runner/integrations/github/enabled"},
		{"github without an issue parameter", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["integrations"] = map[string]any{"github": map[string]any{"enabled": true}}
		}, "AC-GITHUB-NO-ISSUE", SeverityWarning, "agent.json", "/runner/integrations/github"},
		{"github named labels", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters")["issue"] = map[string]any{"type": "number", "required": true}
			at(a, "runner")["integrations"] = map[string]any{"github": map[string]any{"enabled": true,
				"labels": map[string]any{"inProgress": "in-progress", "blocked": "blocked", "completion": map[string]any{"add": []any{"done"}}}}}
		}, "AC-GITHUB-LABELS-INERT", SeverityWarning, "agent.json", "/runner/integrations/github/labels/blocked"},
		{"github label of the wrong type", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["integrations"] = map[string]any{"github": map[string]any{"enabled": true, "labels": map[string]any{"blocked": 3}}}
		}, "AC-SCHEMA-TYPE", SeverityError, "agent.json", "/runner/integrations/github/labels/blocked"},
		{"bad closure action", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["integrations"] = map[string]any{"github": map[string]any{"enabled": true, "defaultClosureAction": "delete"}}
		}, "AC-SCHEMA-ENUM", SeverityError, "agent.json", "/runner/integrations/github/defaultClosureAction"},
		{"subprocess step without command", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["runner"] = map[string]any{"command": " "}
		}, "SR-RUNNER-COMMAND", SeverityError, "steps_registry.json", "/steps/review.main/runner/command"},
		{"subprocess gateway", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["type"] = "gateway"
			at(r, "steps", "review.main")["check"] = map[string]any{"type": "keyword", "keywords": []any{"X"},
				"onPass": map[string]any{"complete": true}, "onFail": map[string]any{"complete": true}}
			at(r, "steps", "review.main")["runner"] = map[string]any{"command": "true"}
		}, "SR-RUNNER-GATEWAY", SeverityError, "steps_registry.json", "/steps/review.main/type"},
		{"subprocess step with a model", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["runner"] = map[string]any{"command": "true"}
			at(r, "steps", "review.main")["model"] = "script:script.yaml"
		}, "SR-IGNORED-FIELD", SeverityError, "steps_registry.json", "/steps/review.main/model"},
		{"subprocess context names no parameter", func(a, r map[string]any, _ map[string]string) {
			at(r, "steps", "review.main")["runner"] = map[string]any{"command": "./merge.sh", "args": []any{"--pr", "${context.pr}"}}
		}, "SR-RUNNER-CONTEXT", SeverityError, "steps_registry.json", "/steps/review.main/runner/args/1"},
		{"subprocess context optional", func(a, r map[string]any, _ map[string]string) {
			at(a, "parameters")["branch"] = map[string]any{"type": "string"}
			at(r, "steps", "review.main")["runner"] = map[string]any{"command": "./merge.sh", "args": []any{"--branch=${context.branch}"}}
		}, "SR-RUNNER-CONTEXT-OPTIONAL", SeverityWarning, "steps_registry.json", "/steps/review.main/runner/args/0"},
		{"bad step kind", func(a, r map[string]any, _ map[string]string) { at(r, "steps", "review.main")["stepKind"] = "final" },
			"SR-SCHEMA-ENUM", SeverityError, "steps_registry.json", "/steps/review.main/stepKind"},
		{"fallbackDir missing", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["prompts"] = map[string]any{"fallbackDir": "common"}
		}, "AC-PROMPTS-DIR-MISSING", SeverityError, "agent.json", "/runner/prompts/fallbackDir"},
		// climpt spellings
		{"climpt spelling conflict", func(a, r map[string]any, f map[string]string) {
			at(a, "runner")["flow"] = map[string]any{"systemPromptPath": "prompts/other.md"}
			f["prompts/other.md"] = "Other."
		}, "AC-SPELLING-CONFLICT", SeverityError, "agent.json", "/runner/flow/systemPromptPath"},
		{"climpt logging inert", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner")["logging"] = map[string]any{"directory": "logs", "format": "jsonl"}
		}, "AC-CLIMPT-INERT", SeverityWarning, "agent.json", "/runner/logging"},
		{"climpt meta:custom", func(a, r map[string]any, _ map[string]string) {
			delete(at(a, "runner"), "completion")
			at(a, "runner")["verdict"] = map[string]any{"type": "meta:custom", "config": map[string]any{"handlerPath": "./verdict.ts"}}
		}, "AC-VERDICT-UNSUPPORTED", SeverityError, "agent.json", "/runner/verdict/config/handlerPath"},
		{"climpt poll:state without issue", func(a, r map[string]any, _ map[string]string) {
			delete(at(a, "runner"), "completion")
			at(a, "runner")["verdict"] = map[string]any{"type": "poll:state", "config": map[string]any{"issueParam": "num"}}
		}, "AC-VERDICT-ISSUE-PARAM", SeverityError, "agent.json", "/runner/verdict/config/issueParam"},
		{"climpt detect:structured without signalType", func(a, r map[string]any, _ map[string]string) {
			delete(at(a, "runner"), "completion")
			at(a, "runner")["verdict"] = map[string]any{"type": "detect:structured", "config": map[string]any{"requiredFields": []any{"x"}}}
		}, "AC-VERDICT-FIELD", SeverityError, "agent.json", "/runner/verdict/config/signalType"},
		{"climpt entry overridden", func(a, r map[string]any, _ map[string]string) {
			delete(at(a, "runner"), "completion")
			at(a, "runner")["verdict"] = map[string]any{"type": "count:iteration", "config": map[string]any{"maxIterations": 2}}
			r["entryStepMapping"] = map[string]any{"count:iteration": "review.main"}
		}, "SR-ENTRY-STEP-OVERRIDDEN", SeverityWarning, "steps_registry.json", "/entryStepMapping/count:iteration"},
		{"climpt entry mapping key", func(a, r map[string]any, _ map[string]string) {
			r["entryStepMapping"] = map[string]any{"poll": "initial.main"}
		}, "SR-ENTRY-MAPPING-KEY", SeverityWarning, "steps_registry.json", "/entryStepMapping/poll"},
		{"climpt failure pattern conflict", func(a, r map[string]any, _ map[string]string) {
			r["completionPatterns"] = map[string]any{"dup": map[string]any{"edition": "a"}}
			r["failurePatterns"] = map[string]any{"dup": map[string]any{"edition": "b"}}
		}, "SR-SPELLING-CONFLICT", SeverityError, "steps_registry.json", "/failurePatterns/dup"},
		{"climpt path template", func(a, r map[string]any, _ map[string]string) { r["pathTemplate"] = "{c2}/{c3}.md" },
			"SR-PATH-TEMPLATE", SeverityError, "steps_registry.json", "/pathTemplate"},
		{"climpt sandbox network", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "boundaries")["sandbox"] = map[string]any{"enabled": true, "network": map[string]any{"mode": "trusted"}}
		}, "AC-SANDBOX-UNSUPPORTED", SeverityError, "agent.json", "/runner/boundaries/sandbox/network"},
		{"climpt trusted domain wildcard", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "boundaries")["sandbox"] = map[string]any{"network": map[string]any{"mode": "custom", "trustedDomains": []any{"api.anthropic.com", "*.github.com"}}}
		}, "AC-SANDBOX-NETWORK", SeverityError, "agent.json", "/runner/boundaries/sandbox/network/trustedDomains/1"},
		{"sandbox network allow entry", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "boundaries")["sandbox"] = map[string]any{"network": map[string]any{"allow": []any{"api.example.com:443", "https://api.example.com"}}}
		}, "AC-SANDBOX-NETWORK", SeverityError, "agent.json", "/runner/boundaries/sandbox/network/allow/1"},
		{"sandbox network with the sandbox off", func(a, r map[string]any, _ map[string]string) {
			at(a, "runner", "boundaries")["sandbox"] = map[string]any{"enabled": false, "network": map[string]any{"allow": []any{"api.example.com:443"}}}
		}, "AC-SANDBOX-NETWORK-INERT", SeverityWarning, "agent.json", "/runner/boundaries/sandbox/network"},
		{"climpt stdin", func(a, r map[string]any, _ map[string]string) { at(r, "steps", "initial.main")["usesStdin"] = true },
			"SR-STDIN-UNSUPPORTED", SeverityError, "steps_registry.json", "/steps/initial.main/usesStdin"},
		{"climpt step priority", func(a, r map[string]any, _ map[string]string) { at(r, "steps", "initial.main")["priority"] = 3 },
			"SR-CLIMPT-INERT", SeverityWarning, "steps_registry.json", "/steps/initial.main/priority"},
	}
	// Codes exercised by other tests of this package.
	covered := map[string]bool{
		"CONFIG_NOT_FOUND": true, "CONFIG_PARSE": true, "CONFIG_INVALID": true, // TestLoad*, TestRegistryPathMustStayInside
		"AC-DUPLICATE-KEY": true, "SR-DUPLICATE-KEY": true, // TestDuplicateKeyWarning
		// Cross-layer codes: agent.TestCrossLayerChecks.
		"SR-STEP-PROMPT-MISSING": true, "SR-STEP-PROMPT-INVALID": true, "SR-RETRY-PROMPT-MISSING": true, "SR-SCHEMA-UNRESOLVED": true,
		// Rules checked by the builders (verdict.CompletionFromConfig, verdict.NewMachine),
		// reported by validate through the agent layer: agent.TestBuilderRulesAreReportedByValidate.
		"AC-COMPLETION-MAX-ITERATIONS": true, "AC-COMPLETION-KEYWORD": true, "AC-COMPLETION-MODE": true,
		"AC-COMPLETION-CONDITIONS": true, "AC-COMPLETION-NAME": true, "AC-COMPLETION-HANDLER": true, "AC-COMPLETION-VALIDATOR": true,
		"SR-ENTRY-STEP": true, "SR-GATEWAY-CHECK": true, "SR-TRANSITION-TARGET": true, "SR-TRANSITION-ESCALATE": true,
		"SR-RETRY-FALLBACK": true, "SR-RETRY-FALLBACK-TARGET": true, "SR-ESCALATE-TARGET": true, "SR-ESCALATE-WEBHOOK": true,
		"SR-SUBSTEP-MISSING": true, "SR-SUBSTEP-PARALLEL": true,
		// A validator's definition: verify.NewCompletionValidator.
		"SR-VALIDATOR-FIELD": true, "SR-SUCCESS-WHEN": true, "SR-PATTERN-UNKNOWN": true, "SR-EXTRACTOR-UNKNOWN": true,
		// A schema file that is not a valid JSON Schema: agent.TestInvalidSchemaIsLocated.
		"SR-SCHEMA-INVALID": true,
		// Definition snapshot codes: definition.TestTakeBounds, TestTakeRefusesEscapingLinks…, main.TestValidateReportsSnapshotProblems.
		"DEFINITION_TOO_LARGE": true, "PATH_ESCAPE": true,
	}
	// Intent-routing codes: TestFlowValidation; SR-GATE-ENUM and SR-RETRY-PROMPT-GENERIC (cross-layer): agent.TestFlowValidateEnum.
	covered["SR-GATE-ENUM"], covered["SR-RETRY-PROMPT-GENERIC"] = true, true
	// SR-RETRY-PROMPT-UV (cross-layer): main.TestValidateWarnsOfUVPlaceholdersInRetryPrompts.
	covered["SR-RETRY-PROMPT-UV"] = true
	for _, tc := range flowCases() {
		covered[tc.code] = true
	}
	for _, tc := range cases {
		covered[tc.code] = true
	}
	for _, c := range Codes() {
		if !covered[c.Code] {
			t.Errorf("code %s has no test case", c.Code)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, r := baseAgent(), baseRegistry()
			files := map[string]string{
				"prompts/system.md": "You are a test agent.",
			}
			tc.mutate(a, r, files)
			dir := writeAgent(t, a, r, nil)
			if _, ok := files["prompts/system.md"]; !ok {
				os.Remove(filepath.Join(dir, "prompts/system.md"))
			}
			for name, content := range files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte(content), 0o644)
			}
			res := Check(dir, testOpts)
			p := findProblem(t, res, tc.code)
			if p.Severity != tc.severity || p.File != tc.file || p.Pointer != tc.pointer {
				t.Fatalf("got %s, want severity %s file %s pointer %s\nall:\n%s", p, tc.severity, tc.file, tc.pointer, dump(res))
			}
			if p.Line == 0 || p.Column == 0 {
				t.Errorf("problem has no line:col: %s", p)
			}
			if p.Hint == "" || p.Message == "" {
				t.Errorf("problem lacks message or hint: %s", p)
			}
			if !IsKnownCode(p.Code) {
				t.Errorf("code %s is not in Codes()", p.Code)
			}
			if tc.severity == SeverityWarning && !res.Valid() {
				t.Errorf("a warning alone made the config invalid:\n%s", dump(res))
			}
			if tc.severity == SeverityError {
				_, err := LoadAndValidate(dir, testOpts)
				var ve *ValidationError
				if !errors.As(err, &ve) || !errors.Is(err, agenterr.ErrConfigurationValidation) {
					t.Fatalf("LoadAndValidate: want *ValidationError / CONFIG_INVALID, got %v", err)
				}
				if !strings.Contains(err.Error(), tc.code) || len(ve.Problems()) == 0 {
					t.Errorf("error message does not list %s: %v", tc.code, err)
				}
				if agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation {
					t.Errorf("CodeOf = %q", agenterr.CodeOf(err))
				}
			}
		})
	}
}

// Semantic checks do not repeat what the schema already reported: a
// wrong-typed entryStep is one SR-SCHEMA-TYPE, not also SR-ENTRY-STEP.
func TestSchemaErrorsSuppressDuplicateSemanticErrors(t *testing.T) {
	r := baseRegistry()
	r["entryStep"] = 42
	dir := writeAgent(t, baseAgent(), r, nil)
	res := Check(dir, testOpts)
	if len(res.Errors()) != 1 || res.Errors()[0].Code != "SR-SCHEMA-TYPE" {
		t.Fatalf("want exactly SR-SCHEMA-TYPE:\n%s", dump(res))
	}
}

// A missing agent name is one error, not also a warning telling to set
// agentId to "".
func TestMissingNameIsNotAnAgentIDMismatch(t *testing.T) {
	a := baseAgent()
	delete(a, "name")
	res := Check(writeAgent(t, a, baseRegistry(), nil), testOpts)
	findProblem(t, res, "AC-SCHEMA-REQUIRED")
	for _, p := range res.Problems() {
		if p.Code == "SR-AGENT-ID" {
			t.Fatalf("SR-AGENT-ID for a missing name:\n%s", dump(res))
		}
	}
}

// Every problem is reported at once, not just the first.
func TestValidateReportsAllProblems(t *testing.T) {
	a, r := baseAgent(), baseRegistry()
	at(a, "runner")["model"] = "bad model"
	at(a, "parameters")["json"] = map[string]any{"type": "boolean"}
	at(r, "steps", "initial.main")["stepId"] = "other"
	at(r, "steps", "initial.main")["model"] = "gemini:pro"
	dir := writeAgent(t, a, r, nil)
	res := Check(dir, testOpts)
	for _, code := range []string{"AC-MODEL-SYNTAX", "PA-CLI-RESERVED", "SR-STEP-ID", "SR-MODEL-PROVIDER"} {
		findProblem(t, res, code)
	}
	// Sorted by file, then position.
	ps := res.Problems()
	for i := 1; i < len(ps); i++ {
		if ps[i-1].File > ps[i].File || ps[i-1].File == ps[i].File && ps[i-1].Line > ps[i].Line {
			t.Fatalf("problems not sorted:\n%s", dump(res))
		}
	}
}

func TestUnknownKeySuggestionsAndPosition(t *testing.T) {
	agent := "{\n  \"version\": \"1.0.0\",\n  \"name\": \"demo\",\n  \"descripton\": \"typo\",\n  \"runner\": {\n    \"modle\": \"x\",\n    \"completion\": {\"type\": \"stepFlow\"},\n    \"zzz\": 1\n  }\n}\n"
	dir := writeAgent(t, agent, baseRegistry(), nil)
	res := Check(dir, ValidateOptions{})
	want := map[string]struct {
		line, col int
		suggest   string
	}{
		"/descripton":   {4, 3, `did you mean "description"?`},
		"/runner/modle": {6, 5, `did you mean "model"?`},
		"/runner/zzz":   {8, 5, ""},
	}
	n := 0
	for _, p := range res.Warnings() {
		w, ok := want[p.Pointer]
		if !ok || p.Code != "AC-UNKNOWN-KEY" {
			continue
		}
		n++
		if p.Line != w.line || p.Column != w.col {
			t.Errorf("%s at %d:%d, want %d:%d", p.Pointer, p.Line, p.Column, w.line, w.col)
		}
		if w.suggest != "" && !strings.Contains(p.Message, w.suggest) {
			t.Errorf("%s: message %q lacks %q", p.Pointer, p.Message, w.suggest)
		}
		if w.suggest == "" && (strings.Contains(p.Message, "did you mean") || !strings.Contains(p.Hint, "known keys")) {
			t.Errorf("%s: unexpected suggestion or missing known keys: %s", p.Pointer, p)
		}
	}
	if n != 3 {
		t.Fatalf("want 3 unknown-key warnings:\n%s", dump(res))
	}
}

func TestDuplicateKeyWarning(t *testing.T) {
	agent := `{"version":"1.0.0","name":"demo","name":"demo","runner":{"completion":{"type":"stepFlow"}}}`
	reg := "{\"entryStep\": \"a\",\n \"steps\": {\"a\": {\"c2\": \"x\", \"c3\": \"y\"},\n  \"a\": {\"c2\": \"x\", \"c3\": \"z\"}}}"
	dir := writeAgent(t, agent, reg, nil)
	res := Check(dir, ValidateOptions{})
	p := findProblem(t, res, "AC-DUPLICATE-KEY")
	if p.Severity != SeverityWarning || p.Pointer != "/name" || p.Line != 1 || p.Column != 34 {
		t.Fatalf("duplicate key: %s", p)
	}
	p = findProblem(t, res, "SR-DUPLICATE-KEY")
	if p.Pointer != "/steps/a" || p.Line != 3 || p.Column != 3 {
		t.Fatalf("duplicate step: %s", p)
	}
}

func TestPositionsOfSchemaErrors(t *testing.T) {
	reg := "{\n  \"entryStep\": \"a\",\n  \"steps\": {\n    \"a\": {\"c2\": \"x\", \"c3\": \"y\", \"type\": \"weird\"}\n  }\n}"
	dir := writeAgent(t, baseAgent(), reg, nil)
	p := findProblem(t, Check(dir, testOpts), "SR-SCHEMA-ENUM")
	if p.Line != 4 || p.Column != 41 || p.Pointer != "/steps/a/type" {
		t.Fatalf("got %s", p)
	}
	// A missing required key points at the object that lacks it.
	reg = "{\n  \"entryStep\": \"a\"\n}"
	dir = writeAgent(t, baseAgent(), reg, nil)
	p = findProblem(t, Check(dir, testOpts), "SR-SCHEMA-REQUIRED")
	if p.Line != 1 || p.Column != 1 || p.Pointer != "/steps" {
		t.Fatalf("got %s", p)
	}
}

func TestValidateGoBuiltDefinition(t *testing.T) {
	def := &Definition{Version: "1.0.0", Name: "demo", Runner: Runner{
		Completion: Completion{Type: "stepFlow", Mode: "any"},
		Boundaries: Boundaries{PermissionMode: "sometimes"},
	}}
	reg := &Registry{EntryStep: "a", Steps: map[string]Step{"a": {C2: "x", C3: "y"}}}
	res := Validate(def, reg, ValidateOptions{})
	findProblem(t, res, "AC-SCHEMA-ENUM")
	p := findProblem(t, res, "AC-IGNORED-FIELD")
	if p.Line != 0 || p.File != "agent.json" {
		t.Fatalf("Go-built definitions have no positions: %s", p)
	}
	if res.Valid() {
		t.Fatal("invalid definition reported valid")
	}
	// nil inputs do not panic.
	if Validate(nil, nil, ValidateOptions{}).Valid() {
		t.Fatal("empty definition reported valid")
	}
}

func TestProvidersNotCheckedWhenUnknown(t *testing.T) {
	a := baseAgent()
	at(a, "runner")["model"] = "gemini:pro"
	dir := writeAgent(t, a, baseRegistry(), nil)
	if res := Check(dir, ValidateOptions{}); !res.Valid() {
		t.Fatalf("providers nil must skip the provider check:\n%s", dump(res))
	}
}

func TestBuiltinPatternsAndVariables(t *testing.T) {
	a, r := baseAgent(), baseRegistry()
	at(r, "validators", "out-exists")["failurePattern"] = "git-dirty"
	at(r, "steps", "initial.main")["uvVariables"] = []any{"topic", "iteration"}
	delete(at(r, "completionPatterns"), "file-missing")
	dir := writeAgent(t, a, r, nil)
	res := Check(dir, ValidateOptions{BuiltinVariables: []string{"iteration"}})
	if !res.Valid() {
		t.Fatalf("builtins not honoured:\n%s", dump(res))
	}
}

// Step ids with "/" and "~" are escaped in pointers (RFC 6901) and still
// located in the file.
func TestPointerEscaping(t *testing.T) {
	r := baseRegistry()
	at(r, "steps", "initial.main", "check", "onPass")["next"] = "a/b~c"
	at(r, "steps")["a/b~c"] = map[string]any{"c2": "x", "c3": "y", "stepId": "ghost"}
	dir := writeAgent(t, baseAgent(), r, nil)
	p := findProblem(t, Check(dir, testOpts), "SR-STEP-ID")
	if p.Pointer != "/steps/a~1b~0c/stepId" || p.Line == 0 {
		t.Fatalf("got %s", p)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, DefaultRegistryFile))
	line := strings.Split(string(raw), "\n")[p.Line-1]
	if !strings.Contains(line, `"ghost"`) {
		t.Fatalf("line %d is %q, want the ghost stepId", p.Line, line)
	}
}

func TestNewAgentFromGo(t *testing.T) {
	dir := writeAgent(t, baseAgent(), baseRegistry(), nil)
	def, reg, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	def.src, reg.src = nil, nil // as if built in Go
	ag, err := NewAgent(dir, def, reg, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if ag.Registry().C1 != "steps" || reg.C1 != "" {
		t.Fatal("defaults must apply to the Agent's copy, not the caller's registry")
	}
	st := reg.Steps["initial.main"]
	st.StepID = "ghost"
	reg.Steps["initial.main"] = st
	_, err = NewAgent(dir, def, reg, testOpts)
	var ve *ValidationError
	if !errors.As(err, &ve) || findProblem(t, ve.Result, "SR-STEP-ID").Line != 0 {
		t.Fatalf("want SR-STEP-ID without position, got %v", err)
	}
	if _, err := NewAgent(dir, nil, reg, testOpts); !errors.Is(err, agenterr.ErrConfigurationValidation) {
		t.Fatalf("nil definition: %v", err)
	}
}

func TestGoBuiltGatewayAndMissingPattern(t *testing.T) {
	def := &Definition{Version: "1.0.0", Name: "demo", Runner: Runner{Completion: Completion{Type: "stepFlow"}}}
	reg := &Registry{EntryStep: "route", Steps: map[string]Step{
		"route": {Type: "gateway", Check: &StepCheck{Type: "keyword", Keywords: []string{"A"},
			OnPass: Transition{Next: "work"}, OnFail: Transition{Complete: true}}},
		"work": {C2: "initial", C3: "main"},
	}}
	ApplyDefaults(def, reg)
	if r := Validate(def, reg, ValidateOptions{}); !r.Valid() {
		t.Fatalf("Go-built gateway agent:\n%s", dump(r))
	}
	reg.Validators = map[string]Validator{"v": {Type: "command", Command: "true"}}
	findProblem(t, Validate(def, reg, ValidateOptions{}), "SR-SCHEMA-REQUIRED")
	// An explicit empty failurePattern in a file is an error too:
	// agent.TestBuilderRulesAreReportedByValidate.
}

// TestNoFalseWarnings: a keyword on a structured completion is read (a
// second way to declare), and a Go validator returns its own params, so
// neither is reported.
func TestNoFalseWarnings(t *testing.T) {
	a, r := baseAgent(), baseRegistry()
	at(a, "runner")["completion"] = map[string]any{"type": "structured", "keyword": "DONE", "validators": []any{"out-exists"}}
	r["completionPatterns"].(map[string]any)["custom-failed"] = map[string]any{"description": "x", "edition": "failed", "adaptation": "custom", "params": []any{"detail"}}
	r["validators"].(map[string]any)["mine"] = map[string]any{"type": "custom", "handler": "mine", "failurePattern": "custom-failed"}
	at(r, "steps", "review.main")["completionConditions"] = []any{map[string]any{"validator": "mine"}}
	dir := writeAgent(t, a, r, nil)
	os.WriteFile(filepath.Join(dir, "prompts/system.md"), []byte("You are a test agent."), 0o644)
	for _, p := range Check(dir, testOpts).Problems() {
		if p.Code == "AC-IGNORED-FIELD" || p.Code == "SR-PATTERN-PARAM" {
			t.Errorf("false problem: %s", p)
		}
	}
}

// A runner.baseUrl that is not a URL may be a key given in the wrong
// place: AC-BASE-URL does not quote it.
func TestBaseURLProblemDoesNotQuoteTheValue(t *testing.T) {
	const key = "sk-ant-api03-notarealkeybutlongenough"
	for _, v := range []string{key, "https://gateway.example/%zz?key=" + key} {
		a, r := baseAgent(), baseRegistry()
		at(a, "runner")["baseUrl"] = v
		dir := writeAgent(t, a, r, map[string]string{"prompts/system.md": "You are a test agent."})
		p := findProblem(t, Check(dir, testOpts), "AC-BASE-URL")
		if strings.Contains(p.String(), key) || strings.Contains(p.Message, key) {
			t.Errorf("baseUrl %q: the problem shows it: %s", v, p)
		}
	}
}

// A parameter whose type is missing or unknown is the schema's error, said
// once with the types to choose from: its default is not also reported as
// uncheckable, with a hint ("write a  value") that names no type.
func TestValidateParameterWithoutAKnownTypeSaysItOnce(t *testing.T) {
	for _, typ := range []any{nil, "strin", 5} {
		a, r := baseAgent(), baseRegistry()
		p := map[string]any{"description": "x", "default": "v"}
		if typ != nil {
			p["type"] = typ
		}
		at(a, "parameters")["mode"] = p
		dir := writeAgent(t, a, r, nil)
		res := Check(dir, testOpts)
		var codes []string
		for _, p := range res.Errors() {
			if strings.HasPrefix(p.Pointer, "/parameters/mode") {
				codes = append(codes, p.Code)
				if p.Code == "PA-DEFAULT-TYPE" {
					t.Errorf("type %v: %s", typ, p)
				}
			}
		}
		if len(codes) == 0 {
			t.Errorf("type %v: no error for the parameter:\n%s", typ, dump(res))
		}
	}
}
