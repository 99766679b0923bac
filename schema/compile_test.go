package schema

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// A user's schema is checked against its draft's meta-schema, so a typo
// in a keyword's value is a clear error when it is compiled.
func TestCompileChecksTheMetaSchema(t *testing.T) {
	for _, tc := range []struct{ raw, draft, where string }{
		{`{"type": "strin"}`, "2020-12", "at /type:"},
		{`{"properties": {"a": {"type": "strin"}}}`, "2020-12", "at /properties/a/type:"},
		{`{"$schema": "https://json-schema.org/draft/2019-09/schema", "minLength": -1}`, "2019-09", "at /minLength:"},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "required": "name"}`, "draft-07", "at /required:"},
		{`{"$schema": "http://json-schema.org/draft-06/schema#", "type": 5}`, "draft-06", "at /type:"},
		{`{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 3, "minimum": 1}`, "draft-04", "at /exclusiveMinimum:"},
	} {
		_, err := CompileSource(Source{Raw: []byte(tc.raw), URL: "mem:///user.json"})
		var me *MetaError
		if !errors.As(err, &me) || me.Draft != tc.draft || !strings.Contains(err.Error(), tc.where) {
			t.Errorf("%s: got %v, want a %s meta-schema problem %s", tc.raw, err, tc.draft, tc.where)
		}
	}
	// A schema that declares a draft capstan does not know is refused.
	if _, err := CompileSource(Source{Raw: []byte(`{"$schema": "https://example.com/my-draft"}`)}); err == nil || !strings.Contains(err.Error(), "not a draft capstan supports") {
		t.Errorf("unknown $schema: %v", err)
	}
	// Capstan's own schemas may skip the check; a user's may not.
	if _, err := CompileSource(Source{Raw: []byte(`{"type": "strin"}`), Builtin: true}); err != nil && errors.As(err, new(*MetaError)) {
		t.Errorf("a builtin schema was meta-checked: %v", err)
	}
}

// $schema selects the draft: its keywords and its meaning of "format".
func TestCompileDrafts(t *testing.T) {
	for _, tc := range []struct {
		raw       string
		good, bad string
	}{
		// draft-07: definitions, and format asserted.
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"d": {"type": "string", "format": "date"}}, "$ref": "#/definitions/d"}`, `"2024-01-31"`, `"yesterday"`},
		// draft-04: boolean exclusiveMaximum.
		{`{"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 3, "exclusiveMaximum": true}`, `2`, `3`},
		// draft-06: const.
		{`{"$schema": "http://json-schema.org/draft-06/schema#", "const": "x"}`, `"x"`, `"y"`},
		// 2019-09: dependentRequired.
		{`{"$schema": "https://json-schema.org/draft/2019-09/schema", "dependentRequired": {"a": ["b"]}}`, `{"a": 1, "b": 2}`, `{"a": 1}`},
		// 2020-12 (the default): prefixItems, and format is an annotation.
		{`{"prefixItems": [{"type": "string", "format": "date"}], "items": false}`, `["yesterday"]`, `["a", 1]`},
		// An unknown format is ignored even where formats are asserted.
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "string", "format": "capstan-id"}`, `"anything"`, `5`},
	} {
		s, err := CompileSource(Source{Raw: []byte(tc.raw)})
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if err := s.Check([]byte(tc.good)); err != nil {
			t.Errorf("%s: %s rejected: %v", tc.raw, tc.good, err)
		}
		if err := s.Check([]byte(tc.bad)); err == nil {
			t.Errorf("%s: %s accepted", tc.raw, tc.bad)
		}
	}
}

// Every failing keyword is reported with its instance location (escaped
// as a JSON pointer) and its schema path; a required property that is
// absent is reported once, as missing.
func TestFailuresAreComplete(t *testing.T) {
	s, err := CompileSource(Source{Raw: []byte(`{
	  "$defs": {"name": {"type": "string", "minLength": 2}},
	  "type": "object",
	  "required": ["id", "a/b"],
	  "additionalProperties": false,
	  "properties": {
	    "id": {"type": "integer"},
	    "a/b": {"$ref": "#/$defs/name"},
	    "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 1}
	  }
	}`)})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := Decode([]byte(`{"a/b": "z", "tags": ["x", "w"], "extra": 1, "more": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Failure{}
	for _, f := range s.Failures(inst) {
		got[f.Pointer()+" "+f.Keyword] = f
	}
	for key, path := range map[string]string{
		" required":             "#/required",
		" additionalProperties": "#/additionalProperties",
		"/a~1b minLength":       "#/$defs/name/minLength",
		"/tags maxItems":        "#/properties/tags/maxItems",
		"/tags/1 enum":          "#/properties/tags/items/enum",
	} {
		f, ok := got[key]
		if !ok {
			t.Errorf("no failure %q in %v", key, got)
			continue
		}
		if f.SchemaPath != path {
			t.Errorf("%s: schema path %q, want %q", key, f.SchemaPath, path)
		}
	}
	if len(got) != 5 {
		t.Errorf("want 5 failures, got %d: %v", len(got), got)
	}
	if f := got[" required"]; strings.Join(f.Names, ",") != "id" {
		t.Errorf("missing names %v", f.Names)
	}
	if f := got[" additionalProperties"]; strings.Join(f.Names, ",") != "extra,more" {
		t.Errorf("not allowed names %v", f.Names)
	}
}

// A reference to a document on the network or outside what the loader
// allows is refused, and nothing is fetched.
func TestCompileFetchesNothing(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside.json")
	if err := os.WriteFile(outside, []byte(`{"type": "string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	allowed := func(u string) ([]byte, error) {
		p := strings.TrimPrefix(u, "file://")
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return nil, errors.New("outside the allowed folder")
		}
		return os.ReadFile(p)
	}
	for _, ref := range []string{srv.URL + "/s.json", strings.Replace(srv.URL, "http:", "https:", 1) + "/s.json", "file://" + filepath.ToSlash(outside)} {
		raw := []byte(`{"properties": {"a": {"$ref": "` + ref + `"}}}`)
		for _, loader := range []func(string) ([]byte, error){nil, allowed} {
			_, err := CompileSource(Source{Raw: raw, URL: "file://" + filepath.ToSlash(filepath.Join(dir, "s.json")), Loader: loader})
			var se *SourceError
			if !errors.As(err, &se) || se.Stage != "compile" {
				t.Errorf("%s (loader %v): got %v, want a compile error", ref, loader != nil, err)
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server was asked %d times", n)
	}
}

// A document a reference loads is checked against its meta-schema too.
func TestCompileChecksReferencedDocuments(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "part.json"), []byte(`{"type": "strin"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(u string) ([]byte, error) { return os.ReadFile(strings.TrimPrefix(u, "file://")) }
	_, err := CompileSource(Source{Raw: []byte(`{"properties": {"a": {"$ref": "part.json"}}}`), URL: "file://" + filepath.ToSlash(filepath.Join(dir, "root.json")), Loader: read})
	if err == nil {
		t.Fatal("a referenced document with an invalid type compiled")
	}
	if !strings.Contains(err.Error(), "part.json") || !strings.Contains(err.Error(), "not a valid JSON Schema") {
		t.Errorf("the error should name the document and its problem: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "part.json"), []byte(`{"type": "string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := CompileSource(Source{Raw: []byte(`{"properties": {"a": {"$ref": "part.json"}}}`), URL: "file://" + filepath.ToSlash(filepath.Join(dir, "root.json")), Loader: read})
	if err != nil {
		t.Fatal(err)
	}
	if s.Check([]byte(`{"a": 1}`)) == nil {
		t.Fatal("the referenced schema was not applied")
	}
}

// Documents that refer to each other in a cycle are refused with a hint,
// not followed without end; a document referred to twice without a cycle,
// or referring to itself, is read once.
func TestCompileReferenceCycle(t *testing.T) {
	files := map[string]string{
		"file:///s/a.json": `{"properties": {"b": {"$ref": "b.json"}}}`,
		"file:///s/b.json": `{"properties": {"a": {"$ref": "a.json"}}}`,
		"file:///s/c.json": `{"properties": {"x": {"$ref": "d.json"}, "y": {"$ref": "e.json"}, "z": {"$ref": "c.json#/$defs/n"}}, "$defs": {"n": {"type": "integer"}}}`,
		"file:///s/d.json": `{"type": "boolean"}`,
		"file:///s/e.json": `{"properties": {"x": {"$ref": "d.json"}}}`,
	}
	var reads []string
	load := func(u string) ([]byte, error) {
		reads = append(reads, u)
		if len(reads) > 20 {
			t.Fatalf("the loader was asked %d times: %v", len(reads), reads[:20])
		}
		if s, ok := files[u]; ok {
			return []byte(s), nil
		}
		return nil, errors.New("no such file")
	}
	_, err := CompileSource(Source{URL: "file:///s/a.json", Loader: load})
	if err == nil || !strings.Contains(err.Error(), "cycle") || !strings.Contains(err.Error(), "$defs") {
		t.Fatalf("a cycle of references: got %v, want an error naming the cycle and the fix", err)
	}
	reads = nil
	s, err := CompileSource(Source{URL: "file:///s/c.json", Loader: load})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(reads) // the library follows properties in no set order
	if want := []string{"file:///s/c.json", "file:///s/d.json", "file:///s/e.json"}; !slices.Equal(reads, want) {
		t.Errorf("read %v, want %v", reads, want)
	}
	if s.Check([]byte(`{"x": true, "y": {"x": false}, "z": 1}`)) != nil || s.Check([]byte(`{"y": {"x": 1}}`)) == nil {
		t.Error("the referenced documents were not applied")
	}
}

// A reference the loader refuses is an error even where the library would
// leave it out silently (a $dynamicRef in a referenced document).
func TestCompileRefusedDynamicRef(t *testing.T) {
	load := func(u string) ([]byte, error) {
		switch u {
		case "file:///s/a.json":
			return []byte(`{"$ref": "b.json"}`), nil
		case "file:///s/b.json":
			return []byte(`{"properties": {"x": {"$dynamicRef": "file:///etc/passwd#x"}}}`), nil
		}
		return nil, errors.New("outside the allowed folder")
	}
	_, err := CompileSource(Source{URL: "file:///s/a.json", Loader: load})
	if err == nil || !strings.Contains(err.Error(), "outside the allowed folder") {
		t.Fatalf("got %v, want the loader's refusal", err)
	}
}

// A compiled schema is used from many goroutines at once (the library
// caches compiled patterns on first use; run with -race).
func TestSchemaConcurrentUse(t *testing.T) {
	v, err := Compile([]byte(`{"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}, "patternProperties": {"^x-": {"type": "integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for i := 0; i < 8; i++ {
		go func() {
			var err error
			for j := 0; j < 50 && err == nil; j++ {
				if v.Validate([]byte(`{"id": "abc", "x-n": 1}`)) != nil || v.Validate([]byte(`{"id": "ABC"}`)) == nil {
					err = errors.New("wrong verdict")
				}
			}
			done <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// An invalid pattern is reported on one line per pattern, at its place in
// the schema, as the meta-schema's problems are.
func TestCompileInvalidPattern(t *testing.T) {
	_, err := CompileSource(Source{Raw: []byte(`{"properties": {"a": {"pattern": "("}, "b": {"patternProperties": {"(?=x)": {}}}}}`)})
	var me *MetaError
	if !errors.As(err, &me) {
		t.Fatalf("got %v, want a MetaError", err)
	}
	want := []string{
		"at /properties/a/pattern: \"(\" is not a regular expression capstan can use: missing closing )",
		"at /properties/b/patternProperties/(?=x): \"(?=x)\" is not a regular expression capstan can use: invalid or unsupported Perl syntax",
	}
	got := me.Problems()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the message spans lines: %q", err)
	}
}

// An invalid regular expression is reported with the meta-schema's
// problems, not only once they are fixed; data that holds a "pattern"
// member (an enum value, a default) is not read as a schema.
func TestCompileInvalidPatternWithMetaProblems(t *testing.T) {
	_, err := CompileSource(Source{Raw: []byte(`{"properties": {"s": {"type": "strin", "minLength": -1, "pattern": "(["},
		"t": {"enum": [{"pattern": "(["}], "default": {"pattern": "("}},
		"u": {"items": {"patternProperties": {"[": true}}}}}`)})
	var me *MetaError
	if !errors.As(err, &me) {
		t.Fatalf("got %v, want a MetaError", err)
	}
	got := me.Problems()
	want := []string{
		"at /properties/s/minLength: -1 is less than the minimum 0",
		"at /properties/s/pattern: \"([\" is not a regular expression capstan can use: missing closing ]",
		"at /properties/s/type: value \"strin\" must be one of \"array\", \"boolean\", \"integer\", \"null\", \"number\", \"object\", \"string\"",
		"at /properties/u/items/patternProperties/[: \"[\" is not a regular expression capstan can use: missing closing ]",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	var ptrs []string
	for _, f := range me.Failures() {
		ptrs = append(ptrs, f.Pointer())
	}
	if !slices.Equal(ptrs, []string{"/properties/s/minLength", "/properties/s/pattern", "/properties/s/type", "/properties/u/items/patternProperties/["}) {
		t.Fatalf("failures at %q", ptrs)
	}
}
