package llm

import (
	"bytes"
	"encoding/json"
)

// Redactor replaces secret values in a text (see builtin.SecretRedactor).
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

// JSON redacts the string values, numbers and keys of a JSON document. A
// secret the model wrote with JSON escapes ("\u0073k-…") is found too,
// since strings are compared decoded; a number that holds a secret (a PIN,
// an account number) becomes the redacted string. The document is
// re-encoded only when something was replaced. Input that is not JSON is
// redacted as text.
func (r Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if r == nil || len(raw) == 0 {
		return raw
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		// Without escapes a JSON string's bytes are its value, so a plain
		// replacement finds every secret in it.
		s := string(raw)
		out := r(s)
		if out == s {
			return raw
		}
		if json.Valid([]byte(out)) {
			return json.RawMessage(out)
		}
		// The secret spanned JSON syntax; decode to replace it inside
		// strings only.
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return json.RawMessage(r(string(raw)))
	}
	v, changed := r.value(v)
	if !changed {
		return raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(r(string(raw)))
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// value redacts the strings and numbers of a decoded JSON value.
func (r Redactor) value(v any) (any, bool) {
	switch t := v.(type) {
	case string:
		out := r(t)
		return out, out != t
	case json.Number:
		// Compared as written: 1.2e3 is not the secret 1200.
		if out := r(string(t)); out != string(t) {
			return out, true
		}
		return t, false
	case []any:
		changed := false
		for i, e := range t {
			var c bool
			t[i], c = r.value(e)
			changed = changed || c
		}
		return t, changed
	case map[string]any:
		changed := false
		for k, e := range t {
			nv, c := r.value(e)
			if nk := r(k); nk != k {
				delete(t, k)
				k, c = nk, true
			}
			t[k] = nv
			changed = changed || c
		}
		return t, changed
	}
	return v, false
}

// Text redacts s; a nil Redactor returns s unchanged.
func (r Redactor) Text(s string) string {
	if r == nil || s == "" {
		return s
	}
	return r(s)
}
