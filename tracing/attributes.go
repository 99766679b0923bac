package tracing

// Attribute keys. gen_ai.* follow the OpenTelemetry GenAI semantic
// conventions; capstan.* are capstan's own. docs/observability.md lists
// which span carries which.
const (
	AttrGenAIOperationName  = "gen_ai.operation.name"
	AttrGenAIProviderName   = "gen_ai.provider.name"
	AttrGenAISystem         = "gen_ai.system" // the older name of gen_ai.provider.name
	AttrGenAIRequestModel   = "gen_ai.request.model"
	AttrGenAIAgentName      = "gen_ai.agent.name"
	AttrGenAIConversationID = "gen_ai.conversation.id"
	AttrGenAIInputTokens    = "gen_ai.usage.input_tokens"
	AttrGenAIOutputTokens   = "gen_ai.usage.output_tokens"
	AttrGenAIFinishReasons  = "gen_ai.response.finish_reasons"
	AttrGenAIToolName       = "gen_ai.tool.name"
	AttrGenAIToolCallID     = "gen_ai.tool.call.id"
	AttrGenAIToolType       = "gen_ai.tool.type"

	AttrErrorType     = "error.type"
	AttrExceptionType = "exception.type"
	AttrHTTPStatus    = "http.response.status_code"

	AttrRunID            = "capstan.run.id"
	AttrAgentName        = "capstan.agent.name"
	AttrCommand          = "capstan.command"
	AttrModel            = "capstan.model"
	AttrResumed          = "capstan.run.resumed"
	AttrResumedFrom      = "capstan.run.resumed_from_iteration"
	AttrSuccess          = "capstan.success"
	AttrCompletionReason = "capstan.completion_reason"
	AttrIterations       = "capstan.iterations"
	AttrCacheReadTokens  = "capstan.usage.cache_read_tokens"
	AttrCacheWriteTokens = "capstan.usage.cache_write_tokens"
	AttrCostUSD          = "capstan.cost_usd"
	AttrErrorRecoverable = "capstan.error.recoverable"
	AttrPipelineStatus   = "capstan.pipeline.status"

	AttrIteration       = "capstan.iteration"
	AttrStep            = "capstan.step"
	AttrOutcomeComplete = "capstan.complete"
	AttrOutcomeStop     = "capstan.stop"

	AttrPromptSource          = "capstan.prompt.source"
	AttrPromptBytes           = "capstan.prompt.bytes"
	AttrTurns                 = "capstan.query.turns"
	AttrTurn                  = "capstan.turn"
	AttrToolCalls             = "capstan.tool_calls"
	AttrResponseBytes         = "capstan.response.bytes"
	AttrStructuredOutputBytes = "capstan.structured_output.bytes"
	AttrSessionRenewed        = "capstan.session.renewed"
	AttrDurationMs            = "capstan.duration_ms"
	AttrAttempt               = "capstan.attempt"
	AttrMaxAttempts           = "capstan.max_attempts"
	AttrDelayMs               = "capstan.delay_ms"

	AttrToolInputBytes  = "capstan.tool.input.bytes"
	AttrToolOutputBytes = "capstan.tool.output.bytes"
	AttrToolIsError     = "capstan.tool.is_error"
	AttrToolDenied      = "capstan.tool.denied"

	AttrValidatorName  = "capstan.validator.name"
	AttrValidatorType  = "capstan.validator.type"
	AttrValidatorValid = "capstan.validator.valid"
	AttrExitCode       = "capstan.validator.exit_code"
	AttrTimedOut       = "capstan.validator.timed_out"
	AttrTruncated      = "capstan.validator.truncated"
	AttrPattern        = "capstan.failure_pattern"

	AttrRetryKind        = "capstan.retry.kind"
	AttrDeclared         = "capstan.completion.declared"
	AttrStepFrom         = "capstan.step.from"
	AttrStepTo           = "capstan.step.to"
	AttrStepKind         = "capstan.step.kind"
	AttrStepPassed       = "capstan.step.passed"
	AttrStepAborted      = "capstan.step.aborted"
	AttrEscalateTo       = "capstan.escalation.to"
	AttrEscalationMethod = "capstan.escalation.method"
	AttrWarningMessage   = "capstan.warning.message"

	AttrSkillStep       = "capstan.skill.step"
	AttrSkillTokens     = "capstan.skill.tokens"
	AttrSkillCached     = "capstan.skill.cached"
	AttrSkillDisclosure = "capstan.skill.disclosure"

	AttrStageAgent       = "capstan.pipeline.stage.agent"
	AttrStageStatus      = "capstan.pipeline.stage.status"
	AttrStageKeysWritten = "capstan.pipeline.stage.keys_written"
)
