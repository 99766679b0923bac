package event

import (
	"encoding/json"
)

// Role is the author of a transcript message.
type Role string

// Transcript roles. Tool results travel in RoleTool messages; providers map
// them to their wire format (Anthropic: a user message of tool_result
// blocks; OpenAI: one "tool" message per result).
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one transcript entry.
type Message struct {
	Role        Role         `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"tool_calls,omitempty"`
	ToolResults []ToolResult `json:"tool_results,omitempty"`
	// Reasoning holds an assistant message's reasoning blocks that must be
	// sent back verbatim in later turns (Anthropic thinking and
	// redacted_thinking blocks with their signatures). It is opaque to
	// everything but the provider that produced it; other providers ignore
	// it.
	Reasoning json.RawMessage `json:"reasoning,omitempty"`
	// Pinned marks a user prompt that holds the current step's
	// instructions (QueryOptions.Instructions): context compaction keeps
	// the newest pinned message verbatim.
	Pinned bool `json:"pinned,omitempty"`
}

// ToolResult answers one ToolCall.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name,omitempty"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// QueryResult is what one llm.Bridge.Query produced: the payload of a
// query.result journal event.
type QueryResult struct {
	SessionID        string          `json:"session_id"`
	Responses        []string        `json:"responses"` // assistant texts, in order
	ToolUses         []ToolUse       `json:"tool_uses,omitempty"`
	StructuredOutput json.RawMessage `json:"structured_output,omitempty"`
	Usage            Usage           `json:"usage"`
	CostUSD          float64         `json:"cost_usd,omitempty"`
	Turns            int             `json:"turns"`
	StopReason       string          `json:"stop_reason,omitempty"`
	// SessionRenewed is true when the requested session was unknown to the
	// backend and a new one was started in its place (a reconnect).
	SessionRenewed bool `json:"session_renewed,omitempty"`
	// UnreportedAttempts counts the failed attempts of the query's turns
	// that the provider billed without reporting their usage (see
	// ModelTurnEvent.UnreportedAttempts): Usage misses their tokens.
	UnreportedAttempts int `json:"unreported_attempts,omitempty"`
}

// Size is the number of bytes m puts into a request: its text, reasoning,
// tool calls and tool results (wire framing aside).
func (m Message) Size() int {
	n := len(m.Text) + len(m.Reasoning)
	for _, c := range m.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Input)
	}
	for _, r := range m.ToolResults {
		n += len(r.CallID) + len(r.Content)
	}
	return n
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

// ToolIntentEvent is the payload of a tool.intent journal event: a tool
// call about to run.
type ToolIntentEvent struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	InputDigest string `json:"input_digest"`
	// Query is the ledger key of the query the call belongs to (the
	// digest of its prompt), Turn the model turn that made it.
	Query      string `json:"query"`
	Turn       int    `json:"turn"`
	Idempotent bool   `json:"idempotent,omitempty"`
}

// RetryEvent is the payload of a model.retry journal event, emitted before
// each retry.
type RetryEvent struct {
	Provider string `json:"provider"`
	Attempt  int    `json:"attempt"` // the attempt that failed, 1-based
	DelayMs  int64  `json:"delay_ms"`
	Code     string `json:"code"`
	Status   int    `json:"status,omitempty"`
	Message  string `json:"message"`
}

// SessionMessagesEvent is the payload of a session.messages journal event:
// the messages one query appended to a session, or, when Replace is set,
// the session's whole transcript after the query compacted it.
type SessionMessagesEvent struct {
	SessionID string    `json:"session_id"`
	Messages  []Message `json:"messages"`
	Replace   bool      `json:"replace,omitempty"`
}

// ModelUsageEvent is the payload of a model.usage journal event: the
// usage a response of turn Turn reported while it streamed (its input
// tokens and the output so far), with that of the turn's earlier attempts
// whose streams failed. The turn's model.turn, when it is written,
// carries the whole of it; until then it is what the provider billed for
// the response in flight.
//
// Unreported marks a response that began to stream before its provider
// reported its usage (OpenAI-compatible servers report it in the last
// chunk of the stream): Usage then holds only the turn's earlier
// attempts', and the response's own tokens are not known. A later
// model.usage of the same turn without it replaces it once the server
// reports them.
type ModelUsageEvent struct {
	Turn       int   `json:"turn"`
	Usage      Usage `json:"usage"`
	Unreported bool  `json:"unreported,omitempty"`
}

// EventKind implements event.Payload.
func (ModelUsageEvent) EventKind() Kind { return KindModelUsage }

// ModelTurnEvent is the payload of a model.turn journal event.
type ModelTurnEvent struct {
	Turn       int    `json:"turn"`
	StopReason string `json:"stop_reason,omitempty"`
	ToolCalls  int    `json:"tool_calls"`
	Usage      Usage  `json:"usage"`
	DurationMs int64  `json:"duration_ms"`
	// UnreportedAttempts counts the turn's attempts before the one that
	// answered whose streams broke after the provider had begun to answer
	// but before it reported their usage (an OpenAI-compatible stream
	// dropped before its last chunk, then retried): the provider billed
	// them, and Usage misses their input and output tokens.
	UnreportedAttempts int `json:"unreported_attempts,omitempty"`
	// Query, Message and StructuredOutput are written by a tool loop with
	// a Ledger: the query's ledger key (the digest of its prompt) and the
	// answer as it entered the transcript, so that an iteration run again
	// after a kill continues from this turn instead of asking the model
	// again. Older journals have none.
	Query            string          `json:"query,omitempty"`
	Message          *Message        `json:"message,omitempty"`
	StructuredOutput json.RawMessage `json:"structured_output,omitempty"`
}

// EventKind implements event.Payload.
func (SessionMessagesEvent) EventKind() Kind { return KindSessionMessages }

// EventKind implements event.Payload.
func (ModelTurnEvent) EventKind() Kind { return KindModelTurn }

// EventKind implements event.Payload.
func (RetryEvent) EventKind() Kind { return KindModelRetry }

// EventKind implements event.Payload.
func (CompactionEvent) EventKind() Kind { return KindContextCompacted }

// EventKind implements event.Payload.
func (ToolIntentEvent) EventKind() Kind { return KindToolIntent }

// EventKind implements event.Payload.
func (QueryResult) EventKind() Kind { return KindQueryResult }
