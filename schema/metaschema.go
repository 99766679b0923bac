package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kaptinlin/jsonschema"
)

// draft is one JSON Schema draft capstan compiles.
type draft struct {
	name string
	// meta is the URL of its meta-schema.
	meta string
	// assertsFormat tells whether "format" is an assertion (drafts 4 to
	// 7) or an annotation (2019-09 and later).
	assertsFormat bool
	// libraryMeta tells whether schemas are checked against the
	// meta-schema the library carries (drafts 4 to 7) or capstan's own.
	libraryMeta bool
}

var (
	draft4      = &draft{"draft-04", "http://json-schema.org/draft-04/schema", true, true}
	draft6      = &draft{"draft-06", "http://json-schema.org/draft-06/schema", true, true}
	draft7      = &draft{"draft-07", "http://json-schema.org/draft-07/schema", true, true}
	draft201909 = &draft{"2019-09", "https://json-schema.org/draft/2019-09/schema", false, false}
	draft202012 = &draft{"2020-12", "https://json-schema.org/draft/2020-12/schema", false, false}
)

// draftOf returns the draft doc declares with $schema (2020-12 when it
// declares none).
func draftOf(doc any) (*draft, error) {
	m, ok := doc.(map[string]any)
	if !ok {
		return draft202012, nil
	}
	v, ok := m["$schema"]
	if !ok {
		return draft202012, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, errors.New("$schema must be a string naming a JSON Schema draft")
	}
	return draftNamed(s)
}

// headerDraft returns the draft the document raw declares, reading its
// top-level members only until $schema.
func headerDraft(raw []byte) (*draft, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return draft202012, nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if key == "$schema" {
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, err
			}
			return draftOf(map[string]any{"$schema": v})
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return draft202012, nil
}

// draftNamed returns the draft whose meta-schema URL is s.
func draftNamed(s string) (*draft, error) {
	norm := strings.TrimSuffix(strings.TrimSpace(s), "#")
	norm = strings.TrimPrefix(strings.TrimPrefix(norm, "https://"), "http://")
	for _, d := range []*draft{draft4, draft6, draft7, draft201909, draft202012} {
		if norm == strings.TrimPrefix(strings.TrimPrefix(d.meta, "https://"), "http://") {
			return d, nil
		}
	}
	return nil, fmt.Errorf("$schema %q is not a draft capstan supports; use draft-04, draft-06, draft-07, 2019-09 or 2020-12 (for example %q)", s, draft202012.meta)
}

// The meta-schemas are compiled the first time a schema of their draft is
// checked, never at start-up: capstan's own for 2019-09 and 2020-12, the
// library's for drafts 4, 6 and 7.
var (
	ownMetas     sync.Map // *draft → func() (*Schema, error)
	libraryMetas sync.Map // *draft → func() *libraryMeta
)

func ownMeta(d *draft) (*Schema, error) {
	f, _ := ownMetas.LoadOrStore(d, sync.OnceValues(func() (*Schema, error) { return compileOwnMeta(d) }))
	return f.(func() (*Schema, error))()
}

func compileOwnMeta(d *draft) (*Schema, error) {
	doc, ok := ownMetaSchema(d)
	if !ok {
		return nil, fmt.Errorf("no meta-schema of %s", d.name)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("meta-schema of %s: %w", d.name, err)
	}
	name := "capstan:///meta-schema/" + d.name + ".json"
	sch, err := newCompiler(false).Compile(raw, name)
	if err != nil {
		return nil, fmt.Errorf("meta-schema of %s: %w", d.name, err)
	}
	if refs := sch.UnresolvedReferenceURIs(); len(refs) > 0 {
		return nil, fmt.Errorf("meta-schema of %s: reference %q cannot be resolved", d.name, refs[0])
	}
	return &Schema{sch: sch, raw: raw}, nil
}

// libraryMeta checks schemas against the meta-schema the library carries
// for a draft. Its compiler has no loaders, so nothing is fetched.
type libraryMeta struct {
	// mu serializes checks, as [Schema.mu] does.
	mu sync.Mutex
	c  *jsonschema.Compiler
}

func libraryMetaOf(d *draft) *libraryMeta {
	f, _ := libraryMetas.LoadOrStore(d, sync.OnceValue(func() *libraryMeta {
		return &libraryMeta{c: newCompiler(false).SetDefaultDialect(jsonschema.Dialect(d.meta + "#"))}
	}))
	return f.(func() *libraryMeta)()
}

// failures returns the ways doc is not a valid schema of the library
// meta's draft, located in doc. The library reaches its meta-schema only
// through ValidateSchema, which takes the schema as JSON text and decodes
// the meta-schema's text on each call before using the one it compiled
// the first time.
func (m *libraryMeta) failures(doc any) ([]Failure, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	res, err := m.c.ValidateSchema(raw)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return failuresOf(res, doc, nil), nil
}

// metaFailures returns the ways doc is not a valid schema of draft d.
func metaFailures(d *draft, doc any) ([]Failure, error) {
	if d.libraryMeta {
		fails, err := libraryMetaOf(d).failures(doc)
		if err != nil {
			return nil, fmt.Errorf("checking the schema against the %s meta-schema: %w", d.name, err)
		}
		return fails, nil
	}
	meta, err := ownMeta(d)
	if err != nil {
		return nil, err
	}
	return meta.Failures(doc), nil
}

// checkSchema reports every way doc, a schema a user wrote, is not a
// valid schema of draft d: the problems its meta-schema finds and every
// regular expression Go cannot compile, all at once (the library checks
// the regular expressions only once the meta-schema is satisfied).
func checkSchema(d *draft, doc any) error {
	fails, err := schemaFailures(d, doc)
	if err != nil {
		return err
	}
	if len(fails) == 0 {
		return nil
	}
	sortFailures(fails)
	return newMetaError(d, fails)
}

// schemaFailures returns what [checkSchema] reports, unsorted.
func schemaFailures(d *draft, doc any) ([]Failure, error) {
	fails, err := metaFailures(d, doc)
	if err != nil {
		return nil, err
	}
	return append(fails, patternFailures(doc)...), nil
}

func newMetaError(d *draft, fails []Failure) *MetaError {
	return &MetaError{Draft: d.name, fails: fails, problems: problemLines(fails)}
}

// MetaError is a schema that is not a valid JSON Schema: it does not
// satisfy its draft's meta-schema, or a regular expression in it does not
// compile.
type MetaError struct {
	// Draft names the draft ("2020-12", "draft-07", ...).
	Draft    string
	fails    []Failure
	problems []string
}

func (e *MetaError) Error() string {
	return fmt.Sprintf("not a valid JSON Schema (%s): %s", e.Draft, joinProblems(e.problems))
}

// Problems returns one line per problem, as [ValidationError.Problems].
func (e *MetaError) Problems() []string { return append([]string(nil), e.problems...) }

// Failures returns one Failure per problem, located in the schema
// document (Instance is the path of the bad keyword or value in it).
func (e *MetaError) Failures() []Failure { return append([]Failure(nil), e.fails...) }

// patternFailures returns one Failure per regular expression in the schema
// doc (a "pattern" value or a "patternProperties" name) that Go's regexp
// package, which the library validates with, cannot compile. It follows
// only the keywords whose values are schemas, so data that happens to
// hold a "pattern" member (an enum value, a default) is not read as one.
func patternFailures(doc any) []Failure {
	var out []Failure
	var walk func(v any, loc []string, depth int)
	sub := func(v any, loc []string, depth int, tokens ...string) {
		walk(v, append(slices.Clip(loc), tokens...), depth+1)
	}
	walk = func(v any, loc []string, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > maxDepth {
			return
		}
		if p, ok := m["pattern"].(string); ok {
			if f, bad := patternFailure(p, append(slices.Clip(loc), "pattern")); bad {
				out = append(out, f)
			}
		}
		for k, kv := range m {
			switch schemaValueKind(k) {
			case "schema":
				sub(kv, loc, depth, k)
			case "schemaOrSchemas":
				if a, ok := kv.([]any); ok {
					for i, e := range a {
						sub(e, loc, depth, k, strconv.Itoa(i))
					}
				} else {
					sub(kv, loc, depth, k)
				}
			case "schemas":
				if a, ok := kv.([]any); ok {
					for i, e := range a {
						sub(e, loc, depth, k, strconv.Itoa(i))
					}
				}
			case "schemaMap", "dependencies":
				mm, ok := kv.(map[string]any)
				if !ok {
					continue
				}
				for name, e := range mm {
					if k == "patternProperties" {
						if f, bad := patternFailure(name, append(slices.Clip(loc), k, name)); bad {
							out = append(out, f)
							continue
						}
					}
					sub(e, loc, depth, k, name)
				}
			}
		}
	}
	walk(doc, nil, 0)
	return out
}

// schemaValueKind returns the kind of value keyword k takes (a name in
// valueKinds) when that value holds subschemas, "" otherwise. items and
// additionalItems take a schema or, before 2020-12, an array of them.
func schemaValueKind(k string) string {
	switch k {
	case "items", "additionalItems":
		return "schemaOrSchemas"
	}
	for _, kw := range keywordsBoth {
		if kw.name == k {
			switch kw.kind {
			case "schema", "schemas", "schemaMap", "dependencies":
				return kw.kind
			}
			return ""
		}
	}
	return ""
}

// patternFailure checks the regular expression p found at loc (the
// member name at loc for patternProperties) and words the problem.
func patternFailure(p string, loc []string) (Failure, bool) {
	if p == "" {
		return Failure{}, false
	}
	_, err := regexp.Compile(p)
	if err == nil {
		return Failure{}, false
	}
	return Failure{Keyword: "pattern", Message: patternMessage(p, err), Instance: loc, Value: p}, true
}

// patternMessage says why p is not a regular expression capstan can use.
func patternMessage(p string, err error) string {
	why := err.Error()
	var se *syntax.Error
	if errors.As(err, &se) {
		why = string(se.Code)
	}
	return fmt.Sprintf("%q is not a regular expression capstan can use: %s", p, why)
}
