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
	// proc.SecretValues, which lists them longest first.
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
	e.position(iteration, stepID)
	e.mu.Unlock()
}

// position moves the run position and labels the open iteration span with
// the step; e.mu is held.
func (e *Emitter) position(iteration int, stepID string) {
	e.iteration, e.step = iteration, stepID
	if e.iter.span != nil && stepID != "" {
		e.setAttrs(e.iter.span, append(e.buf[:0], attribute.String(AttrStep, stepID)))
	}
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

// Emit forwards the event to Next, then maps it to spans: the Emitter in
// front of a journal writer (the pipeline, workflow and skills commands).
func (e *Emitter) Emit(p event.Payload) {
	e.next.Emit(p)
	e.trace(p)
}

// Consume implements event.Consumer: the Emitter as one of a Stream's
// consumers (an agent run's), beside the journal. It maps the event to
// spans at the event's position (the iteration span is labelled with its
// step) and forwards nothing to Next.
func (e *Emitter) Consume(ev event.Event) {
	e.mu.Lock()
	if ev.Iteration != e.iteration || ev.Step != e.step {
		e.position(ev.Iteration, ev.Step)
	}
	e.mu.Unlock()
	e.trace(ev.Payload)
}

// trace maps one event to spans.
func (e *Emitter) trace(p event.Payload) {
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
