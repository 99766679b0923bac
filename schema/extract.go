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
	blocks := fencedBlocks(text)
	for _, tagged := range []bool{true, false} {
		for _, b := range blocks {
			if b.json == tagged && json.Valid([]byte(b.body)) {
				if !yield(json.RawMessage(b.body)) {
					return
				}
			}
		}
	}
	objects(text, yield)
}

type fenced struct {
	body string
	json bool
}

// fencedBlocks returns the Markdown fenced code blocks of text, bodies
// trimmed. An unclosed fence runs to the end of the text.
func fencedBlocks(text string) []fenced {
	var out []fenced
	lines := strings.SplitAfter(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimLeft(lines[i], " \t")
		fence := fenceOf(l)
		if fence == "" {
			continue
		}
		info := strings.ToLower(strings.TrimSpace(l[len(fence):]))
		if strings.Contains(info, fence[:1]) && fence[0] == '`' {
			continue // ``` followed by a backtick is inline code, not a fence
		}
		isJSON := info == "json" || strings.HasPrefix(info, "json ") || info == "jsonc" || info == "json5"
		var body strings.Builder
		j := i + 1
		for ; j < len(lines); j++ {
			c := strings.TrimSpace(lines[j])
			if strings.HasPrefix(c, fence) && strings.Trim(c, fence[:1]) == "" {
				break
			}
			body.WriteString(lines[j])
		}
		out = append(out, fenced{body: strings.TrimSpace(body.String()), json: isJSON})
		i = j
	}
	return out
}

// fenceOf returns the fence (three or more ` or ~) that opens line l, or "".
func fenceOf(l string) string {
	if len(l) < 3 || (l[0] != '`' && l[0] != '~') {
		return ""
	}
	n := 0
	for n < len(l) && l[n] == l[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return l[:n]
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
