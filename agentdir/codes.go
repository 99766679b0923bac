package agentdir

import "github.com/capstan-dev/capstan/agenterr"

// CodeInfo documents one problem code of Validate.
type CodeInfo struct {
	Code     string
	Severity Severity
	Summary  string
}

// Codes lists every code a Problem can carry, in documentation order.
// AC-* codes are about agent.json, SR-* about steps_registry.json, PA-*
// about parameters and the {uv-x} variables they supply; CONFIG_* codes are
// load failures reported by `capstan validate` as problems. Codes are
// stable: their meaning never changes.
func Codes() []CodeInfo {
	var codes []CodeInfo
	for _, group := range [][]CodeInfo{loadCodes(), agentCodes(), parameterCodes(), registryCodes(), registryFileCodes()} {
		codes = append(codes, group...)
	}
	return codes
}

// loadCodes are the load failures `capstan validate` reports as problems.
func loadCodes() []CodeInfo {
	e := SeverityError
	return []CodeInfo{
		{agenterr.CodeConfigurationNotFound, e, "agent.json or the steps registry does not exist"},
		{agenterr.CodeConfigurationParse, e, "a file is not valid JSON (or not a readable regular file)"},
		{agenterr.CodeConfigurationValidation, e, "runner.prompts.registry leaves the agent folder"},
		{agenterr.CodeDefinitionTooLarge, e, "the agent definition exceeds the bounds of a snapshot (file size, total size, file count)"},
		{agenterr.CodePathEscape, e, "a file of the agent definition leads out of its folder through a symbolic link"},
	}
}

// agentCodes are the problems of agent.json.
func agentCodes() []CodeInfo {
	e, w := SeverityError, SeverityWarning
	return []CodeInfo{
		{"AC-SCHEMA-TYPE", e, "agent.json: a value has the wrong JSON type"},
		{"AC-SCHEMA-REQUIRED", e, "agent.json: a required key is missing"},
		{"AC-SCHEMA-ENUM", e, "agent.json: a value is not one of the allowed values"},
		{"AC-SCHEMA-VALUE", e, "agent.json: a value breaks a schema constraint (pattern, minimum, …)"},
		{"AC-UNKNOWN-KEY", w, "agent.json: a key capstan does not know (ignored)"},
		{"AC-DUPLICATE-KEY", w, "agent.json: a key appears twice in one object"},
		{"AC-MODEL-SYNTAX", e, "runner.model is not provider:model"},
		{"AC-MODEL-PROVIDER", e, "runner.model names a provider this binary does not have"},
		{"AC-MODEL-SCRIPT", e, "the script file of a script:<file> model does not exist"},
		{"AC-BASE-URL", e, "runner.baseUrl is not an absolute http(s) URL, or carries a key (user info, query or fragment)"},
		{"AC-TOOL-PATTERN", e, "an allowedTools/disallowedTools pattern is malformed"},
		{"AC-COMPACTION-TARGET", e, "runner.compaction.target is not below its threshold"},
		{"AC-COMPACTION-IGNORED", w, "runner.contextWindow / runner.compaction set for the claude-code backend, which compacts by itself"},
		{"AC-REQUESTS-IGNORED", w, "runner.requests set for the claude-code backend, whose CLI makes its own requests"},
		{"AC-IDEMPOTENT-IGNORED", w, "an MCP server declared idempotent for the claude-code backend, whose CLI runs the MCP calls outside the tool-effect ledger"},
		{"AC-TOOL-CALLS-IGNORED", w, "runner.boundaries.maxToolCallsPerTurn set for the claude-code backend, whose CLI runs the tools"},
		{"AC-GITHUB-DISABLED", w, "runner.integrations.github sets defaultClosureAction or labels.completion but enabled is false"},
		{"AC-GITHUB-NO-ISSUE", w, "runner.integrations.github is enabled but the agent has no issue parameter to act on"},
		{"AC-GITHUB-LABELS-INERT", w, "runner.integrations.github.labels names labels other than completion, which capstan does not apply"},
		{"AC-PROTECT-GLOB", e, "a runner.verification.protect glob is malformed or not relative"},
		{"AC-HIDDEN-GLOB", e, "a runner.verification.hidden glob is malformed or leaves the agent folder"},
		{"AC-HIDDEN-MISSING", e, "a runner.verification.hidden glob matches no file of the agent folder"},
		{"AC-HIDDEN-INERT", e, "runner.verification.hidden is set but no command validator runs tests"},
		{"AC-TESTCHANGES-HIDDEN", e, "runner.verification.testChanges is hiddenTests but the agent has no hidden tests"},
		{"AC-PATH-OUTSIDE", e, "a path in agent.json is absolute or leaves the agent folder"},
		{"AC-SYSTEM-PROMPT-MISSING", e, "runner.systemPromptPath does not exist"},
		{"AC-PROMPTS-DIR-MISSING", e, "the prompts base (or fallbackDir) folder does not exist"},
		{"AC-SKILL-MISSING", e, "a runner.skills folder does not exist or holds no SKILL.md"},
		{"AC-COMPLETION-MAX-ITERATIONS", e, "completion iterationBudget without maxIterations > 0"},
		{"AC-COMPLETION-KEYWORD", e, "completion keyword without a keyword"},
		{"AC-COMPLETION-MODE", e, "completion composite without mode"},
		{"AC-COMPLETION-CONDITIONS", e, "completion composite without conditions"},
		{"AC-COMPLETION-NAME", e, "two conditions of one composite have the same name"},
		{"AC-COMPLETION-HANDLER", e, "completion custom without handler"},
		{"AC-COMPLETION-VALIDATOR", e, "completion.validators names a validator that does not exist"},
		{"AC-IGNORED-FIELD", e, "a completion field the completion type does not use"},
		{"AC-MCP-TRANSPORT", e, "an MCP server sets both or neither of command and url"},
		{"AC-BUDGET-HARD-LIMIT", w, "an iteration budget above the loop's hard limit (100): the run stops at 100 with emergency_stop"},
		{"AC-SPELLING-CONFLICT", e, "a climpt spelling (runner.flow.*, runner.verdict) and capstan's field are both set and differ"},
		{"AC-CLIMPT-INERT", w, "a climpt setting capstan does not act on (actions, execution, logging, config.json, …)"},
		{"AC-VERDICT-UNSUPPORTED", e, "a climpt verdict setting that cannot work in capstan (meta:custom module, poll:state resource other than an issue, nested meta:*)"},
		{"AC-VERDICT-ISSUE-PARAM", e, "poll:state names an issue parameter that does not exist"},
		{"AC-SANDBOX-UNSUPPORTED", e, "climpt's sandbox settings capstan's sandbox cannot enforce (a network mode without trustedDomains, extra writable paths, exempt commands)"},
		{"AC-SANDBOX-NETWORK", e, "a runner.boundaries.sandbox.network allow entry is not host:port, a trustedDomains entry is a wildcard or not a host, or either contradicts \"mode\": \"none\""},
		{"AC-SANDBOX-NETWORK-INERT", w, "runner.boundaries.sandbox.network is set while the sandbox is off (\"enabled\": false): it does nothing"},
		{"AC-VERDICT-FIELD", e, "a climpt verdict lacks a field its type needs, or detect:graph names another registry"},
	}
}

// parameterCodes are the problems of parameters and the {uv-x} variables
// they supply.
func parameterCodes() []CodeInfo {
	e, w := SeverityError, SeverityWarning
	return []CodeInfo{
		{"PA-NAME", e, "a parameter name is not lowercase letters, digits, _ and -"},
		{"PA-CLI-SYNTAX", e, "an explicit cli flag is not --lowercase-name"},
		{"PA-CLI-DUPLICATE", e, "two parameters use the same flag"},
		{"PA-CLI-RESERVED", e, "a parameter's flag clashes with a capstan run flag"},
		{"PA-DEFAULT-TYPE", e, "a default does not match the parameter type"},
		{"PA-DEFAULT-INVALID", e, "a default fails the parameter's validation"},
		{"PA-REQUIRED-DEFAULT", w, "a required parameter has a default (never used)"},
		{"PA-VALIDATION", e, "a validation rule is malformed or does not fit the type"},
		{"PA-UV-UNSUPPLIED", e, "a step's uvVariables names a variable no parameter supplies"},
		{"PA-UV-OPTIONAL", w, "a step needs a variable whose parameter is optional without default (the run requires the flag)"},
	}
}

// registryCodes are the problems of the steps registry.
func registryCodes() []CodeInfo {
	e, w := SeverityError, SeverityWarning
	return []CodeInfo{
		{"SR-SCHEMA-TYPE", e, "steps registry: a value has the wrong JSON type"},
		{"SR-SCHEMA-REQUIRED", e, "steps registry: a required key is missing"},
		{"SR-SCHEMA-ENUM", e, "steps registry: a value is not one of the allowed values"},
		{"SR-SCHEMA-VALUE", e, "steps registry: a value breaks a schema constraint (pattern, minimum, …)"},
		{"SR-UNKNOWN-KEY", w, "steps registry: a key capstan does not know (ignored)"},
		{"SR-DUPLICATE-KEY", w, "steps registry: a key appears twice in one object"},
		{"SR-AGENT-ID", w, "agentId differs from agent.json name"},
		{"SR-ENTRY-STEP", e, "entryStep (or an entryStepMapping target) is not a step, or no entry is set for the verdict type"},
		{"SR-ENTRY-STEP-OVERRIDDEN", w, "entryStep is unused: entryStepMapping has an entry for the verdict type"},
		{"SR-ENTRY-MAPPING-KEY", w, "an entryStepMapping key is not a verdict type"},
		{"SR-SPELLING-CONFLICT", e, "a failure pattern is defined differently under failurePatterns and completionPatterns"},
		{"SR-PATH-TEMPLATE", e, "pathTemplate / pathTemplateNoAdaptation is not capstan's fixed prompt layout"},
		{"SR-STDIN-UNSUPPORTED", e, "a step sets usesStdin: true"},
		{"SR-CLIMPT-INERT", w, "a climpt step field no runner reads (condition, priority)"},
		{"SR-STEP-ID", e, "a step's stepId differs from its key"},
		{"SR-STEP-PROMPT", e, "a prompt-running step has no c2/c3"},
		{"SR-GATEWAY-CHECK", e, "a gateway step has no check to route by"},
		{"SR-STEP-UNREACHABLE", w, "no transition from entryStep reaches a step"},
		{"SR-MODEL-SYNTAX", e, "a step's model is not provider:model"},
		{"SR-MODEL-PROVIDER", e, "a step's model names an unknown provider"},
		{"SR-MODEL-SCRIPT", e, "the script file of a step's script:<file> model does not exist"},
		{"SR-CHECK-FIELD", e, "a check lacks the field its type needs (keywords, actions, prompt)"},
		{"SR-TRANSITION-AMBIGUOUS", e, "onPass/onFail does not set exactly one of next, complete, retry, escalate"},
		{"SR-TRANSITION-TARGET", e, "onPass/onFail.next is not a step"},
		{"SR-TRANSITION-ESCALATE", e, "a transition escalates but the step has no escalation"},
		{"SR-RETRY-FALLBACK", e, "onExhausted fallback without fallbackStep"},
		{"SR-RETRY-FALLBACK-TARGET", e, "fallbackStep is not a step"},
		{"SR-ESCALATE-TARGET", e, "escalateTo is not a step (notificationMethod in_agent)"},
		{"SR-ESCALATE-WEBHOOK", e, "notificationMethod webhook without an http(s) webhookUrl"},
		{"SR-SUBSTEP-MISSING", e, "a subSteps entry is not a step"},
		{"SR-SUBSTEP-PARALLEL", e, "sequential is false (parallel sub-steps are out of scope)"},
		{"SR-SUBSTEP-CYCLE", e, "a step contains itself through subSteps"},
		{"SR-SUBSTEP-ORPHAN", w, "a step of type subStep is in no step's subSteps"},
		{"SR-CONDITION-VALIDATOR", e, "a completionConditions validator does not exist"},
		{"SR-VALIDATOR-FIELD", e, "a validator lacks the field its type needs (command, path, handler)"},
		{"SR-VALIDATOR-UNUSED", w, "a validator is referenced nowhere, so it never runs"},
		{"SR-PROTECT-GLOB", e, "a step's protect glob is malformed or not relative"},
		{"SR-RUNNER-COMMAND", e, "a subprocess step's runner.command is empty"},
		{"SR-RUNNER-GATEWAY", e, "a gateway step has a runner"},
		{"SR-RUNNER-CONTEXT", e, "a subprocess step's ${context.NAME} names no parameter"},
		{"SR-RUNNER-CONTEXT-OPTIONAL", w, "a subprocess step's ${context.NAME} names an optional parameter without default"},
		{"SR-TESTS-UNPROTECTED", w, "a command validator runs tests but runner.verification.protect is empty"},
		{"SR-TESTS-NOT-VERBOSE", w, "a command validator runs go test, pytest, unittest, jest or vitest without the flag that lists each test"},
		{"SR-SUCCESS-WHEN", e, "successWhen is not empty, exitCode:N, contains:TEXT or matches:REGEXP"},
		{"SR-PATTERN-UNKNOWN", e, "a failurePattern is neither in completionPatterns nor built in"},
		{"SR-PATTERN-PARAM", w, "a failure pattern's param is not extracted by a validator using it"},
		{"SR-PATTERN-UNUSED", w, "a completion pattern is no validator's failurePattern"},
		{"SR-EXTRACTOR-UNKNOWN", e, "an extractParams extractor does not exist"},
		{"SR-SCHEMA-FILE", e, "an outputSchemaRef/schema file does not exist under schemas/"},
		{"SR-PATH-OUTSIDE", e, "a path in the registry is absolute or leaves its folder"},
		{"SR-IGNORED-FIELD", e, "a field that has no effect in its context"},
		{"SR-INERT-FIELD", w, "a field accepted for compatibility that has no effect (targetMode, fallbackIntent with failFast, …)"},
		{"SR-GATE-CHECK", e, "a step routes both by a check and by a structuredGate, or a gateway/subStep has a structuredGate"},
		{"SR-GATE-SCHEMA", e, "a step with a structuredGate has no outputSchemaRef"},
		{"SR-GATE-FIELD", e, "a structuredGate lacks intentField, a #/ intentSchemaRef, allowedIntents, or the targetField a jump needs"},
		{"SR-GATE-INTENT", e, "an allowed or fallback intent is not allowed for the step's kind (or not in allowedIntents)"},
		{"SR-GATE-MISSING", e, "in a registry routed by intent, a flow step has neither structuredGate nor check"},
		{"SR-TRANSITION-INTENT", e, "a transitions key is not an intent, or transitions without a structuredGate"},
		{"SR-TRANSITION-TERMINAL", e, "a null (terminal) target for an intent other than closing, or closing with a target"},
		{"SR-TRANSITION-MISSING", e, "an allowed intent that needs a transition (handoff, escalate, next without continuation step) has none"},
		{"SR-TRANSITION-CONDITION", e, "a conditional transition names no handoff value, or lacks targets"},
		{"SR-INPUT-FROM", e, "a step input's from is not <stepId>.<key> of a step routed by a structuredGate"},
		{"SR-VALIDATION-STEP", w, "a validationSteps entry verifies no closure step, so its conditions never run"},
		{"SR-VALIDATION-DUPLICATE", e, "a step has completionConditions and a validationSteps entry"},
	}
}

// registryFileCodes are the problems of the files the steps registry
// names: prompts, retry prompts and schemas.
func registryFileCodes() []CodeInfo {
	e, w := SeverityError, SeverityWarning
	return []CodeInfo{
		// Contributed by the layers above (ValidateOptions.Checks, see
		// agent.ValidateOptions); tested there.
		{"SR-STEP-PROMPT-MISSING", e, "a step's prompt file is not found through the fallback chain"},
		{"SR-STEP-PROMPT-INVALID", e, "a step's prompt file cannot be used (broken frontmatter, empty, escapes)"},
		{"SR-RETRY-PROMPT-MISSING", e, "a declared failure pattern used by a step has no retry prompt"},
		{"SR-SCHEMA-UNRESOLVED", e, "an outputSchemaRef or validator schema does not resolve"},
		{"SR-SCHEMA-INVALID", e, "a schema an outputSchemaRef or validator schema names is not a valid JSON Schema (reported at the bad keyword in the schema file)"},
		{"SR-RETRY-PROMPT-UV", w, "a retry prompt holds {uv-name} placeholders, which only step prompts substitute; it is sent as written"},
		{"SR-RETRY-PROMPT-GENERIC", w, "a failure pattern a validation step uses has no retry prompt file; the generic prompt is sent"},
		{"SR-GATE-ENUM", e, "the enum at a structuredGate's intentSchemaRef is not exactly its allowedIntents"},
	}
}

// IsKnownCode reports whether code is one of Codes().
func IsKnownCode(code string) bool {
	for _, c := range Codes() {
		if c.Code == code {
			return true
		}
	}
	return false
}
