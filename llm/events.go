package llm

import "github.com/capstan-dev/capstan/event"

// The kinds of the events the model layer reports.

// EventKind implements event.Payload.
func (SessionMessagesEvent) EventKind() event.Kind { return event.KindSessionMessages }

// EventKind implements event.Payload.
func (ModelTurnEvent) EventKind() event.Kind { return event.KindModelTurn }

// EventKind implements event.Payload.
func (RetryEvent) EventKind() event.Kind { return event.KindModelRetry }

// EventKind implements event.Payload.
func (CompactionEvent) EventKind() event.Kind { return event.KindContextCompacted }

// EventKind implements event.Payload.
func (ToolIntentEvent) EventKind() event.Kind { return event.KindToolIntent }

// EventKind implements event.Payload.
func (QueryResult) EventKind() event.Kind { return event.KindQueryResult }
