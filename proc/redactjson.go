package proc

import (
	"bytes"
	"encoding/json"
)

// RedactJSON redacts, with r, the string values, numbers and keys of a JSON document. A
// secret the model wrote with JSON escapes ("\u0073k-…") is found too,
// since strings are compared decoded; a number that holds a secret (a PIN,
// an account number) becomes the redacted string. The document is
// re-encoded only when something was replaced. Input that is not JSON is
// redacted as text.
func RedactJSON(r func(string) string, raw json.RawMessage) json.RawMessage {
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
	v, changed := value(r, v)
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
func value(r func(string) string, v any) (any, bool) {
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
			t[i], c = value(r, e)
			changed = changed || c
		}
		return t, changed
	case map[string]any:
		changed := false
		for k, e := range t {
			nv, c := value(r, e)
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
