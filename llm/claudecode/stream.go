package claudecode

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/schema"
)

// state accumulates one query's frames.
type state struct {
	res       *event.QueryResult
	uses      map[string]int // tool_use id → index in res.ToolUses
	started   map[string]time.Time
	requested string
	result    *Frame
	apiError  string
	events    event.Emitter
	redact    llm.Redactor
	turns     int
	// abort kills the CLI; aborted is the error that made us do it.
	abort   func()
	aborted error
	// sink receives text and tool calls live (nil = none); partialText
	// is true while stream_event text deltas have been passed on whose
	// assistant frame has not arrived yet.
	sink        llm.StreamSink
	partialText bool
	// frames counts the frames parsed so far.
	frames int
}

func (st *state) read(r io.Reader, onResult func()) error {
	lr := newLineReader(r, MaxLineBytes)
	st.started = map[string]time.Time{}
	for {
		line, err := lr.next()
		if err != nil {
			return err
		}
		f, perr := ParseFrame(line)
		if perr != nil {
			st.events.Emit(event.Warning("claude-code: unparseable output line skipped: " + perr.Error()))
			continue
		}
		st.frames++
		st.frame(&f)
		if f.Type == "result" {
			onResult()
		}
	}
}

func (st *state) frame(f *Frame) {
	if f.SessionID != "" {
		if st.res.SessionID == "" || f.Type == "system" && f.Subtype == "init" {
			st.res.SessionID = f.SessionID
		}
	}
	switch f.Type {
	case "system":
		switch f.Subtype {
		case "init":
			if st.requested != "" && f.SessionID != "" && f.SessionID != st.requested {
				st.res.SessionRenewed = true
			}
		case "api_retry":
			if st.partialText {
				st.partialText = false
				st.sink.TextDiscarded(fmt.Sprintf("claude-code is retrying the API call (attempt %d, HTTP %d)", f.Attempt, f.ErrorStatus))
			}
			st.events.Emit(event.ClaudeCodeRetryEvent{Provider: "claude-code", Attempt: f.Attempt,
				MaxRetries: f.MaxRetries, DelayMs: f.RetryDelayMs, Status: f.ErrorStatus})
			authFail := f.ErrorStatus == 401 || f.ErrorStatus == 403 || f.Error == "authentication_failed" || f.Error == "billing_error"
			if authFail && f.Attempt >= authRetryLimit && st.aborted == nil && st.abort != nil {
				e := agenterr.New(agenterr.CodeSdkAuth, agenterr.LayerSDKBridge, false,
					"claude-code: the API rejected the credentials (HTTP %d, %d attempts)", f.ErrorStatus, f.Attempt)
				e.Hint = "log in with `claude` or set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a gateway)"
				st.aborted = e
				st.abort()
			}
		}
	case "assistant":
		if f.Error != "" {
			st.apiError = f.Error
		}
		m, err := parseMessage(f.Message)
		if err != nil {
			return
		}
		st.turns++
		calls := 0
		// The text of this frame was streamed already when partial
		// messages delivered it; otherwise it is streamed now, whole.
		streamed := st.partialText
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				if f.ParentToolUseID == nil && b.Text != "" {
					text := st.redact.Text(b.Text)
					st.res.Responses = append(st.res.Responses, text)
					if st.sink != nil && !streamed {
						st.sink.TextDelta(text)
					}
					st.partialText = false
				}
			case "tool_use":
				in := b.Input
				if len(in) == 0 {
					in = json.RawMessage(`{}`)
				}
				st.uses[b.ID] = len(st.res.ToolUses)
				st.started[b.ID] = time.Now()
				use := event.ToolUse{ID: b.ID, Name: b.Name, Input: st.redact.JSON(append(json.RawMessage(nil), in...))}
				st.res.ToolUses = append(st.res.ToolUses, use)
				if st.sink != nil {
					st.sink.ToolStart(event.ToolCall{ID: use.ID, Name: use.Name, Input: use.Input})
				}
				calls++
			}
		}
		ev := event.ModelTurnEvent{Turn: st.turns, ToolCalls: calls}
		if m.Usage != nil {
			ev.Usage = event.Usage{InputTokens: m.Usage.InputTokens, OutputTokens: m.Usage.OutputTokens,
				CacheReadTokens: m.Usage.CacheReadInputTokens, CacheWriteTokens: m.Usage.CacheCreationInputTokens}
		}
		st.events.Emit(ev)
	case "user":
		m, err := parseMessage(f.Message)
		if err != nil {
			return
		}
		for _, b := range m.Content {
			if b.Type != "tool_result" {
				continue
			}
			i, ok := st.uses[b.ToolUseID]
			if !ok {
				continue
			}
			u := &st.res.ToolUses[i]
			u.Output = st.redact.Text(resultText(b.Content))
			u.IsError = b.IsError
			if t, ok := st.started[b.ToolUseID]; ok {
				u.DurationMs = time.Since(t).Milliseconds()
			}
			if u.IsError && strings.Contains(strings.ToLower(u.Output), "permission") {
				u.Denied = true
			}
			st.events.Emit(*u)
			if st.sink != nil {
				st.sink.ToolEnd(*u)
			}
		}
	case "stream_event":
		if st.sink != nil && f.ParentToolUseID == nil {
			if text := textDelta(f.Event); text != "" {
				st.sink.TextDelta(text)
				st.partialText = true
			}
		}
	case "result":
		r := *f
		r.Result = st.redact.Text(r.Result)
		st.result = &r
		st.res.Turns = f.NumTurns
		st.res.CostUSD = f.TotalCostUSD
		st.res.StopReason = f.StopReason
		if f.Usage != nil {
			st.res.Usage = event.Usage{InputTokens: f.Usage.InputTokens, OutputTokens: f.Usage.OutputTokens,
				CacheReadTokens: f.Usage.CacheReadInputTokens, CacheWriteTokens: f.Usage.CacheCreationInputTokens}
		}
		for _, d := range f.PermissionDenials {
			if i, ok := st.uses[d.ToolUseID]; ok {
				st.res.ToolUses[i].Denied, st.res.ToolUses[i].IsError = true, true
			}
		}
		if len(f.StructuredOutput) > 0 && string(f.StructuredOutput) != "null" {
			st.res.StructuredOutput = st.redact.JSON(append(json.RawMessage(nil), f.StructuredOutput...))
		}
		if r.Result != "" && !f.IsError && (len(st.res.Responses) == 0 || st.res.Responses[len(st.res.Responses)-1] != r.Result) {
			st.res.Responses = append(st.res.Responses, r.Result)
		}
	}
}

// textDelta returns the text of a stream_event's content_block_delta of
// type text_delta, or "".
func textDelta(ev json.RawMessage) string {
	if len(ev) == 0 {
		return ""
	}
	var e struct {
		Type  string `json:"type"`
		Delta struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	}
	if json.Unmarshal(ev, &e) != nil || e.Type != "content_block_delta" || e.Delta.Type != "text_delta" {
		return ""
	}
	return e.Delta.Text
}

// structured validates the structured answer against outputSchema, recovering it
// from the result text when the CLI did not report structured_output.
func (b *Bridge) structured(st *state, outputSchema json.RawMessage) error {
	sch, err := b.schemas.Compile(schema.Source{Raw: outputSchema, URL: "mem://capstan/output.schema.json"})
	if err != nil {
		return agenterr.Wrap(err, agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "output schema does not compile")
	}
	candidates := []json.RawMessage{}
	if len(st.res.StructuredOutput) > 0 {
		candidates = append(candidates, st.res.StructuredOutput)
	}
	if st.result != nil {
		candidates = append(candidates, schema.JSONCandidates(st.result.Result)...)
	}
	var lastErr error
	for _, c := range candidates {
		if err := sch.Check(c); err != nil {
			lastErr = err
			continue
		}
		st.res.StructuredOutput = c
		return nil
	}
	st.res.StructuredOutput = nil
	msg := "claude-code returned no structured output"
	if lastErr != nil {
		msg = "claude-code structured output does not match the schema: " + lastErr.Error()
	}
	e := agenterr.New(agenterr.CodeSchemaValidation, agenterr.LayerSDKBridge, true, "%s", msg)
	e.Hint = "the model must answer with JSON matching the output schema; a retry usually fixes this"
	return e
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
