package schema

import (
	"encoding/json"
	"strings"
)

// maxCandidates bounds the "{" positions ExtractJSON tries as the start of
// an object, so that adversarial text ("{{{{…") cannot make it quadratic
// without limit.
const maxCandidates = 64

// ExtractJSON recovers a JSON value from a model's answer, trying in order:
//
//  1. the whole text (trimmed) is JSON;
//  2. the first fenced code block (``` or ~~~) tagged json that parses,
//     then the first fenced block of any tag that parses;
//  3. the first balanced {…} object that parses, matching braces outside
//     JSON strings.
//
// It returns the JSON text as found and true, or nil and false. It is
// capstan's one JSON-from-prose extractor: completion's format check,
// pipeline model stages and the claude-code provider all use it (the
// latter two through [JSONCandidates]).
func ExtractJSON(text string) (json.RawMessage, bool) {
	var first json.RawMessage
	candidates(text, func(c json.RawMessage) bool {
		first = c
		return false
	})
	return first, first != nil
}

// JSONCandidates returns every JSON value [ExtractJSON] would consider, in
// the order it considers them and without duplicates: the first is what
// ExtractJSON returns. A caller with a further test (a schema, "must be an
// object") takes the first candidate that passes it.
func JSONCandidates(text string) []json.RawMessage {
	var out []json.RawMessage
	candidates(text, func(c json.RawMessage) bool {
		for _, o := range out {
			if string(o) == string(c) {
				return true
			}
		}
		out = append(out, c)
		return true
	})
	return out
}

// candidates calls yield with each JSON value found in text, most likely
// first, until yield returns false.
func candidates(text string, yield func(json.RawMessage) bool) {
	if t := strings.TrimSpace(text); t != "" && json.Valid([]byte(t)) {
		if !yield(json.RawMessage(t)) {
			return
		}
	}
	// The first block tagged json that parses, then the first of any tag;
	// an unclosed block runs to the end of the text.
	blocks := CodeBlocks(text)
	for _, tagged := range []bool{true, false} {
		for _, b := range blocks {
			body := strings.TrimSpace(b.Body)
			if taggedJSON(b.Info) == tagged && json.Valid([]byte(body)) {
				if !yield(json.RawMessage(body)) {
					return
				}
			}
		}
	}
	objects(text, yield)
}

// taggedJSON reports whether a fenced block's info string says it holds
// JSON ("json", "JSON", "json title=x", "jsonc", "json5").
func taggedJSON(info string) bool {
	info = strings.ToLower(info)
	return info == "json" || strings.HasPrefix(info, "json ") || info == "jsonc" || info == "json5"
}

// objects yields the balanced {…} spans of text that are valid JSON, in
// order, trying at most maxCandidates opening braces.
func objects(text string, yield func(json.RawMessage) bool) {
	start := 0
	for tries := 0; tries < maxCandidates; tries++ {
		i := strings.IndexByte(text[start:], '{')
		if i < 0 {
			return
		}
		i += start
		if end, ok := matchBrace(text, i); ok {
			cand := text[i : end+1]
			if json.Valid([]byte(cand)) && !yield(json.RawMessage(cand)) {
				return
			}
		}
		start = i + 1
	}
}

// matchBrace returns the index of the "}" that closes the "{" at text[i],
// skipping braces inside JSON strings.
func matchBrace(text string, i int) (int, bool) {
	depth := 0
	inStr := false
	for j := i; j < len(text); j++ {
		c := text[j]
		if inStr {
			switch c {
			case '\\':
				j++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return j, true
			}
		}
	}
	return 0, false
}
