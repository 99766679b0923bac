package tracing

import (
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/capstan-dev/capstan/event"
)

// runStartEvent holds the run.start fields that are traced (agent runs,
// skill runs and pipeline runs all journal one).
type runStartEvent struct {
	RunID     string `json:"runId"`
	Agent     string `json:"agent"`
	Model     string `json:"model"`
	Resumed   bool   `json:"resumed"`
	Iteration int    `json:"iteration"`
	Command   string `json:"command"`
}

func (e *Emitter) runStart(data any, now time.Time) {
	ev, _ := decode[runStartEvent](data)
	e.endAll(now) // a second run.start (should not happen) starts afresh
	e.provider, e.model = splitModel(ev.Model)
	attrs := e.buf[:0]
	if ev.RunID != "" {
		attrs = append(attrs, attribute.String(AttrRunID, ev.RunID))
	}
	if ev.Agent != "" {
		attrs = append(attrs, attribute.String(AttrAgentName, ev.Agent), attribute.String(AttrGenAIAgentName, ev.Agent))
	}
	if ev.Command != "" {
		attrs = append(attrs, attribute.String(AttrCommand, ev.Command))
	}
	if ev.Model != "" {
		attrs = append(attrs, attribute.String(AttrModel, ev.Model), attribute.String(AttrGenAIRequestModel, e.model))
		if e.provider != "" {
			attrs = append(attrs, attribute.String(AttrGenAIProviderName, e.provider))
		}
	}
	if ev.Resumed {
		attrs = append(attrs, attribute.Bool(AttrResumed, true), attribute.Int(AttrResumedFrom, ev.Iteration))
	}
	e.run = e.start(e.parent, SpanRun, trace.SpanKindInternal, now, false, attrs)
}

// runEndEvent holds the traced fields of run.end (an agent Result, or a
// pipeline run's summary).
type runEndEvent struct {
	Success          bool        `json:"success"`
	CompletionReason string      `json:"completionReason"`
	Iterations       int         `json:"iterations"`
	Usage            event.Usage `json:"usage"`
	CostUSD          float64     `json:"cost"`
	Status           string      `json:"status"`
	Error            json.RawMessage
	ErrorCode        string `json:"errorCode"` // a pipeline run's error code
}

func (e *Emitter) runEnd(data any, now time.Time) {
	if e.run.span == nil {
		e.endAll(now)
		return
	}
	ev, ok := decode[runEndEvent](data)
	if ok {
		s := e.run.span
		attrs := append(e.buf[:0], attribute.Bool(AttrSuccess, ev.Success))
		if ev.CompletionReason != "" {
			attrs = append(attrs, attribute.String(AttrCompletionReason, ev.CompletionReason),
				attribute.Int(AttrIterations, ev.Iterations),
				attribute.Int64(AttrGenAIInputTokens, ev.Usage.InputTokens),
				attribute.Int64(AttrGenAIOutputTokens, ev.Usage.OutputTokens),
				attribute.Int64(AttrCacheReadTokens, ev.Usage.CacheReadTokens),
				attribute.Int64(AttrCacheWriteTokens, ev.Usage.CacheWriteTokens),
				attribute.Float64(AttrCostUSD, ev.CostUSD))
		}
		if ev.Status != "" {
			attrs = append(attrs, attribute.String(AttrPipelineStatus, ev.Status))
		}
		e.setAttrs(s, attrs)
		if code, recoverable, isErr := codedError(ev.Error); isErr {
			if code == "ERROR" && ev.ErrorCode != "" {
				code = ev.ErrorCode
			}
			setError(s, code, recoverable)
		} else if ev.Success {
			s.SetStatus(codes.Ok, "")
		} else {
			s.SetStatus(codes.Error, ev.CompletionReason)
		}
	}
	e.endAll(now)
}

// codedError reads the error of a run.end: an object {code, recoverable}
// (agent Result) or a bare message (pipeline run), which is not exported.
func codedError(raw json.RawMessage) (code string, recoverable, isErr bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, false
	}
	var ce struct {
		Code        string `json:"code"`
		Recoverable bool   `json:"recoverable"`
	}
	if json.Unmarshal(raw, &ce) == nil && ce.Code != "" {
		return ce.Code, ce.Recoverable, true
	}
	return "ERROR", false, true
}

// setError marks s failed with a coded error. The code is the description:
// the message stays in the journal.
func setError(s trace.Span, code string, recoverable bool) {
	s.SetStatus(codes.Error, code)
	s.SetAttributes(attribute.String(AttrErrorType, code), attribute.Bool(AttrErrorRecoverable, recoverable))
}

func (e *Emitter) iterationStart(now time.Time) {
	e.query.end(e.endAt(now)...)
	e.iter.end(e.endAt(now)...)
	parent := e.parent
	if e.run.span != nil {
		parent = e.run.ctx
	}
	attrs := append(e.buf[:0], attribute.Int(AttrIteration, e.iteration))
	if e.step != "" {
		attrs = append(attrs, attribute.String(AttrStep, e.step))
	}
	e.iter = e.start(parent, SpanIteration, trace.SpanKindInternal, now, false, attrs)
}

func (e *Emitter) iterationEnd(data any, now time.Time) {
	e.query.end(e.endAt(now)...)
	if e.iter.span == nil {
		return
	}
	if ev, ok := decode[event.IterationEvent](data); ok {
		attrs := append(e.buf[:0], attribute.Bool(AttrOutcomeComplete, ev.Outcome.Complete), attribute.Bool(AttrOutcomeStop, ev.Outcome.Stop))
		if s := ev.Summary; s != nil {
			attrs = append(attrs,
				attribute.Int64(AttrGenAIInputTokens, s.Usage.InputTokens),
				attribute.Int64(AttrGenAIOutputTokens, s.Usage.OutputTokens),
				attribute.Float64(AttrCostUSD, s.CostUSD),
				attribute.Int(AttrToolCalls, len(s.ToolsUsed)))
			if s.StepID != "" {
				attrs = append(attrs, attribute.String(AttrStep, s.StepID))
			}
		}
		e.setAttrs(e.iter.span, attrs)
	}
	e.iter.end(e.endAt(now)...)
}

func (e *Emitter) queryStart(data any, now time.Time) {
	e.query.end(e.endAt(now)...)
	ev, _ := decode[event.QueryStartEvent](data)
	provider, model := e.provider, e.model
	if ev.Model != "" {
		provider, model = splitModel(ev.Model)
	}
	parent := e.innermost()
	name := "chat"
	if model != "" {
		name = e.spanName("chat ", model)
	}
	attrs := append(e.buf[:0], attribute.String(AttrGenAIOperationName, "chat"))
	if provider != "" {
		attrs = append(attrs, attribute.String(AttrGenAIProviderName, provider), attribute.String(AttrGenAISystem, provider))
	}
	if model != "" {
		attrs = append(attrs, attribute.String(AttrGenAIRequestModel, model))
	}
	if ev.SessionID != "" {
		attrs = append(attrs, attribute.String(AttrGenAIConversationID, ev.SessionID))
	}
	if ev.Source != "" {
		attrs = append(attrs, attribute.String(AttrPromptSource, ev.Source))
	}
	e.query = e.start(parent, name, trace.SpanKindClient, now, false, attrs)
}

func (e *Emitter) queryResult(data any, now time.Time) {
	if e.query.span == nil {
		return
	}
	if qr, ok := decode[event.QueryResult](data); ok {
		n := 0
		for _, r := range qr.Responses {
			n += len(r)
		}
		attrs := append(e.buf[:0], attribute.Int64(AttrGenAIInputTokens, qr.Usage.InputTokens),
			attribute.Int64(AttrGenAIOutputTokens, qr.Usage.OutputTokens),
			attribute.Int64(AttrCacheReadTokens, qr.Usage.CacheReadTokens),
			attribute.Int64(AttrCacheWriteTokens, qr.Usage.CacheWriteTokens),
			attribute.Int(AttrTurns, qr.Turns),
			attribute.Int(AttrToolCalls, len(qr.ToolUses)),
			attribute.Int(AttrResponseBytes, n),
			attribute.Int(AttrStructuredOutputBytes, len(qr.StructuredOutput)),
		)
		if qr.SessionID != "" {
			attrs = append(attrs, attribute.String(AttrGenAIConversationID, qr.SessionID))
		}
		if qr.StopReason != "" {
			attrs = append(attrs, e.finishReasons(qr.StopReason))
		}
		if qr.CostUSD != 0 {
			attrs = append(attrs, attribute.Float64(AttrCostUSD, qr.CostUSD))
		}
		if qr.SessionRenewed {
			attrs = append(attrs, attribute.Bool(AttrSessionRenewed, true))
		}
		e.setAttrs(e.query.span, attrs)
	}
	e.query.end(e.endAt(now)...)
}

func (e *Emitter) modelTurn(data any, now time.Time) {
	ev, ok := decode[event.ModelTurnEvent](data)
	if !ok {
		return
	}
	attrs := append(e.buf[:0], attribute.Int(AttrTurn, ev.Turn), attribute.Int(AttrToolCalls, ev.ToolCalls),
		attribute.Int64(AttrGenAIInputTokens, ev.Usage.InputTokens), attribute.Int64(AttrGenAIOutputTokens, ev.Usage.OutputTokens),
		attribute.Int64(AttrDurationMs, ev.DurationMs))
	if ev.StopReason != "" {
		attrs = append(attrs, e.finishReasons(ev.StopReason))
	}
	e.event(e.innermostSpan(), string(event.KindModelTurn), now, attrs)
}

func (e *Emitter) modelRetry(data any, now time.Time) {
	ev, ok := decode[event.RetryEvent](data)
	if !ok {
		return
	}
	attrs := append(e.buf[:0], attribute.String(AttrGenAIProviderName, ev.Provider), attribute.Int(AttrAttempt, ev.Attempt),
		attribute.Int64(AttrDelayMs, ev.DelayMs), attribute.String(AttrErrorType, ev.Code))
	if ev.Status != 0 {
		attrs = append(attrs, attribute.Int(AttrHTTPStatus, ev.Status))
	}
	e.event(e.innermostSpan(), string(event.KindModelRetry), now, attrs)
}

func (e *Emitter) toolCall(kind event.Kind, data any, now time.Time) {
	use, ok := decode[event.ToolUse](data)
	if !ok {
		return
	}
	denied := use.Denied || kind == event.KindToolDenied
	began := now.Add(-time.Duration(use.DurationMs) * time.Millisecond)
	attrs := append(e.buf[:0], attribute.String(AttrGenAIOperationName, "execute_tool"),
		attribute.String(AttrGenAIToolName, use.Name), attribute.String(AttrGenAIToolType, "function"),
		attribute.Int(AttrToolInputBytes, len(use.Input)), attribute.Int(AttrToolOutputBytes, len(use.Output)),
		attribute.Bool(AttrToolIsError, use.IsError), attribute.Bool(AttrToolDenied, denied))
	if use.ID != "" {
		attrs = append(attrs, attribute.String(AttrGenAIToolCallID, use.ID))
	}
	sp := e.start(e.innermost(), e.spanName("execute_tool ", use.Name), trace.SpanKindInternal, began, true, attrs)
	switch {
	case denied:
		sp.span.SetStatus(codes.Error, "denied")
		sp.span.SetAttributes(attribute.String(AttrErrorType, "tool_denied"))
	case use.IsError:
		sp.span.SetStatus(codes.Error, "tool error")
		sp.span.SetAttributes(attribute.String(AttrErrorType, "tool_error"))
	}
	sp.end(trace.WithTimestamp(now)) // explicit: the start was back-dated
}

func (e *Emitter) validator(data any, now time.Time) {
	ev, ok := decode[event.ValidatorEvent](data)
	if !ok {
		return
	}
	began := now.Add(-time.Duration(ev.DurationMs) * time.Millisecond)
	attrs := append(e.buf[:0], attribute.String(AttrValidatorName, ev.Validator), attribute.String(AttrValidatorType, ev.Type),
		attribute.Bool(AttrValidatorValid, ev.Valid), attribute.Int(AttrExitCode, ev.ExitCode))
	if ev.Pattern != "" {
		attrs = append(attrs, attribute.String(AttrPattern, ev.Pattern))
	}
	if ev.TimedOut {
		attrs = append(attrs, attribute.Bool(AttrTimedOut, true))
	}
	if ev.Truncated {
		attrs = append(attrs, attribute.Bool(AttrTruncated, true))
	}
	sp := e.start(e.innermost(), e.spanName("validator ", ev.Validator), trace.SpanKindInternal, began, true, attrs)
	if !ev.Valid {
		desc := "invalid"
		if ev.Pattern != "" {
			desc += ": " + ev.Pattern
		}
		sp.span.SetStatus(codes.Error, desc)
	}
	sp.end(trace.WithTimestamp(now)) // explicit: the start was back-dated
}

// skillEvidence maps one tool call of a skill's Act loop (capstan skills
// run) to an execute_tool span. Its reason, inputs digest, diff, files and
// errors are not exported.
func (e *Emitter) skillEvidence(data any, now time.Time) {
	ev, ok := decode[event.SkillEvidence](data)
	if !ok {
		return
	}
	began := now.Add(-time.Duration(ev.Cost.TimeMs) * time.Millisecond)
	attrs := append(e.buf[:0], attribute.String(AttrGenAIOperationName, "execute_tool"),
		attribute.String(AttrGenAIToolName, ev.Tool), attribute.String(AttrGenAIToolType, "function"),
		attribute.Bool(AttrToolIsError, !ev.OK), attribute.Int(AttrSkillStep, ev.Step), attribute.Int64(AttrSkillTokens, ev.Cost.Tokens))
	if ev.Cached {
		attrs = append(attrs, attribute.Bool(AttrSkillCached, true))
	}
	if ev.Disclosure != "" {
		attrs = append(attrs, attribute.String(AttrSkillDisclosure, ev.Disclosure))
	}
	sp := e.start(e.innermost(), e.spanName("execute_tool ", ev.Tool), trace.SpanKindInternal, began, true, attrs)
	if !ev.OK {
		sp.span.SetStatus(codes.Error, "tool error")
		sp.span.SetAttributes(attribute.String(AttrErrorType, "tool_error"))
	}
	sp.end(trace.WithTimestamp(now)) // explicit: the start was back-dated
}

func (e *Emitter) retryPrompt(data any, now time.Time) {
	ev, ok := decode[event.RetryPromptEvent](data)
	if !ok {
		return
	}
	attrs := append(e.buf[:0], attribute.String(AttrRetryKind, ev.Kind), attribute.String(AttrStep, ev.Step),
		attribute.Int(AttrAttempt, ev.Attempt), attribute.Int(AttrMaxAttempts, ev.Max), attribute.Int(AttrPromptBytes, len(ev.Text)))
	if ev.Pattern != "" {
		attrs = append(attrs, attribute.String(AttrPattern, ev.Pattern))
	}
	if ev.Validator != "" {
		attrs = append(attrs, attribute.String(AttrValidatorName, ev.Validator))
	}
	if ev.Source != "" {
		attrs = append(attrs, attribute.String(AttrPromptSource, ev.Source))
	}
	e.event(e.innermostSpan(), string(event.KindRetryPrompt), now, attrs)
}

func (e *Emitter) stepTransition(data any, now time.Time) {
	mv, ok := decode[event.StepMove](data)
	if !ok {
		return
	}
	attrs := append(e.buf[:0], attribute.String(AttrStepFrom, mv.From), attribute.String(AttrStepTo, mv.To),
		attribute.String(AttrStepKind, mv.Kind), attribute.Bool(AttrStepPassed, mv.Passed))
	if mv.Complete {
		attrs = append(attrs, attribute.Bool(AttrOutcomeComplete, true))
	}
	if mv.Aborted {
		attrs = append(attrs, attribute.Bool(AttrStepAborted, true))
	}
	e.event(e.innermostSpan(), string(event.KindStepTransition), now, attrs)
}

// completionCheck is what a span records of a completion.check event:
// whether the run was complete, whether the model declared it, and the
// validator that decided it. It is read from the event's journal form,
// once per iteration.
type completionCheck struct {
	Complete   bool `json:"complete"`
	Declared   bool `json:"declared"`
	Validation *struct {
		Validator string `json:"validator"`
		Pattern   string `json:"pattern"`
	} `json:"validation"`
}

func (e *Emitter) completionCheck(data any, now time.Time) {
	r, ok := decodeJSON[completionCheck](data)
	if !ok {
		return
	}
	attrs := append(e.buf[:0], attribute.Bool(AttrOutcomeComplete, r.Complete), attribute.Bool(AttrDeclared, r.Declared))
	if v := r.Validation; v != nil {
		attrs = append(attrs, attribute.String(AttrValidatorName, v.Validator), attribute.String(AttrPattern, v.Pattern))
	}
	e.event(e.innermostSpan(), string(event.KindCompletionCheck), now, attrs)
}

func (e *Emitter) escalation(data any, now time.Time) {
	ev, ok := decode[event.EscalationEvent](data)
	if !ok {
		return
	}
	e.event(e.innermostSpan(), string(event.KindEscalation), now, append(e.buf[:0],
		attribute.String(AttrStep, ev.Step), attribute.String(AttrEscalateTo, ev.EscalateTo), attribute.String(AttrEscalationMethod, ev.Method)))
}

// warningMessage is the message of a warning event.
func warningMessage(data any) string {
	ev, _ := decode[event.WarningEvent](data)
	return ev.Message
}

func (e *Emitter) warning(data any, now time.Time) {
	msg := warningMessage(data)
	if e.redact != nil {
		msg = e.redact.Replace(msg)
	}
	if len(msg) > maxWarning {
		cut := maxWarning
		for cut > 0 && msg[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		msg = msg[:cut] + "…"
	}
	e.event(e.innermostSpan(), string(event.KindWarning), now, append(e.buf[:0], attribute.String(AttrWarningMessage, msg)))
}

// error marks the open query (or the iteration) failed and the iteration
// with it. The message is not exported: errors can quote prompts.
func (e *Emitter) error(data any, now time.Time) {
	ev, _ := decode[event.ErrorEvent](data)
	code := ev.Code
	if code == "" {
		code = "ERROR"
	}
	s := e.innermostSpan()
	e.event(s, "exception", now, append(e.buf[:0],
		attribute.String(AttrExceptionType, code), attribute.Bool(AttrErrorRecoverable, ev.Recoverable)))
	setError(s, code, ev.Recoverable)
	if e.query.span != nil {
		e.query.end(e.endAt(now)...)
		if e.iter.span != nil {
			setError(e.iter.span, code, ev.Recoverable)
		}
	}
}

// stageEvent holds the traced fields of pipeline.stage (once per stage, so
// read through JSON). duration_ms has a fractional part.
type stageEvent struct {
	AgentID     string   `json:"agent_id"`
	Status      string   `json:"status"`
	Attempts    int      `json:"attempts"`
	KeysWritten []string `json:"keys_written"`
	DurationMs  float64  `json:"duration_ms"`
	Error       string   `json:"error"`
}

func (e *Emitter) pipelineStage(data any, now time.Time) {
	ev, ok := decode[stageEvent](data)
	if !ok {
		return
	}
	began := now.Add(-time.Duration(ev.DurationMs * float64(time.Millisecond)))
	sp := e.start(e.innermost(), "pipeline.stage "+ev.AgentID, trace.SpanKindInternal, began, true, append(e.buf[:0],
		attribute.String(AttrStageAgent, ev.AgentID), attribute.String(AttrStageStatus, ev.Status),
		attribute.Int(AttrAttempt, ev.Attempts), attribute.Int(AttrStageKeysWritten, len(ev.KeysWritten))))
	if ev.Error != "" || (ev.Status != "" && ev.Status != "succeeded" && ev.Status != "skipped") {
		sp.span.SetStatus(codes.Error, ev.Status)
	}
	sp.end(trace.WithTimestamp(now)) // explicit: the start was back-dated
}

func (e *Emitter) pipelineViolation(data any, now time.Time) {
	ev, _ := decode[map[string]any](data)
	attrs := e.buf[:0]
	for _, k := range []string{"agent_id", "kind", "key", "code"} {
		if v, ok := ev[k].(string); ok {
			attrs = append(attrs, attribute.String("capstan.pipeline.violation."+k, v))
		}
	}
	e.event(e.innermostSpan(), string(event.KindPipelineViolation), now, attrs)
}
