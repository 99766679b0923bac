package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
)

// metaFS holds the meta-schemas json-schema.org publishes for each draft,
// stored under their URL paths, so a user's schema is checked without
// fetching anything.
//
//go:embed metaschemas
var metaFS embed.FS

// draft is one JSON Schema draft capstan compiles.
type draft struct {
	name string
	// meta is the URL of its meta-schema.
	meta string
	// assertsFormat tells whether "format" is an assertion (drafts 4 to
	// 7) or an annotation (2019-09 and later).
	assertsFormat bool
}

var (
	draft4      = &draft{"draft-04", "http://json-schema.org/draft-04/schema", true}
	draft6      = &draft{"draft-06", "http://json-schema.org/draft-06/schema", true}
	draft7      = &draft{"draft-07", "http://json-schema.org/draft-07/schema", true}
	draft201909 = &draft{"2019-09", "https://json-schema.org/draft/2019-09/schema", false}
	draft202012 = &draft{"2020-12", "https://json-schema.org/draft/2020-12/schema", false}
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

// metaSchemas compiles each draft's meta-schema the first time a schema
// of that draft is checked, never at start-up.
var metaSchemas sync.Map // *draft → func() (*Schema, error)

func metaSchema(d *draft) (*Schema, error) {
	f, _ := metaSchemas.LoadOrStore(d, sync.OnceValues(func() (*Schema, error) { return compileMeta(d) }))
	return f.(func() (*Schema, error))()
}

func compileMeta(d *draft) (*Schema, error) {
	raw, err := readMeta(d.meta)
	if err != nil {
		return nil, err
	}
	c := newCompiler(false)
	load := func(ref string) (io.ReadCloser, error) {
		b, err := readMeta(ref)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	c.RegisterLoader("http", load)
	c.RegisterLoader("https", load)
	sch, err := c.Compile(raw, d.meta)
	if err != nil {
		return nil, fmt.Errorf("meta-schema %s: %w", d.meta, err)
	}
	if refs := sch.UnresolvedReferenceURIs(); len(refs) > 0 {
		return nil, fmt.Errorf("meta-schema %s: reference %q cannot be resolved", d.meta, refs[0])
	}
	return &Schema{sch: sch, raw: raw}, nil
}

// readMeta returns the embedded meta-schema document at ref.
func readMeta(ref string) ([]byte, error) {
	u, err := url.Parse(stripFragment(ref))
	if err != nil || u.Host != "json-schema.org" {
		return nil, fmt.Errorf("%s is not a built-in meta-schema; schemas are never fetched", ref)
	}
	b, err := metaFS.ReadFile("metaschemas" + u.Path + ".json")
	if err != nil {
		return nil, fmt.Errorf("%s is not a built-in meta-schema; schemas are never fetched", ref)
	}
	return b, nil
}

// checkMeta reports the ways doc is not a valid schema of draft d.
func checkMeta(d *draft, doc any) error {
	meta, err := metaSchema(d)
	if err != nil {
		return err
	}
	fails := meta.Failures(doc)
	if len(fails) == 0 {
		return nil
	}
	return &MetaError{Draft: d.name, problems: problemLines(fails)}
}

// MetaError is a schema that does not satisfy its draft's meta-schema.
type MetaError struct {
	// Draft names the draft ("2020-12", "draft-07", ...).
	Draft    string
	problems []string
}

func (e *MetaError) Error() string {
	return fmt.Sprintf("not a valid JSON Schema (%s): %s", e.Draft, joinProblems(e.problems))
}

// Problems returns one line per problem, as [ValidationError.Problems].
func (e *MetaError) Problems() []string { return append([]string(nil), e.problems...) }
