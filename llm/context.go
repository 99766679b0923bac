package llm

import "context"

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
	Messages []Message
	// Compaction describes what was compacted; nil when Messages is the
	// transcript unchanged.
	Compaction *CompactionEvent
	// Usage is what compaction itself cost (a summary request).
	Usage Usage
}

// CompactionEvent is the payload of a context.compacted journal event: a
// session's transcript was shortened before a request so that it fits the
// model's context window. The run journal keeps every original message and
// tool output (session.messages and tool.call events).
type CompactionEvent struct {
	SessionID string `json:"session_id,omitempty"`
	// Window is the context window in tokens; TokensBefore and
	// TokensAfter are the estimated input of the request before and after.
	Window       int64 `json:"window"`
	TokensBefore int64 `json:"tokens_before"`
	TokensAfter  int64 `json:"tokens_after"`
	// StubbedCalls are the tool calls whose results were replaced by
	// stubs; StubbedBytes is the size of the removed outputs.
	StubbedCalls []string `json:"stubbed_calls,omitempty"`
	StubbedBytes int      `json:"stubbed_bytes,omitempty"`
	// SummarizedMessages older messages were replaced by one carry
	// message holding Summary, written by SummaryModel.
	SummarizedMessages int    `json:"summarized_messages,omitempty"`
	SummaryModel       string `json:"summary_model,omitempty"`
	Summary            string `json:"summary,omitempty"`
	// Usage is what the summary request cost.
	Usage Usage `json:"usage"`
}
