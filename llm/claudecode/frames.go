package claudecode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Frame is one stream-json output line of the claude CLI. Known fields are
// typed; every field this driver does not know is kept in Extra, and the
// whole line in Raw, so newer CLI versions lose nothing.
type Frame struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	UUID      string          `json:"uuid,omitempty"`
	Model     string          `json:"model,omitempty"`
	Message   json.RawMessage `json:"message,omitempty"`
	// Event is a stream_event frame's API stream event (partial
	// messages), kept raw.
	Event           json.RawMessage `json:"event,omitempty"`
	ParentToolUseID *string         `json:"parent_tool_use_id,omitempty"`
	// Error is an assistant frame's API error kind (rate_limit,
	// overloaded, authentication_failed, ...).
	Error string `json:"error,omitempty"`

	// result frames
	IsError           bool            `json:"is_error,omitempty"`
	Result            string          `json:"result,omitempty"`
	NumTurns          int             `json:"num_turns,omitempty"`
	DurationMs        int64           `json:"duration_ms,omitempty"`
	TotalCostUSD      float64         `json:"total_cost_usd,omitempty"`
	Usage             *FrameUsage     `json:"usage,omitempty"`
	StructuredOutput  json.RawMessage `json:"structured_output,omitempty"`
	StopReason        string          `json:"stop_reason,omitempty"`
	TerminalReason    string          `json:"terminal_reason,omitempty"`
	APIErrorStatus    int             `json:"api_error_status,omitempty"`
	Errors            json.RawMessage `json:"errors,omitempty"`
	PermissionDenials []Denial        `json:"permission_denials,omitempty"`

	// system/api_retry frames
	Attempt      int   `json:"attempt,omitempty"`
	MaxRetries   int   `json:"max_retries,omitempty"`
	RetryDelayMs int64 `json:"retry_delay_ms,omitempty"`
	ErrorStatus  int   `json:"error_status,omitempty"`

	// Extra holds the fields not listed above.
	Extra map[string]json.RawMessage `json:"-"`
	// Raw is the line as read.
	Raw json.RawMessage `json:"-"`
}

// FrameUsage is the usage object of a result frame.
type FrameUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// Denial is one entry of a result frame's permission_denials.
type Denial struct {
	ToolName  string          `json:"tool_name"`
	ToolUseID string          `json:"tool_use_id"`
	ToolInput json.RawMessage `json:"tool_input,omitempty"`
}

// ParseFrame decodes one stream-json line. A line that is not a JSON
// object with a string "type" is an error. A known field of an unexpected
// shape is left zero and kept in Extra instead.
func ParseFrame(line []byte) (Frame, error) {
	var f Frame
	line = bytes.TrimSpace(line)
	var all map[string]json.RawMessage
	if err := json.Unmarshal(line, &all); err != nil {
		return f, fmt.Errorf("not a JSON object: %w", err)
	}
	if t, ok := all["type"]; !ok || json.Unmarshal(t, &f.Type) != nil || f.Type == "" {
		return f, errors.New("frame has no string type")
	}
	delete(all, "type")
	// Decode each known field from its own raw value: every byte of a
	// multi-megabyte line is scanned once here, and the message stays raw.
	fields := map[string]any{
		"subtype": &f.Subtype, "session_id": &f.SessionID, "uuid": &f.UUID, "model": &f.Model,
		"parent_tool_use_id": &f.ParentToolUseID, "error": &f.Error, "is_error": &f.IsError, "result": &f.Result,
		"num_turns": &f.NumTurns, "duration_ms": &f.DurationMs, "total_cost_usd": &f.TotalCostUSD, "usage": &f.Usage,
		"stop_reason": &f.StopReason, "terminal_reason": &f.TerminalReason, "api_error_status": &f.APIErrorStatus,
		"permission_denials": &f.PermissionDenials, "attempt": &f.Attempt, "max_retries": &f.MaxRetries,
		"retry_delay_ms": &f.RetryDelayMs, "error_status": &f.ErrorStatus,
	}
	for k, raw := range all {
		switch k {
		case "message":
			f.Message = raw
			continue
		case "event":
			f.Event = raw
			continue
		case "structured_output":
			f.StructuredOutput = raw
			continue
		case "errors":
			f.Errors = raw
			continue
		}
		if dst, ok := fields[k]; ok && string(raw) != "null" && json.Unmarshal(raw, dst) == nil {
			continue
		} else if ok && string(raw) == "null" {
			continue
		}
		if f.Extra == nil {
			f.Extra = map[string]json.RawMessage{}
		}
		f.Extra[k] = raw
	}
	f.Raw = append(json.RawMessage(nil), line...)
	return f, nil
}

// messageBody is the part of an assistant/user message the driver reads.
type messageBody struct {
	ID      string         `json:"id"`
	Model   string         `json:"model"`
	Content []contentBlock `json:"content"`
	Usage   *FrameUsage    `json:"usage"`
}

// contentBlock is a Messages-API content block.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// parseMessage decodes a frame's message; content may be a plain string.
func parseMessage(raw json.RawMessage) (messageBody, error) {
	var m struct {
		ID      string          `json:"id"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
		Usage   *FrameUsage     `json:"usage"`
	}
	if len(raw) == 0 {
		return messageBody{}, nil
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return messageBody{}, err
	}
	out := messageBody{ID: m.ID, Model: m.Model, Usage: m.Usage}
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return out, nil
	}
	if m.Content[0] == '"' {
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			return out, err
		}
		out.Content = []contentBlock{{Type: "text", Text: s}}
		return out, nil
	}
	err := json.Unmarshal(m.Content, &out.Content)
	return out, err
}

// resultText renders tool_result content: a string or text blocks.
func resultText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []contentBlock
	if json.Unmarshal(raw, &bs) == nil {
		var b bytes.Buffer
		for i, x := range bs {
			if i > 0 && b.Len() > 0 && x.Text != "" {
				b.WriteByte('\n')
			}
			b.WriteString(x.Text)
		}
		return b.String()
	}
	return string(raw)
}

// MaxLineBytes bounds one stream-json line (the CLI can emit multi-MB lines
// for large tool results; anything beyond this is treated as corrupt).
const MaxLineBytes = 256 << 20

// lineReader reads newline-terminated lines of any length up to a limit.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next non-empty line without its newline; io.EOF at the
// end. The returned slice is valid until the next call.
func (l *lineReader) next() ([]byte, error) {
	for {
		l.buf = l.buf[:0]
		for {
			chunk, err := l.r.ReadSlice('\n')
			l.buf = append(l.buf, chunk...)
			if len(l.buf) > l.max {
				return nil, fmt.Errorf("stream-json line longer than %d bytes", l.max)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				if err == io.EOF && len(bytes.TrimSpace(l.buf)) > 0 {
					return bytes.TrimSpace(l.buf), nil
				}
				return nil, err
			}
			break
		}
		if line := bytes.TrimSpace(l.buf); len(line) > 0 {
			return line, nil
		}
	}
}
