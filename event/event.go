// Package event is the one event stream of a capstan run. Every part of a
// run reports what happens (run start, prompt, query, tool call, validator
// result, verdict, retry prompt, step transition, model text as it
// streams, run end) into a Stream, which stamps each event with the run's
// position and time and hands it, in order, to its consumers: the journal
// writer, OpenTelemetry tracing, the progress line, --stream output and an
// embedder's own consumers.
//
// The packages below the agent emit through the journal.Emitter interface
// (Emit(type, data)), which a Stream implements; the model's streamed text
// reaches it as an llm.StreamSink. Payloads are the typed values of the
// package that emitted them (IterationEvent, verdict.CheckEvent,
// verdict.RetryPromptEvent, verdict.StepMove, …); the journal's JSON is their
// encoding.
package event

import (
	"context"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
)

// Event is one thing that happened in a run.
type Event struct {
	// Type is a journal event type (journal.RunStart, journal.ToolCall, …)
	// or one of the model-output types below.
	Type string
	// Iteration is the 1-based iteration the event belongs to (0 = none).
	Iteration int
	// Step is the step that iteration runs ("" = not known yet).
	Step string
	// Time is when the Stream received the event.
	Time time.Time
	// Data is the typed payload (nil for some types). Emitters may reuse a
	// payload after Consume returns: a consumer copies what it keeps.
	Data any
}

// Model-output event types: the model's work while a query runs. They are
// delivered only to consumers that ask for them (ModelOutputConsumer) and
// are not journaled (the journal has the finished turns).
const (
	TextDelta     = "model.text"      // Data: string, the next fragment of the assistant's text
	TextDiscarded = "model.discarded" // Data: string, why the text since the turn began is void
	ToolStart     = "model.tool.start"
	ToolEnd       = "model.tool.end"
)

// Activity event types: work of the run that takes time outside the
// model — the test baseline, a validator, connecting to MCP servers. They
// are delivered only to consumers that ask for them (ActivityConsumer),
// such as the progress line, and are not journaled (the journal has each
// one's result).
const (
	ActivityStart = journal.ActivityStart // Data: Activity
	ActivityEnd   = journal.ActivityEnd   // Data: Activity, with Took and Failed
)

// Activity kinds.
const (
	KindBaseline  = "baseline"  // the test validators' run before the first iteration
	KindValidator = "validator" // one validator run
	KindMCP       = "mcp"       // connecting to the agent's MCP servers
	// KindBuildCache is preparing a run's build caches (the Go standard
	// library's compiled packages, built once per toolchain, or the work
	// dir's build cache an earlier run kept) or keeping the work dir's for
	// the next run; Detail says which.
	KindBuildCache = "build-cache"
)

// Activity is the payload of ActivityStart and ActivityEnd.
type Activity struct {
	// Kind is KindBaseline, KindValidator, KindMCP or KindBuildCache.
	Kind string
	// Name names it: the validator's name, the MCP servers' names.
	Name string
	// Detail says what runs: a command validator's command, what a
	// build cache is made of.
	Detail string
	// Took is how long it ran (ActivityEnd only).
	Took time.Duration
	// Failed says it ended without success (ActivityEnd only): a
	// validator that did not pass, a connection that failed.
	Failed bool
}

// EmitActivity emits an activity event (typ is ActivityStart or
// ActivityEnd) to em when em delivers them — a Stream with an
// ActivityConsumer; other emitters (a journal writer, a test's recorder)
// never see them.
func EmitActivity(em journal.Emitter, typ string, a Activity) {
	if s, ok := em.(*Stream); ok && s.WantsActivity() {
		s.Emit(typ, a)
	}
}

// WantsActivity reports whether a consumer of s wants activity events.
func (s *Stream) WantsActivity() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.activity) > 0
}

// IsActivity reports whether typ is an activity event type.
func IsActivity(typ string) bool { return typ == ActivityStart || typ == ActivityEnd }

// ActivityConsumer is a Consumer that wants the activity events
// (ActivityStart, ActivityEnd) too.
type ActivityConsumer interface {
	Consumer
	WantsActivity() bool
}

// IsModelOutput reports whether typ is a model-output event type.
func IsModelOutput(typ string) bool {
	switch typ {
	case TextDelta, TextDiscarded, ToolStart, ToolEnd:
		return true
	}
	return false
}

// Consumer receives a run's events, one at a time and in order. Consume
// must not block for long: the run waits for it.
type Consumer interface {
	Consume(Event)
}

// ConsumerFunc adapts a function to Consumer.
type ConsumerFunc func(Event)

// Consume implements Consumer.
func (f ConsumerFunc) Consume(e Event) { f(e) }

// ModelOutputConsumer is a Consumer that wants the model-output events
// (TextDelta, TextDiscarded, ToolStart, ToolEnd) too. Asking for them makes
// providers stream; without such a consumer they are never produced.
type ModelOutputConsumer interface {
	Consumer
	WantsModelOutput() bool
}

// Positioner is implemented by payloads that move the run's position:
// the event carrying it and every later one are stamped with it.
type Positioner interface {
	Position() (iteration int, step string)
}

// Stream stamps events and hands them to its consumers. It is safe for
// concurrent use; consumers are called one event at a time.
type Stream struct {
	mu        sync.Mutex
	consumers []Consumer
	output    []Consumer // the ModelOutputConsumers that want model output
	activity  []Consumer // the ActivityConsumers that want activity events
	iteration int
	step      string
	now       func() time.Time
	redact    TextRedactor // of the model output (nil = none)
}

// TextRedactor replaces secret values in the model output a Stream
// delivers (builtin.StreamRedactor is one). Push takes the next fragment
// of streamed text and returns what may be delivered now, holding back a
// tail that could begin a secret; Flush returns that tail once the text
// has ended; Drop forgets it (the text was discarded); Text redacts a
// complete text.
type TextRedactor interface {
	Push(fragment string) string
	Flush() string
	Drop()
	Text(s string) string
}

// NewStream returns a Stream delivering to consumers in the given order.
// now is the clock (nil = time.Now).
func NewStream(now func() time.Time, consumers ...Consumer) *Stream {
	if now == nil {
		now = time.Now
	}
	s := &Stream{now: now}
	for _, c := range consumers {
		if c == nil {
			continue
		}
		s.consumers = append(s.consumers, c)
		if m, ok := c.(ModelOutputConsumer); ok && m.WantsModelOutput() {
			s.output = append(s.output, c)
		}
		if a, ok := c.(ActivityConsumer); ok && a.WantsActivity() {
			s.activity = append(s.activity, c)
		}
	}
	return s
}

// RedactModelOutput makes the Stream deliver the model-output events with
// the secret values r knows replaced: the text (a secret split across the
// provider's fragments included), the tool calls' names, ids, inputs and
// outputs, and the reasons of discarded text. What r holds back of the
// text is delivered before the next tool call or the event that ends the
// turn (model.turn, query.result, iteration.end, run.end). The other
// events' payloads are the journal's, redacted where they are made. Call
// it before the run starts.
func (s *Stream) RedactModelOutput(r TextRedactor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redact = r
}

// Emit implements journal.Emitter: it delivers an event of type typ with
// data to every consumer.
func (s *Stream) Emit(typ string, data any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.redact != nil {
		var ok bool
		if data, ok = s.redacted(typ, data); !ok {
			return
		}
	}
	if p, ok := data.(Positioner); ok {
		s.iteration, s.step = p.Position()
	}
	s.deliver(typ, data)
}

// deliver hands an event to the consumers of its kind.
func (s *Stream) deliver(typ string, data any) {
	e := Event{Type: typ, Iteration: s.iteration, Step: s.step, Time: s.now(), Data: data}
	to := s.consumers
	if IsModelOutput(typ) {
		to = s.output
	} else if IsActivity(typ) {
		to = s.activity
	}
	for _, c := range to {
		c.Consume(e)
	}
}

// redacted is data with s.redact applied, and whether there is anything
// to deliver (a text fragment may be held back whole). Before a tool call
// and at the end of a turn, the held-back text is delivered first.
func (s *Stream) redacted(typ string, data any) (any, bool) {
	r := s.redact
	switch typ {
	case TextDelta:
		text, _ := data.(string)
		text = r.Push(text)
		return text, text != ""
	case TextDiscarded:
		r.Drop()
		reason, _ := data.(string)
		return r.Text(reason), true
	case ToolStart:
		s.flushText()
		if call, ok := data.(llm.ToolCall); ok {
			call.ID, call.Name, call.Input = r.Text(call.ID), r.Text(call.Name), llm.Redactor(r.Text).JSON(call.Input)
			return call, true
		}
	case ToolEnd:
		s.flushText()
		if use, ok := data.(llm.ToolUse); ok {
			use.ID, use.Name, use.Input, use.Output = r.Text(use.ID), r.Text(use.Name), llm.Redactor(r.Text).JSON(use.Input), r.Text(use.Output)
			return use, true
		}
	case journal.ModelTurn, journal.QueryResult, journal.IterationEnd, journal.RunEnd:
		s.flushText()
	}
	return data, true
}

// flushText delivers the text s.redact held back, if any.
func (s *Stream) flushText() {
	if text := s.redact.Flush(); text != "" {
		s.deliver(TextDelta, text)
	}
}

// Subscribe adds c to the consumers, after the others, until the returned
// function is called.
func (s *Stream) Subscribe(c Consumer) (unsubscribe func()) {
	sub := &subscription{c}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consumers = append(s.consumers[:len(s.consumers):len(s.consumers)], sub)
	if m, ok := c.(ModelOutputConsumer); ok && m.WantsModelOutput() {
		s.output = append(s.output[:len(s.output):len(s.output)], sub)
	}
	if a, ok := c.(ActivityConsumer); ok && a.WantsActivity() {
		s.activity = append(s.activity[:len(s.activity):len(s.activity)], sub)
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.consumers = without(s.consumers, sub)
		s.output = without(s.output, sub)
		s.activity = without(s.activity, sub)
	}
}

// subscription gives a subscribed consumer an identity (a ConsumerFunc is
// not comparable).
type subscription struct{ c Consumer }

func (s *subscription) Consume(e Event) { s.c.Consume(e) }

func without(cs []Consumer, sub *subscription) []Consumer {
	out := make([]Consumer, 0, len(cs))
	for _, x := range cs {
		if x != Consumer(sub) {
			out = append(out, x)
		}
	}
	return out
}

// ModelOutput returns an llm.StreamSink that turns the model's streamed
// work into model-output events, or nil when no consumer wants them (so
// that providers do not stream for nobody).
func (s *Stream) ModelOutput() llm.StreamSink {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.output) == 0 {
		return nil
	}
	return sink{s}
}

// Context returns ctx carrying the Stream's model-output sink
// (ModelOutput) for a run's queries, and a function to call once they are
// done. A sink ctx already carries (an embedder's llm.WithStreamSink) is
// one of the model-output consumers until then: it gets the same events,
// redacted, as every other consumer, instead of the provider's text as it
// comes.
func (s *Stream) Context(ctx context.Context) (context.Context, func()) {
	done := func() {}
	if outer := llm.StreamSinkFrom(ctx); outer != nil {
		if own, ok := outer.(sink); !ok || own.s != s {
			done = s.Subscribe(sinkConsumer{outer})
		}
	}
	return llm.WithStreamSink(ctx, s.ModelOutput()), done
}

// sinkConsumer hands the model-output events to an llm.StreamSink.
type sinkConsumer struct{ sink llm.StreamSink }

func (sinkConsumer) WantsModelOutput() bool { return true }

func (c sinkConsumer) Consume(e Event) {
	switch d := e.Data.(type) {
	case string:
		switch e.Type {
		case TextDelta:
			c.sink.TextDelta(d)
		case TextDiscarded:
			c.sink.TextDiscarded(d)
		}
	case llm.ToolCall:
		if e.Type == ToolStart {
			c.sink.ToolStart(d)
		}
	case llm.ToolUse:
		if e.Type == ToolEnd {
			c.sink.ToolEnd(d)
		}
	}
}

type sink struct{ s *Stream }

func (k sink) TextDelta(text string)       { k.s.Emit(TextDelta, text) }
func (k sink) TextDiscarded(reason string) { k.s.Emit(TextDiscarded, reason) }
func (k sink) ToolStart(call llm.ToolCall) { k.s.Emit(ToolStart, call) }
func (k sink) ToolEnd(use llm.ToolUse)     { k.s.Emit(ToolEnd, use) }
