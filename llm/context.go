package llm

import (
	"context"

	"github.com/capstan-dev/capstan/event"
)

// ContextManager keeps the requests of a tool loop within the model's
// context window. The tool loop calls Fit before every model turn and
// Observe after it; Compactor implements it.
type ContextManager interface {
	// Fit is called with the request about to be sent; req.Messages is the
	// session's whole transcript, and req.Messages[query] is the prompt of
	// the current query. It returns the transcript to send: unchanged, or
	// compacted (Compaction set), in which case the tool loop keeps the
	// compacted transcript as the session's. A compacted transcript ends
	// with the current query's messages (as many as req.Messages[query:],
	// tool results possibly stubbed), so the tool loop can find the
	// query's prompt again. An error with code
	// CONTEXT_OVERFLOW means the request cannot be made to fit; the tool
	// loop then sends nothing.
	Fit(ctx context.Context, req *Request, query int) (Fitted, error)
	// Observe reports the input tokens the provider counted for a request
	// Fit let through, so that later estimates can be calibrated.
	Observe(req *Request, inputTokens int64)
}

// Fitted is what ContextManager.Fit decided.
type Fitted struct {
	// Messages is the transcript to send.
	Messages []event.Message
	// Compaction describes what was compacted; nil when Messages is the
	// transcript unchanged.
	Compaction *event.CompactionEvent
	// Usage is what compaction itself cost (a summary request).
	Usage event.Usage
}
