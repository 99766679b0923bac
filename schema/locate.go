package schema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/internal/jsonvalue"
)

// Compile resolves the schema called name in file ([Resolver.Resolve])
// and compiles the result ([Compile]). The result is in 2020-12 form (the
// schemas of a file that names an earlier draft in $schema are rewritten
// into what they mean there); format is asserted when the files name
// draft-04, -06 or -07, as those drafts do.
//
// A schema that is not a valid JSON Schema (a keyword with a value its
// draft does not allow, a regular expression that does not compile) is a
// SCHEMA_RESOLUTION error that wraps an *[InvalidSchemaError]: one
// [SchemaProblem] per bad keyword, at the schema file, the JSON pointer
// into the whole file and its line and column, including the schemas its
// $refs lead to. The error's own File, Pointer, Line and Column are those
// of the first problem.
func (r *Resolver) Compile(file, name string) (json.RawMessage, *Validator, error) {
	res, err := r.resolve(file, name)
	if err != nil {
		return nil, nil, err
	}
	raw := append(json.RawMessage(nil), res.raw...)
	v, err := compileValidator(Source{Raw: raw, assertFormat: res.draft.assertsFormat})
	if err == nil {
		return raw, v, nil
	}
	var me *MetaError
	if !errors.As(err, &me) {
		return nil, nil, err
	}
	inv := r.locate(file, name, res.draft)
	if inv == nil || len(inv.Problems) == 0 {
		// Only the merged schema is invalid (allOf members or $ref
		// siblings that each pass): no single keyword to point at.
		return nil, nil, err
	}
	first := inv.Problems[0]
	e := resErr(first.File, first.Pointer, "schema %s#%s is not a valid JSON Schema (%s)", file, name, inv.Draft)
	e.Line, e.Column = first.Line, first.Column
	return nil, nil, hint(wrap(e, inv), "in the schema file, "+InvalidKeywordHint)
}

// InvalidKeywordHint says what to do about the listed [SchemaProblem]s,
// and InvalidOneKeywordHint about one of them, reported on its own.
const (
	InvalidKeywordHint    = "give each listed keyword" + keywordValueHint
	InvalidOneKeywordHint = "give this keyword" + keywordValueHint
	keywordValueHint      = " a value its JSON Schema draft allows (for pattern and patternProperties, a regular expression Go's regexp package accepts)"
)

// InvalidSchemaError lists the ways a named schema, and the schemas its
// $refs lead to, are not a valid JSON Schema, each where it is written.
type InvalidSchemaError struct {
	// Draft names the draft the schema is checked against ("2020-12").
	Draft string
	// Problems are sorted by file, line and column.
	Problems []SchemaProblem
}

// SchemaProblem is one bad keyword (or value) in a schema file.
type SchemaProblem struct {
	// File is the schema file, relative to the resolver's directory.
	File string
	// Pointer is the JSON pointer of the keyword in the whole file.
	Pointer string
	// Line and Column (1-based, in characters) are where the keyword's
	// name is written; 0 when unknown.
	Line, Column int
	// Message says what is wrong with it.
	Message string
}

// String renders the problem as "file:line:col: at pointer: message".
func (p SchemaProblem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Column)
	}
	fmt.Fprintf(&b, ": at %s: %s", p.Pointer, p.Message)
	return b.String()
}

func (e *InvalidSchemaError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return joinProblems(lines)
}

// locate checks, where they are written and against draft d, the schema
// called name in file and every schema its $refs lead to, and returns what
// is wrong with them;
// nil when the resolution itself fails.
func (r *Resolver) locate(file, name string, d *draft) *InvalidSchemaError {
	rel, err := cleanRel(".", file)
	if err != nil {
		return nil
	}
	root, err := r.load(rel)
	if err != nil {
		return nil
	}
	ptr, node, err := lookupName(root, name)
	if err != nil {
		return nil
	}
	type entry struct {
		file, ptr string
		node      any
	}
	entries := []entry{{rel, ptr, node}}
	st := &state{r: r, budget: maxNodes, visit: func(f, p string, n any) { entries = append(entries, entry{f, p, n}) }}
	st.stack = append(st.stack, refKey(rel, ptr))
	if _, err := st.resolve(rel, node, ptr, 0); err != nil {
		return nil
	}
	inv := &InvalidSchemaError{Draft: d.name}
	seen := map[string]bool{}
	// The files' positions are indexed here, once a problem is found, not
	// when every file is loaded.
	indexes := map[string]*jsonvalue.Index{}
	index := func(file string) *jsonvalue.Index {
		if x, ok := indexes[file]; ok {
			return x
		}
		r.mu.Lock()
		text := r.texts[file]
		r.mu.Unlock()
		var x *jsonvalue.Index
		if text != nil {
			x = jsonvalue.NewIndex(text)
		}
		indexes[file] = x
		return x
	}
	for _, en := range entries {
		if seen[refKey(en.file, en.ptr)] {
			continue
		}
		seen[refKey(en.file, en.ptr)] = true
		var buf bytes.Buffer
		if encodeJSON(&buf, en.node) != nil {
			continue
		}
		doc, err := Decode(buf.Bytes())
		if err != nil {
			continue
		}
		fails, err := schemaFailures(d, doc)
		if err != nil {
			continue
		}
		for _, line := range problemLinesOf(fails) {
			abs := en.ptr + line.ptr
			key := en.file + "#" + abs + "\x00" + line.msg
			if seen[key] {
				continue // a schema inside another one checked
			}
			seen[key] = true
			p := SchemaProblem{File: en.file, Pointer: abs, Message: line.msg}
			if x := index(en.file); x != nil {
				p.Line, p.Column = x.Locate(abs, true)
			}
			inv.Problems = append(inv.Problems, p)
		}
	}
	slices.SortStableFunc(inv.Problems, func(a, b SchemaProblem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), cmp.Compare(a.Pointer, b.Pointer))
	})
	return inv
}

// located is one problem line of a schema check, split.
type located struct{ ptr, msg string }

// problemLinesOf words fails one per location and message, without
// repeats, keeping the pointer apart ([problemLines] joins them).
func problemLinesOf(fails []Failure) []located {
	seen := map[located]bool{}
	var out []located
	for _, f := range fails {
		l := located{ptr: f.Pointer(), msg: f.Message}
		if f.OfName {
			l.msg = "the name: " + f.Message
		}
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}
