// Package event is the one event stream of a capstan run. Every part of a
// run reports what happens (run start, prompt, query, tool call, validator
// result, verdict, retry prompt, step transition, model text as it
// streams, run end) to an Emitter, usually a Stream, which stamps each
// event with the run's position and time and hands it, in order, to its
// consumers: the journal writer (Journal), OpenTelemetry tracing, the
// progress line, --stream output and an embedder's own consumers.
//
// An Event is a Kind and a typed Payload; every payload type is defined
// here and has one kind (Payload.EventKind), so an event of the wrong kind
// for its payload cannot be written. The journal's JSON is the payloads'
// encoding (docs/journal.md).
package event

import (
	"sync"
	"time"

	"github.com/capstan-dev/capstan/proc"
)

// Event is one thing that happened in a run.
type Event struct {
	// Kind says what happened: the kind of Payload.
	Kind Kind
	// Iteration is the 1-based iteration the event belongs to (0 = none).
	Iteration int
	// Step is the step that iteration runs ("" = not known yet).
	Step string
	// Time is when the Stream received the event.
	Time time.Time
	// Payload is what the event carries. Emitters may reuse a payload
	// after Consume returns: a consumer copies what it keeps.
	Payload Payload
}

// What an Activity is (Activity.Kind).
const (
	ActivityBaseline  = "baseline"  // the test validators' run before the first iteration
	ActivityValidator = "validator" // one validator run
	ActivityMCP       = "mcp"       // connecting to the agent's MCP servers
	// ActivityBuildCache is preparing a run's build caches (the Go
	// standard library's compiled packages, built once per toolchain, or
	// the work dir's build cache an earlier run kept) or keeping the work
	// dir's for the next run; Detail says which.
	ActivityBuildCache = "build-cache"
)

// Activity is work of the run that takes time outside the model — the
// test baseline, a validator, connecting to MCP servers — as its
// ActivityStartEvent and ActivityEndEvent carry it.
type Activity struct {
	// Kind is ActivityBaseline, ActivityValidator, ActivityMCP or
	// ActivityBuildCache.
	Kind string
	// Name names it: the validator's name, the MCP servers' names.
	Name string
	// Detail says what runs: a command validator's command, what a
	// build cache is made of.
	Detail string
	// Took is how long it ran (ActivityEndEvent only).
	Took time.Duration
	// Failed says it ended without success (ActivityEndEvent only): a
	// validator that did not pass, a connection that failed.
	Failed bool
}

// ActivityStartEvent says an activity started.
type ActivityStartEvent struct{ Activity }

// ActivityEndEvent says an activity ended (Took and Failed are set).
type ActivityEndEvent struct{ Activity }

// EventKind implements Payload.
func (ActivityStartEvent) EventKind() Kind { return KindActivityStart }

// EventKind implements Payload.
func (ActivityEndEvent) EventKind() Kind { return KindActivityEnd }

// EmitActivity emits an activity event (ActivityStartEvent or
// ActivityEndEvent) to em when em delivers them — a Stream with an
// ActivityConsumer; other emitters (a journal writer, a test's recorder)
// never see them.
func EmitActivity(em Emitter, p Payload) {
	if s, ok := em.(*Stream); ok && s.WantsActivity() {
		s.Emit(p)
	}
}

// WantsActivity reports whether a consumer of s wants activity events.
func (s *Stream) WantsActivity() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.activity) > 0
}

// IsActivity reports whether k is an activity kind.
func IsActivity(k Kind) bool { return k == KindActivityStart || k == KindActivityEnd }

// ActivityConsumer is a Consumer that wants the activity events
// (ActivityStartEvent, ActivityEndEvent) too.
type ActivityConsumer interface {
	Consumer
	WantsActivity() bool
}

// IsModelOutput reports whether k is a model-output kind.
func IsModelOutput(k Kind) bool {
	switch k {
	case KindTextDelta, KindTextDiscarded, KindToolStart, KindToolEnd:
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
// (TextDeltaEvent, TextDiscardedEvent, ToolStartEvent, ToolEndEvent) too. Asking for them makes
// providers stream; without such a consumer they are never produced.
type ModelOutputConsumer interface {
	Consumer
	WantsModelOutput() bool
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
// delivers (proc.StreamRedactor is one). Push takes the next fragment
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

// Emit implements Emitter: it delivers an event carrying p to every
// consumer of its kind.
func (s *Stream) Emit(p Payload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.redact != nil {
		var ok bool
		if p, ok = s.redacted(p); !ok {
			return
		}
	}
	if pos, ok := p.(Positioner); ok {
		s.iteration, s.step = pos.Position()
	}
	s.deliver(p)
}

// deliver hands an event to the consumers of its kind.
func (s *Stream) deliver(p Payload) {
	k := p.EventKind()
	e := Event{Kind: k, Iteration: s.iteration, Step: s.step, Time: s.now(), Payload: p}
	to := s.consumers
	if IsModelOutput(k) {
		to = s.output
	} else if IsActivity(k) {
		to = s.activity
	}
	for _, c := range to {
		c.Consume(e)
	}
}

// redacted is p with s.redact applied, and whether there is anything to
// deliver (a text fragment may be held back whole). Before a tool call
// and at the end of a turn, the held-back text is delivered first.
func (s *Stream) redacted(p Payload) (Payload, bool) {
	r := s.redact
	switch d := p.(type) {
	case TextDeltaEvent:
		d.Text = r.Push(d.Text)
		return d, d.Text != ""
	case TextDiscardedEvent:
		r.Drop()
		d.Reason = r.Text(d.Reason)
		return d, true
	case ToolStartEvent:
		s.flushText()
		c := &d.Call
		c.ID, c.Name, c.Input = r.Text(c.ID), r.Text(c.Name), proc.RedactJSON(r.Text, c.Input)
		return d, true
	case ToolEndEvent:
		s.flushText()
		u := &d.Use
		u.ID, u.Name, u.Input, u.Output = r.Text(u.ID), r.Text(u.Name), proc.RedactJSON(r.Text, u.Input), r.Text(u.Output)
		return d, true
	}
	switch p.EventKind() {
	case KindModelTurn, KindQueryResult, KindIterationEnd, KindRunEnd:
		s.flushText()
	}
	return p, true
}

// flushText delivers the text s.redact held back, if any.
func (s *Stream) flushText() {
	if text := s.redact.Flush(); text != "" {
		s.deliver(TextDeltaEvent{Text: text})
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

// WantsModelOutput reports whether a consumer of s wants the model-output
// events (so that providers stream only when someone reads it).
func (s *Stream) WantsModelOutput() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.output) > 0
}
