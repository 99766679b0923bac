package llm

import (
	"context"

	"github.com/capstan-dev/capstan/event"
)

// StreamSink receives a query's work while it happens: the assistant's text
// as the provider receives it and each tool call as it starts and ends. A
// sink travels in the request's context (WithStreamSink); a context without
// one costs the providers and the tool loop nothing beyond one lookup.
//
// What a sink sees is a live view, not the record: the QueryResult and the
// journal stay the source of truth. Structured-output answers are streamed
// like any other text (the JSON as it arrives), on every provider.
//
// Methods are called from the goroutine running the query, in order. A
// Bridge whose queries run concurrently (several queries sharing one
// context) may call them concurrently, so a sink that is shared that way
// must lock. Methods must return quickly: the provider is reading the
// stream while they run.
type StreamSink interface {
	// TextDelta receives the next fragment of the assistant's text. The
	// fragments of one model turn concatenate to the turn's text, unless
	// TextDiscarded intervenes. Fragment boundaries are the provider's
	// (they may split words, but never a UTF-8 sequence).
	TextDelta(text string)
	// TextDiscarded reports that the text delivered since the current model
	// turn began is not part of the answer: the turn's stream failed part
	// way (a dropped connection, an error event, cancellation) for the
	// given reason. When the provider retries the turn, the retry's text
	// follows from its beginning, so a display should mark the break
	// rather than let the two attempts run together.
	TextDiscarded(reason string)
	// ToolStart reports a tool call about to run (or about to be denied).
	ToolStart(call event.ToolCall)
	// ToolEnd reports how the call ended; use.Denied marks a call the
	// tool policy refused (use.Output then holds the reason), use.IsError
	// a call that ran and failed. Every ToolStart is followed by exactly
	// one ToolEnd for the same call ID, unless the query is cut short.
	ToolEnd(use event.ToolUse)
}

type streamSinkKey struct{}

type usageObserverKey struct{}

// WithUsageObserver returns a context whose model calls report to observe
// the usage of a response while it streams, before it has finished (with
// that of the turn's earlier attempts whose streams failed): the tool
// loop journals it, so that a run killed while the response streams
// still counts what the provider billed for it. unreported is true when
// the response has begun to stream but its provider has not reported
// its usage yet (OpenAI-compatible servers report it in the stream's
// last chunk): u then holds only the usage reported before the response
// began, and the response's own input and output tokens are not in it.
func WithUsageObserver(ctx context.Context, observe func(u event.Usage, unreported bool)) context.Context {
	return context.WithValue(ctx, usageObserverKey{}, observe)
}

// ObserveUsage reports u, the usage of the response in flight so far as
// its provider reported it, to the observer ctx carries
// (WithUsageObserver), if any.
func ObserveUsage(ctx context.Context, u event.Usage) {
	if observe, _ := ctx.Value(usageObserverKey{}).(func(event.Usage, bool)); observe != nil {
		observe(u, false)
	}
}

// ObserveUnreportedUsage tells the observer ctx carries, if any, that a
// response has begun to stream whose usage its provider has not
// reported: known is the usage reported before it (the turn's earlier
// attempts'), which does not include the response's own.
func ObserveUnreportedUsage(ctx context.Context, known event.Usage) {
	if observe, _ := ctx.Value(usageObserverKey{}).(func(event.Usage, bool)); observe != nil {
		observe(known, true)
	}
}

// WithStreamSink returns a context that carries sink to the providers and
// the tool loop of queries made with it. A nil sink returns ctx unchanged.
func WithStreamSink(ctx context.Context, sink StreamSink) context.Context {
	if sink == nil {
		return ctx
	}
	return context.WithValue(ctx, streamSinkKey{}, sink)
}

// WithoutStreamSink returns a context whose queries report to no sink, for
// model calls that are not the agent's work, such as a step check's judge.
func WithoutStreamSink(ctx context.Context) context.Context {
	if StreamSinkFrom(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, streamSinkKey{}, StreamSink(nil))
}

// StreamSinkFrom returns the sink carried by ctx, or nil. Providers call it
// once per model turn and skip all streaming work when it is nil.
func StreamSinkFrom(ctx context.Context) StreamSink {
	s, _ := ctx.Value(streamSinkKey{}).(StreamSink)
	return s
}

// StreamEvents returns ctx carrying a sink that turns the model's streamed
// work into s's model-output events (event.TextDeltaEvent, …), or none
// when no consumer of s wants them (so that providers do not stream for
// nobody), and a function to call once the run's queries are done. A sink
// ctx already carries (an embedder's WithStreamSink) is one of the
// model-output consumers until then: it gets the same events, redacted,
// as every other consumer, instead of the provider's text as it comes.
func StreamEvents(ctx context.Context, s *event.Stream) (context.Context, func()) {
	done := func() {}
	if outer := StreamSinkFrom(ctx); outer != nil {
		if own, ok := outer.(streamSink); !ok || own.s != s {
			done = s.Subscribe(sinkConsumer{outer})
		}
	}
	var sink StreamSink
	if s.WantsModelOutput() {
		sink = streamSink{s}
	}
	return WithStreamSink(ctx, sink), done
}

// sinkConsumer hands a Stream's model-output events to a StreamSink.
type sinkConsumer struct{ sink StreamSink }

func (sinkConsumer) WantsModelOutput() bool { return true }

func (c sinkConsumer) Consume(e event.Event) {
	switch d := e.Payload.(type) {
	case event.TextDeltaEvent:
		c.sink.TextDelta(d.Text)
	case event.TextDiscardedEvent:
		c.sink.TextDiscarded(d.Reason)
	case event.ToolStartEvent:
		c.sink.ToolStart(d.Call)
	case event.ToolEndEvent:
		c.sink.ToolEnd(d.Use)
	}
}

// streamSink emits what a provider streams as model-output events.
type streamSink struct{ s *event.Stream }

func (k streamSink) TextDelta(text string) { k.s.Emit(event.TextDeltaEvent{Text: text}) }
func (k streamSink) TextDiscarded(reason string) {
	k.s.Emit(event.TextDiscardedEvent{Reason: reason})
}
func (k streamSink) ToolStart(call event.ToolCall) { k.s.Emit(event.ToolStartEvent{Call: call}) }
func (k streamSink) ToolEnd(use event.ToolUse)     { k.s.Emit(event.ToolEndEvent{Use: use}) }
