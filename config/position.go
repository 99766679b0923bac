package config

import (
	"encoding/json"
	"io/fs"
	"strconv"
	"strings"
)

// source is the raw text of one configuration file with an index from JSON
// pointers to positions, so problems can say file:line:col.
type source struct {
	file  string // path relative to the agent folder, e.g. "agent.json"
	dir   string // the agent folder it was loaded from ("" when built in Go)
	fsys  fs.FS  // the files it was loaded from (LoadFS), nil for the disk
	raw   []byte
	index map[string]span // JSON pointer → positions
	dups  []duplicateKey  // keys that appear twice in one object
	lines []int           // byte offsets where lines start
	// runeMarks[k] is the number of characters in raw[:k*runeMarkStep],
	// built on the first position call so that each lookup counts at most
	// runeMarkStep bytes, even on a minified file that is one long line.
	runeMarks []int
	// aliases maps capstan's pointers to the climpt spelling the value
	// was taken from (set by ApplyDefaults).
	aliases aliases
}

// runeMarkStep is the byte distance between two entries of runeMarks.
const runeMarkStep = 512

// span locates one JSON value: key is the offset of its member name (or -1
// for array elements and the root), val the offset of the value itself.
type span struct {
	key, val int
}

// duplicateKey is a member name that occurs more than once in an object;
// encoding/json keeps the last one silently.
type duplicateKey struct {
	pointer string
	offset  int
}

// newSource indexes raw, which must be syntactically valid JSON (json.Valid);
// on anything else the index is partial but indexing never fails or panics.
func newSource(file string, raw []byte) *source {
	s := &source{file: file, raw: raw, index: map[string]span{}}
	s.lines = append(s.lines, 0)
	for i, b := range raw {
		if b == '\n' {
			s.lines = append(s.lines, i+1)
		}
	}
	w := walker{src: s, data: raw}
	w.value("", -1, 0)
	return s
}

// position returns the 1-based line and column of byte offset off; columns
// count characters (UTF-8 runes), as editors do. Each call costs at most
// a binary search and runeMarkStep bytes of counting, so reporting one
// problem per value of a large minified file stays linear.
func (s *source) position(off int) (line, col int) {
	if off < 0 {
		return 0, 0
	}
	if off > len(s.raw) {
		off = len(s.raw)
	}
	// Binary search for the last line start <= off.
	lo, hi := 0, len(s.lines)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if s.lines[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo + 1, s.runesBefore(off) - s.runesBefore(s.lines[lo]) + 1
}

// runesBefore is the number of characters in raw[:off]: the characters
// start bytes (every byte that is not a UTF-8 continuation byte), which is
// what utf8.RuneCount counts on valid UTF-8.
func (s *source) runesBefore(off int) int {
	if s.runeMarks == nil {
		s.runeMarks = make([]int, 1, len(s.raw)/runeMarkStep+1)
		n := 0
		for i := 0; i+runeMarkStep <= len(s.raw); i += runeMarkStep {
			n += runeStarts(s.raw[i : i+runeMarkStep])
			s.runeMarks = append(s.runeMarks, n)
		}
	}
	k := off / runeMarkStep
	return s.runeMarks[k] + runeStarts(s.raw[k*runeMarkStep:off])
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

// locate returns the line and column for pointer: the member name when the
// value is an object member (preferKey) or the value otherwise. A pointer
// that does not exist in the file (a missing required key) resolves to its
// nearest existing ancestor.
func (s *source) locate(pointer string, preferKey bool) (line, col int) {
	p := pointer
	for {
		if sp, ok := s.index[p]; ok {
			off := sp.val
			if preferKey && sp.key >= 0 && p == pointer {
				off = sp.key
			}
			return s.position(off)
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
	src  *source
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
	w.src.index[pointer] = span{key: keyOff, val: w.pos}
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
		child := pointer + "/" + escapePointer(key)
		if seen[key] {
			w.src.dups = append(w.src.dups, duplicateKey{pointer: child, offset: keyOff})
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
		w.skipSpace()
		if w.pos >= len(w.data) {
			return false
		}
		switch w.data[w.pos] {
		case ',':
			w.pos++
		case '}':
			w.pos++
			return true
		default:
			return false
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
		w.skipSpace()
		if w.pos >= len(w.data) {
			return false
		}
		switch w.data[w.pos] {
		case ',':
			w.pos++
		case ']':
			w.pos++
			return true
		default:
			return false
		}
	}
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

// escapePointer escapes one JSON pointer token (RFC 6901).
func escapePointer(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// JoinPointer builds a JSON pointer (RFC 6901) from unescaped tokens, as
// Problem.Pointer holds it: JoinPointer("steps", "a/b") is "/steps/a~1b".
func JoinPointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapePointer(t))
	}
	return b.String()
}
