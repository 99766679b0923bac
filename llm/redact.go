package llm

import (
	"encoding/json"

	"github.com/capstan-dev/capstan/proc"
)

// Redactor replaces secret values in a text (see proc.SecretRedactor).
// A nil Redactor means there is nothing to redact, so the tool loop pays
// nothing for it.
type Redactor func(string) string

// Response redacts everything the model wrote in resp before it enters a
// transcript, a journal or a result: the assistant text, each tool call's
// input, name and id (a model may make up a tool name; some servers let it
// choose the id) and the structured output. Reasoning blocks are left as
// they are: providers verify their signatures when they are sent back.
func (r Redactor) Response(resp *Response) {
	if r == nil {
		return
	}
	resp.Message.Text = r.Text(resp.Message.Text)
	for i := range resp.Message.ToolCalls {
		c := &resp.Message.ToolCalls[i]
		c.Input, c.Name, c.ID = r.JSON(c.Input), r.Text(c.Name), r.Text(c.ID)
	}
	resp.StructuredOutput = r.JSON(resp.StructuredOutput)
}

// JSON redacts the string values, numbers and keys of a JSON document
// (proc.RedactJSON); input that is not JSON is redacted as text.
func (r Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if r == nil {
		return raw
	}
	return proc.RedactJSON(r, raw)
}

// Text redacts s; a nil Redactor returns s unchanged.
func (r Redactor) Text(s string) string {
	if r == nil || s == "" {
		return s
	}
	return r(s)
}
