package agentdir

import (
	"io/fs"
	"strings"

	"github.com/capstan-dev/capstan/internal/jsonvalue"
)

// source is the raw text of one configuration file with an index from JSON
// pointers to positions, so problems can say file:line:col.
type source struct {
	file string // path relative to the agent folder, e.g. "agent.json"
	dir  string // the agent folder it was loaded from ("" when built in Go)
	fsys fs.FS  // the files it was loaded from (LoadFS), nil for the disk
	raw  []byte
	pos  *jsonvalue.Index
	// aliases maps capstan's pointers to the climpt spelling the value
	// was taken from (set by ApplyDefaults).
	aliases aliases
}

// newSource indexes raw, which must be syntactically valid JSON (json.Valid);
// on anything else the index is partial but indexing never fails or panics.
func newSource(file string, raw []byte) *source {
	return &source{file: file, raw: raw, pos: jsonvalue.NewIndex(raw)}
}

// position returns the 1-based line and column of byte offset off
// (jsonvalue.Index.Position).
func (s *source) position(off int) (line, col int) { return s.pos.Position(off) }

// locate returns the line and column for pointer: the member name when the
// value is an object member (preferKey) or the value otherwise. A pointer
// that does not exist in the file (a missing required key) resolves to its
// nearest existing ancestor.
func (s *source) locate(pointer string, preferKey bool) (line, col int) {
	return s.pos.Locate(pointer, preferKey)
}

// escapePointer escapes one JSON pointer token (RFC 6901).
func escapePointer(tok string) string { return jsonvalue.EscapeToken(tok) }

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
