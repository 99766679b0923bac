package event

import "encoding/json"

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// InputOrEmpty is the call's input, or an empty JSON object when the model
// sent none (the form tools, journals and wire formats expect).
func (c ToolCall) InputOrEmpty() json.RawMessage {
	if len(c.Input) == 0 {
		return json.RawMessage("{}")
	}
	return c.Input
}

// ToolUse is one tool call made during a query, with its result. Its kind is
// KindToolDenied when the call was refused without running, else KindToolCall.
type ToolUse struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	Output     string          `json:"output"`
	IsError    bool            `json:"is_error,omitempty"`
	Denied     bool            `json:"denied,omitempty"`
	DurationMs int64           `json:"duration_ms"`
	// Replayed marks a result answered from the journal of an earlier
	// attempt of the iteration: the tool did not run again (the tool-effect ledger).
	Replayed bool `json:"replayed,omitempty"`
}

// EventKind implements Payload: a refused call is a tool.denied event,
// every other a tool.call event.
func (u ToolUse) EventKind() Kind {
	if u.Denied {
		return KindToolDenied
	}
	return KindToolCall
}

// Usage counts tokens. Input is split the way the providers bill it:
// InputTokens is the input billed at the full rate (not read from and not
// written to the prompt cache), CacheReadTokens was read from the cache
// (billed at a discount) and CacheWriteTokens was written to it (billed at
// a premium where the provider charges for writes). The whole input of a
// request is the sum of the three.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
}

// Input is the whole input: uncached, cache-read and cache-written
// tokens.
func (u Usage) Input() int64 { return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens }

// Total is input + output + cache tokens.
func (u Usage) Total() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// The model-output payloads: the model's work while a query runs.

// TextDeltaEvent is the next fragment of the assistant's text.
type TextDeltaEvent struct{ Text string }

// TextDiscardedEvent says why the text since the turn began is void.
type TextDiscardedEvent struct{ Reason string }

// ToolStartEvent is a tool call the model made, before it runs.
type ToolStartEvent struct{ Call ToolCall }

// ToolEndEvent is a tool call with its result.
type ToolEndEvent struct{ Use ToolUse }

// EventKind implements Payload.
func (TextDeltaEvent) EventKind() Kind { return KindTextDelta }

// EventKind implements Payload.
func (TextDiscardedEvent) EventKind() Kind { return KindTextDiscarded }

// EventKind implements Payload.
func (ToolStartEvent) EventKind() Kind { return KindToolStart }

// EventKind implements Payload.
func (ToolEndEvent) EventKind() Kind { return KindToolEnd }
