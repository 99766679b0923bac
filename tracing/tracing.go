// Package tracing turns capstan's run journal into OpenTelemetry spans.
//
// An Emitter sits between the layers that emit journal events and the
// journal writer: it forwards every event to the writer unchanged and
// builds a span tree from the same events — one capstan.run span per run,
// a child per iteration, a "chat <model>" span per query (OpenTelemetry
// GenAI semantic conventions), an "execute_tool <name>" span per tool call,
// a "validator <name>" span per completion validator, and span events for
// model turns, model retries, retry prompts, step transitions, completion
// checks and warnings.
//
// Spans carry names, ids, counts, sizes, durations and outcomes only.
// Prompts, responses, tool inputs and outputs, parameter values and error
// messages are never put in span attributes (error messages can quote a
// prompt); warning messages, the one free text exported, have every
// configured secret value replaced.
//
// The mapping matches the typed values capstan's layers emit directly and
// reads any other value through its journal (JSON) form, so it also
// accepts values that marshal to the documented journal fields
// (docs/journal.md). Events that come once per run or per pipeline stage
// are read through JSON; none that comes every iteration is.
//
// Setup (otelenv.go) decides where the spans go, from the standard OTEL_*
// environment variables: an OTLP/HTTP endpoint, the console, or nowhere.
package tracing

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/llm"
)

// ScopeName is the instrumentation scope of capstan's spans.
const ScopeName = "github.com/capstan-dev/capstan/tracing"

// Span names that do not carry a model, tool or validator name.
const (
	SpanRun       = "capstan.run"
	SpanIteration = "capstan.iteration"
)

// Event types of other layers that the Emitter maps (their packages import
// this one's dependents, so the names are repeated here).
const ()

// maxWarning bounds the length of an exported warning message.
const maxWarning = 256

// Config configures an Emitter.
type Config struct {
	// Provider supplies the tracer. Required.
	Provider trace.TracerProvider
	// Parent is the context the run span is a child of: a remote W3C
	// traceparent or a caller's span (nil = a new trace).
	Parent context.Context
	// Next receives every event unchanged (nil = event.Discard).
	Next event.Emitter
	// Secrets are values that must never be exported; they are replaced
	// in the free text that is (warning messages). Use
	// procenv.SecretValues, which lists them longest first.
	Secrets []string
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// open is a started span and the context that carries it.
type open struct {
	span trace.Span
	ctx  context.Context
}

func (o *open) end(opts ...trace.SpanEndOption) {
	if o.span != nil {
		o.span.End(opts...)
	}
	*o = open{}
}

// Emitter is an event.Emitter that tees: every event goes to Config.Next
// unchanged, and the run's events become spans. It is safe for concurrent
// use.
type Emitter struct {
	next   event.Emitter
	tracer trace.Tracer
	parent context.Context
	redact *strings.Replacer
	now    func() time.Time

	mu        sync.Mutex
	iteration int
	step      string
	provider  string // the run model's provider ("anthropic")
	model     string // the run model's name ("claude-sonnet-4-5")
	run       open
	iter      open
	query     open
	closed    bool

	// Scratch space reused under mu: the SDK copies attributes and does
	// not keep options, so one buffer each serves every span and event.
	realClock bool // Config.Now was nil: the SDK's clock is the same
	buf       []attribute.KeyValue
	sopts     []trace.SpanStartOption
	eopts     []trace.EventOption
	names     map[string]string // span names by prefix+name, built once
	finish    map[string]attribute.KeyValue
}

// New returns an Emitter for one run.
func New(cfg Config) *Emitter {
	e := &Emitter{next: cfg.Next, parent: cfg.Parent, now: cfg.Now}
	if e.next == nil {
		e.next = event.Discard
	}
	if e.parent == nil {
		e.parent = context.Background()
	}
	if e.now == nil {
		e.now = time.Now
		e.realClock = true
	}
	e.tracer = cfg.Provider.Tracer(ScopeName)
	var pairs []string
	for _, s := range cfg.Secrets {
		if s != "" {
			pairs = append(pairs, s, "[redacted]")
		}
	}
	if len(pairs) > 0 {
		e.redact = strings.NewReplacer(pairs...)
	}
	return e
}

// SetPosition forwards the run position to Next (the journal stamps it on
// events) and labels the open iteration span with the step.
func (e *Emitter) SetPosition(iteration int, stepID string) {
	if w, ok := e.next.(interface{ SetPosition(int, string) }); ok {
		w.SetPosition(iteration, stepID)
	}
	e.mu.Lock()
	e.iteration, e.step = iteration, stepID
	if e.iter.span != nil && stepID != "" {
		e.setAttrs(e.iter.span, append(e.buf[:0], attribute.String(AttrStep, stepID)))
	}
	e.mu.Unlock()
}

// RunContext returns ctx carrying the open run span (ctx itself when no
// run span is open), so that work the run starts — a pipeline's agent
// stages — is traced inside it.
func (e *Emitter) RunContext(ctx context.Context) context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.run.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, e.run.span)
}

// Close ends every span still open. A run span still open here belongs to
// a run that never journaled run.end (it stopped on an early error or a
// panic), so it ends with status Error. Later events are forwarded but no
// longer traced. Close is idempotent.
func (e *Emitter) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.run.span != nil {
		e.run.span.SetStatus(codes.Error, "ended without run.end")
	}
	e.endAll(e.now())
	e.closed = true
}

// Emit forwards the event to Next, then maps it to spans.
func (e *Emitter) Emit(p event.Payload) {
	e.next.Emit(p)
	kind := p.EventKind()
	switch kind {
	case event.KindPromptResolved, event.KindSessionMessages, event.KindLifecycle, event.KindStepState:
		return // content or resume state: never traced
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	now := e.now()
	switch kind {
	case event.KindRunStart:
		e.runStart(p, now)
	case event.KindRunEnd:
		e.runEnd(p, now)
	case event.KindIterationStart:
		e.iterationStart(now)
	case event.KindIterationEnd:
		e.iterationEnd(p, now)
	case event.KindQueryStart:
		e.queryStart(p, now)
	case event.KindQueryResult:
		e.queryResult(p, now)
	case event.KindModelTurn:
		e.modelTurn(p, now)
	case event.KindModelRetry:
		e.modelRetry(p, now)
	case event.KindToolCall, event.KindToolDenied:
		e.toolCall(kind, p, now)
	case event.KindValidatorResult:
		e.validator(p, now)
	case event.KindRetryPrompt:
		e.retryPrompt(p, now)
	case event.KindStepTransition:
		e.stepTransition(p, now)
	case event.KindCompletionCheck:
		e.completionCheck(p, now)
	case event.KindEscalation:
		e.escalation(p, now)
	case event.KindWarning:
		e.warning(p, now)
	case event.KindError:
		e.error(p, now)
	case event.KindSkillEvidence:
		e.skillEvidence(p, now)
	case event.KindPipelineStage:
		e.pipelineStage(p, now)
	case event.KindPipelineViolation:
		e.pipelineViolation(p, now)
	}
}

// decode reads an event payload as T: directly when it is a T or *T,
// otherwise through its journal (JSON) form.
func decode[T any](data any) (T, bool) {
	switch d := data.(type) {
	case T:
		return d, true
	case *T:
		if d != nil {
			return *d, true
		}
		var zero T
		return zero, false
	case nil:
		var zero T
		return zero, false
	}
	return decodeJSON[T](data)
}

// decodeJSON is decode's slow path, apart so that the fast path does not
// allocate the value the JSON decoder writes into.
func decodeJSON[T any](data any) (T, bool) {
	var v T
	b, err := json.Marshal(data)
	if err != nil {
		return v, false
	}
	return v, json.Unmarshal(b, &v) == nil
}

// spanName is prefix+name, allocated once per distinct name (tool and
// validator names repeat every iteration).
func (e *Emitter) spanName(prefix, name string) string {
	if n, ok := e.names[prefix+name]; ok { // the key is not allocated
		return n
	}
	n := prefix + name
	if e.names == nil {
		e.names = map[string]string{}
	}
	if len(e.names) < maxNames {
		e.names[n] = n
	}
	return n
}

// finishReasons is the gen_ai.response.finish_reasons attribute of one
// stop reason, built once per distinct reason (a slice value allocates).
func (e *Emitter) finishReasons(reason string) attribute.KeyValue {
	if kv, ok := e.finish[reason]; ok {
		return kv
	}
	kv := attribute.StringSlice(AttrGenAIFinishReasons, []string{reason})
	if e.finish == nil {
		e.finish = map[string]attribute.KeyValue{}
	}
	if len(e.finish) < maxNames {
		e.finish[reason] = kv
	}
	return kv
}

// maxNames bounds the span-name and finish-reason caches.
const maxNames = 256

// innermost is the context of the deepest open span.
func (e *Emitter) innermost() context.Context {
	switch {
	case e.query.span != nil:
		return e.query.ctx
	case e.iter.span != nil:
		return e.iter.ctx
	case e.run.span != nil:
		return e.run.ctx
	}
	return e.parent
}

func (e *Emitter) innermostSpan() trace.Span {
	return trace.SpanFromContext(e.innermost())
}

// start starts a span at time at. With the real clock a span that starts
// now is stamped by the SDK itself (the same instant, without boxing a
// timestamp option per span); a back-dated one (which must then be ended
// with an explicit time too), or any span under a test clock, gets at
// explicitly. attrs is copied by the SDK, so it may be (and usually is)
// the Emitter's scratch buffer.
func (e *Emitter) start(parent context.Context, name string, kind trace.SpanKind, at time.Time, backdated bool, attrs []attribute.KeyValue) open {
	e.sopts = append(e.sopts[:0], trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	if !e.realClock || backdated {
		e.sopts = append(e.sopts, trace.WithTimestamp(at))
	}
	ctx, span := e.tracer.Start(parent, name, e.sopts...)
	e.buf = attrs[:0]
	return open{span: span, ctx: ctx}
}

// endAt is the end option of a span ending now: none with the real clock
// (the SDK stamps it), the test clock's time otherwise.
func (e *Emitter) endAt(now time.Time) []trace.SpanEndOption {
	if e.realClock {
		return nil
	}
	return []trace.SpanEndOption{trace.WithTimestamp(now)}
}

// event adds a span event at now with attrs (copied by the SDK).
func (e *Emitter) event(s trace.Span, name string, now time.Time, attrs []attribute.KeyValue) {
	e.eopts = append(e.eopts[:0], trace.WithAttributes(attrs...))
	if !e.realClock {
		e.eopts = append(e.eopts, trace.WithTimestamp(now))
	}
	s.AddEvent(name, e.eopts...)
	e.buf = attrs[:0]
}

// setAttrs sets attrs (copied by the SDK) on s.
func (e *Emitter) setAttrs(s trace.Span, attrs []attribute.KeyValue) {
	s.SetAttributes(attrs...)
	e.buf = attrs[:0]
}

func (e *Emitter) endAll(now time.Time) {
	e.query.end(e.endAt(now)...)
	e.iter.end(e.endAt(now)...)
	e.run.end(e.endAt(now)...)
}

// splitModel splits "provider:model".
func splitModel(spec string) (provider, model string) {
	if p, m, ok := strings.Cut(spec, ":"); ok {
		return p, m
	}
	return "", spec
}

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
	Success          bool      `json:"success"`
	CompletionReason string    `json:"completionReason"`
	Iterations       int       `json:"iterations"`
	Usage            llm.Usage `json:"usage"`
	CostUSD          float64   `json:"cost"`
	Status           string    `json:"status"`
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
	if qr, ok := decode[llm.QueryResult](data); ok {
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
	ev, ok := decode[llm.ModelTurnEvent](data)
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
	ev, ok := decode[llm.RetryEvent](data)
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
	use, ok := decode[llm.ToolUse](data)
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
