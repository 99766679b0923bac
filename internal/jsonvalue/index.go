// An Index locates the values of a JSON text by JSON pointer, so that a
// problem found in a decoded value can be reported as file:line:col. The
// configuration loader, the workflow loader and the schema resolver share
// it.

package jsonvalue

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Index is the text of one JSON file with the position of every value in
// it. Its lookups are not safe for concurrent use: the first one builds a
// table of character counts.
type Index struct {
	raw   []byte
	spans map[string]Span // JSON pointer → positions
	dups  []Duplicate     // keys that appear twice in one object
	lines []int           // byte offsets where lines start
	// runeMarks[k] is the number of characters in raw[:k*runeMarkStep],
	// built on the first position call so that each lookup counts at most
	// runeMarkStep bytes, even on a minified file that is one long line.
	runeMarks []int
}

// runeMarkStep is the byte distance between two entries of runeMarks.
const runeMarkStep = 512

// Span locates one JSON value: Key is the byte offset of its member name
// (or -1 for array elements and the root), Val the offset of the value
// itself.
type Span struct {
	Key, Val int
}

// Duplicate is a member name that occurs more than once in an object;
// encoding/json keeps the last one silently.
type Duplicate struct {
	// Pointer names the member.
	Pointer string
	// Offset is the byte offset of the repeated member name.
	Offset int
}

// NewIndex indexes raw, which should be syntactically valid JSON (json.Valid);
// on anything else the index is partial, but indexing never fails or
// panics.
func NewIndex(raw []byte) *Index {
	x := &Index{raw: raw, spans: map[string]Span{}}
	x.lines = append(x.lines, 0)
	for i, b := range raw {
		if b == '\n' {
			x.lines = append(x.lines, i+1)
		}
	}
	w := walker{x: x, data: raw}
	w.value("", -1, 0)
	return x
}

// Span returns the positions of the value at pointer.
func (x *Index) Span(pointer string) (Span, bool) {
	sp, ok := x.spans[pointer]
	return sp, ok
}

// Duplicates returns the member names that occur twice in one object, in
// the order of the text.
func (x *Index) Duplicates() []Duplicate { return x.dups }

// Position returns the 1-based line and column of byte offset off (0, 0
// for a negative offset); columns count characters (UTF-8 runes), as
// editors do. Each call costs at most a binary search and runeMarkStep
// bytes of counting, so reporting one problem per value of a large
// minified file stays linear.
func (x *Index) Position(off int) (line, col int) {
	if off < 0 {
		return 0, 0
	}
	if off > len(x.raw) {
		off = len(x.raw)
	}
	// Binary search for the last line start <= off.
	lo, hi := 0, len(x.lines)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if x.lines[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo + 1, x.runesBefore(off) - x.runesBefore(x.lines[lo]) + 1
}

// runesBefore is the number of characters in raw[:off]: the characters
// start bytes (every byte that is not a UTF-8 continuation byte), which is
// what utf8.RuneCount counts on valid UTF-8.
func (x *Index) runesBefore(off int) int {
	if x.runeMarks == nil {
		x.runeMarks = make([]int, 1, len(x.raw)/runeMarkStep+1)
		n := 0
		for i := 0; i+runeMarkStep <= len(x.raw); i += runeMarkStep {
			n += runeStarts(x.raw[i : i+runeMarkStep])
			x.runeMarks = append(x.runeMarks, n)
		}
	}
	k := off / runeMarkStep
	return x.runeMarks[k] + runeStarts(x.raw[k*runeMarkStep:off])
}

// runeStarts counts the bytes of b that start a UTF-8 character.
func runeStarts(b []byte) int {
	n := 0
	for _, c := range b {
		if c&0xC0 != 0x80 {
			n++
		}
	}
	return n
}

// Locate returns the line and column for pointer: the member name when the
// value is an object member and preferKey is set, the value otherwise. A
// pointer that does not exist in the file (a missing required key)
// resolves to its nearest existing ancestor; (0, 0) when none exists.
func (x *Index) Locate(pointer string, preferKey bool) (line, col int) {
	p := pointer
	for {
		if sp, ok := x.spans[p]; ok {
			off := sp.Val
			if preferKey && sp.Key >= 0 && p == pointer {
				off = sp.Key
			}
			return x.Position(off)
		}
		if p == "" {
			return 0, 0
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			p = ""
		} else {
			p = p[:i]
		}
	}
}

// walker is a minimal JSON scanner that records where every value starts.
type walker struct {
	x    *Index
	data []byte
	pos  int
}

func (w *walker) skipSpace() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// value scans one JSON value at the current position (after whitespace)
// and records it under pointer. It returns false on malformed input.
func (w *walker) value(pointer string, keyOff int, depth int) bool {
	w.skipSpace()
	if w.pos >= len(w.data) || depth > maxDepth {
		return false
	}
	w.x.spans[pointer] = Span{Key: keyOff, Val: w.pos}
	switch w.data[w.pos] {
	case '{':
		return w.object(pointer, depth)
	case '[':
		return w.array(pointer, depth)
	case '"':
		_, ok := w.str()
		return ok
	default:
		// number, true, false, null: up to the next delimiter.
		start := w.pos
		for w.pos < len(w.data) {
			switch w.data[w.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return w.pos > start
			}
			w.pos++
		}
		return w.pos > start
	}
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
// encoding/json itself rejects nesting deeper than 10000.
const maxDepth = 10000

func (w *walker) object(pointer string, depth int) bool {
	w.pos++ // '{'
	seen := map[string]bool{}
	w.skipSpace()
	if w.pos < len(w.data) && w.data[w.pos] == '}' {
		w.pos++
		return true
	}
	for {
		w.skipSpace()
		keyOff := w.pos
		if w.pos >= len(w.data) || w.data[w.pos] != '"' {
			return false
		}
		key, ok := w.str()
		if !ok {
			return false
		}
		child := pointer + "/" + EscapeToken(key)
		if seen[key] {
			w.x.dups = append(w.x.dups, Duplicate{Pointer: child, Offset: keyOff})
		}
		seen[key] = true
		w.skipSpace()
		if w.pos >= len(w.data) || w.data[w.pos] != ':' {
			return false
		}
		w.pos++
		if !w.value(child, keyOff, depth+1) {
			return false
		}
		if more, ok := w.separator('}'); !more {
			return ok
		}
	}
}

func (w *walker) array(pointer string, depth int) bool {
	w.pos++ // '['
	w.skipSpace()
	if w.pos < len(w.data) && w.data[w.pos] == ']' {
		w.pos++
		return true
	}
	for i := 0; ; i++ {
		if !w.value(pointer+"/"+strconv.Itoa(i), -1, depth+1) {
			return false
		}
		if more, ok := w.separator(']'); !more {
			return ok
		}
	}
}

// separator reads what follows a member or an element: ',' (another
// follows) or close (the object or array ends, ok); anything else, or the
// end of the text, is malformed (not ok).
func (w *walker) separator(close byte) (more, ok bool) {
	w.skipSpace()
	if w.pos >= len(w.data) {
		return false, false
	}
	switch w.data[w.pos] {
	case ',':
		w.pos++
		return true, true
	case close:
		w.pos++
		return false, true
	}
	return false, false
}

// str scans a JSON string at w.pos and returns its decoded value.
func (w *walker) str() (string, bool) {
	start := w.pos
	w.pos++ // opening quote
	escaped := false
	for w.pos < len(w.data) {
		c := w.data[w.pos]
		switch {
		case c == '\\':
			escaped = true
			w.pos += 2
			continue
		case c == '"':
			w.pos++
			lit := w.data[start:w.pos]
			if !escaped {
				return string(lit[1 : len(lit)-1]), true
			}
			var s string
			if err := json.Unmarshal(lit, &s); err != nil {
				return "", false
			}
			return s, true
		}
		w.pos++
	}
	return "", false
}

// EscapeToken escapes one JSON pointer token (RFC 6901): "~" as "~0", "/"
// as "~1".
func EscapeToken(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}
