package schema

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/schemas"
	"github.com/kaptinlin/jsonschema"
)

const (
	s04   = `"$schema": "http://json-schema.org/draft-04/schema#", `
	s06   = `"$schema": "http://json-schema.org/draft-06/schema#", `
	s07   = `"$schema": "http://json-schema.org/draft-07/schema#", `
	s2019 = `"$schema": "https://json-schema.org/draft/2019-09/schema", `
	s2020 = `"$schema": "https://json-schema.org/draft/2020-12/schema", `
)

// validSchemas are schemas each draft accepts; the draft is the one
// $schema names (2020-12 without it).
var validSchemas = []string{
	// 2020-12.
	`true`, `false`, `{}`,
	`{"type": "string"}`, `{"type": ["string", "null"]}`,
	`{` + s2020 + `"$id": "https://example.com/a.json#", "$anchor": "_a.b-1", "$comment": "c"}`,
	`{"$defs": {"a": {"$defs": {"b": {"type": "integer", "minimum": 0}}}}, "$ref": "#/$defs/a/$defs/b"}`,
	`{"$defs": {"t": false, "u": true}, "properties": {"a": {"$ref": "#/$defs/t"}}}`,
	`{"prefixItems": [{"type": "string"}, true], "items": false}`,
	`{"contains": {"type": "string"}, "minContains": 0, "maxContains": 2, "unevaluatedItems": false}`,
	`{"dependentRequired": {"a": ["b", "c"], "d": []}, "dependentSchemas": {"a": {"required": ["e"]}}}`,
	`{"properties": {"a": true}, "patternProperties": {"^x-": {"type": "string"}}, "unevaluatedProperties": false, "propertyNames": {"maxLength": 8}}`,
	`{"contentEncoding": "base64", "contentMediaType": "application/json", "contentSchema": {"type": "object"}}`,
	`{"$id": "https://example.com/tree", "$dynamicAnchor": "node", "properties": {"children": {"type": "array", "items": {"$dynamicRef": "#node"}}}}`,
	`{"enum": [], "const": null, "default": {"any": 1}, "examples": [1, "a"]}`,
	`{"enum": [1, "a", null, [1], {"b": 2}], "multipleOf": 0.5, "minimum": -1.5, "exclusiveMaximum": 10}`,
	`{"minLength": 0, "maxLength": 10, "pattern": "^[a-z]+$", "format": "date", "minItems": 1, "maxItems": 3, "uniqueItems": true, "minProperties": 0, "maxProperties": 2}`,
	`{"allOf": [true], "anyOf": [{"type": "string"}, false], "oneOf": [{}], "not": {"type": "null"}, "if": true, "then": {"minimum": 1}, "else": false}`,
	`{"title": "t", "description": "d", "deprecated": false, "readOnly": true, "writeOnly": false}`,
	`{"$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/core": true, "https://example.com/vocab": false}}`,
	`{"definitions": {"a": {"type": "string"}}, "$ref": "#/definitions/a", "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}`,
	// Keywords no draft defines are allowed, whatever their value.
	`{"x-capstan": {"type": 5}, "minimun": "typo"}`,
	// 2019-09.
	`{` + s2019 + `"items": [{"type": "string"}, true], "additionalItems": false}`,
	`{` + s2019 + `"items": {"type": "string"}, "$anchor": "a:b", "$defs": {"x": {"$defs": {"y": true}}}}`,
	`{` + s2019 + `"$id": "https://example.com/t", "$recursiveAnchor": true, "properties": {"c": {"$recursiveRef": "#"}}}`,
	`{` + s2019 + `"dependentRequired": {"a": ["b"]}, "unevaluatedProperties": {"type": "string"}, "contentSchema": true}`,
	// draft-07.
	`{` + s07 + `"definitions": {"d": {"type": "string", "format": "date"}}, "$ref": "#/definitions/d"}`,
	`{` + s07 + `"if": {"type": "string"}, "then": {"minLength": 1}, "else": false, "items": [{}], "additionalItems": false}`,
	// draft-06.
	`{` + s06 + `"const": "x", "contains": {"type": "string"}, "propertyNames": {"pattern": "^a"}, "examples": [1]}`,
	// draft-04.
	`{` + s04 + `"id": "http://example.com/x", "maximum": 3, "exclusiveMaximum": true, "required": ["a"]}`,
}

// invalidSchemas are schemas their draft refuses, with the draft's name
// and the location the problem names.
var invalidSchemas = []struct{ raw, draft, where string }{
	{`5`, "2020-12", "(root)"},
	{`"string"`, "2020-12", "(root)"},
	{`{"type": "strin"}`, "2020-12", "/type"},
	{`{"type": 5}`, "2020-12", "/type"},
	{`{"type": []}`, "2020-12", "/type"},
	{`{"type": ["string", "string"]}`, "2020-12", "/type"},
	{`{"type": ["string", "strin"]}`, "2020-12", "/type/1"},
	{`{"properties": {"x": {"type": "strin"}}}`, "2020-12", "/properties/x/type"},
	{`{"properties": []}`, "2020-12", "/properties"},
	{`{"properties": {"a": 5}}`, "2020-12", "/properties/a"},
	{`{"minLength": -1}`, "2020-12", "/minLength"},
	{`{"minLength": 1.5}`, "2020-12", "/minLength"},
	{`{"maxItems": "3"}`, "2020-12", "/maxItems"},
	{`{"minContains": -2}`, "2020-12", "/minContains"},
	{`{"multipleOf": 0}`, "2020-12", "/multipleOf"},
	{`{"maximum": "3"}`, "2020-12", "/maximum"},
	{`{"required": "a"}`, "2020-12", "/required"},
	{`{"required": ["a", "a"]}`, "2020-12", "/required"},
	{`{"required": [1]}`, "2020-12", "/required/0"},
	{`{"pattern": 5}`, "2020-12", "/pattern"},
	{`{"patternProperties": {"^a": "x"}}`, "2020-12", "/patternProperties/^a"},
	{`{"$ref": 5}`, "2020-12", "/$ref"},
	{`{"$dynamicRef": true}`, "2020-12", "/$dynamicRef"},
	{`{"$id": "https://example.com/a#frag"}`, "2020-12", "/$id"},
	{`{"$anchor": "1a"}`, "2020-12", "/$anchor"},
	{`{"$dynamicAnchor": "a b"}`, "2020-12", "/$dynamicAnchor"},
	{`{"enum": "a"}`, "2020-12", "/enum"},
	{`{"$defs": {"a": {"$defs": {"b": {"minimum": "0"}}}}}`, "2020-12", "/$defs/a/$defs/b/minimum"},
	{`{"$defs": []}`, "2020-12", "/$defs"},
	{`{"prefixItems": []}`, "2020-12", "/prefixItems"},
	{`{"prefixItems": {"type": "string"}}`, "2020-12", "/prefixItems"},
	{`{"items": [{"type": "string"}]}`, "2020-12", "/items"},
	{`{"allOf": []}`, "2020-12", "/allOf"},
	{`{"anyOf": [{"type": "strin"}]}`, "2020-12", "/anyOf/0/type"},
	{`{"not": "x"}`, "2020-12", "/not"},
	{`{"dependentRequired": {"a": "b"}}`, "2020-12", "/dependentRequired/a"},
	{`{"dependentSchemas": {"a": 1}}`, "2020-12", "/dependentSchemas/a"},
	{`{"dependencies": {"a": 5}}`, "2020-12", "/dependencies/a"},
	{`{"unevaluatedProperties": "no"}`, "2020-12", "/unevaluatedProperties"},
	{`{"contentSchema": 1}`, "2020-12", "/contentSchema"},
	{`{"uniqueItems": "yes"}`, "2020-12", "/uniqueItems"},
	{`{"title": 5}`, "2020-12", "/title"},
	{`{"$vocabulary": {"https://example.com/v": "yes"}}`, "2020-12", "/$vocabulary/https:~1~1example.com~1v"},
	{`{` + s2019 + `"minLength": -1}`, "2019-09", "/minLength"},
	{`{` + s2019 + `"items": []}`, "2019-09", "/items"},
	{`{` + s2019 + `"items": [5]}`, "2019-09", "/items/0"},
	{`{` + s2019 + `"items": 5}`, "2019-09", "/items"},
	{`{` + s2019 + `"additionalItems": 5}`, "2019-09", "/additionalItems"},
	{`{` + s2019 + `"$recursiveAnchor": "yes"}`, "2019-09", "/$recursiveAnchor"},
	{`{` + s2019 + `"$recursiveRef": 5}`, "2019-09", "/$recursiveRef"},
	{`{` + s2019 + `"$anchor": "_a"}`, "2019-09", "/$anchor"},
	{`{` + s2019 + `"properties": {"a": {"required": "b"}}}`, "2019-09", "/properties/a/required"},
	{`{` + s07 + `"required": "name"}`, "draft-07", "/required"},
	{`{` + s07 + `"type": "strin"}`, "draft-07", "/type"},
	{`{` + s07 + `"properties": {"x": {"minLength": -1}}}`, "draft-07", "/properties/x/minLength"},
	{`{` + s07 + `"pattern": 5}`, "draft-07", "/pattern"},
	{`{` + s06 + `"type": 5}`, "draft-06", "/type"},
	{`{` + s06 + `"properties": 5}`, "draft-06", "/properties"},
	{`{` + s04 + `"exclusiveMinimum": 3, "minimum": 1}`, "draft-04", "/exclusiveMinimum"},
	{`{` + s04 + `"required": []}`, "draft-04", "/required"},
}

// draftAndDoc decodes raw and returns the draft it declares.
func draftAndDoc(t *testing.T, raw []byte) (*draft, any) {
	t.Helper()
	doc, err := Decode(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	d, err := draftOf(doc)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return d, doc
}

func TestMetaSchemaAcceptsValidSchemas(t *testing.T) {
	for _, raw := range validSchemas {
		d, doc := draftAndDoc(t, []byte(raw))
		if err := checkMeta(d, doc); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
		if _, err := CompileSource(Source{Raw: []byte(raw)}); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

func TestMetaSchemaRefusesInvalidSchemas(t *testing.T) {
	for _, tc := range invalidSchemas {
		d, doc := draftAndDoc(t, []byte(tc.raw))
		err := checkMeta(d, doc)
		var me *MetaError
		if !errors.As(err, &me) {
			t.Errorf("%s: got %v, want a meta-schema problem at %s", tc.raw, err, tc.where)
			continue
		}
		if me.Draft != tc.draft {
			t.Errorf("%s: draft %s, want %s", tc.raw, me.Draft, tc.draft)
		}
		found := false
		for _, p := range me.Problems() {
			found = found || strings.HasPrefix(p, "at "+tc.where+": ")
		}
		if !found {
			t.Errorf("%s: no problem at %s: %v", tc.raw, tc.where, me.Problems())
		}
	}
}

// Every schema capstan ships or keeps in the repository (its configuration
// schemas, the examples, test data) is valid for its draft.
func TestRepositorySchemasAreValid(t *testing.T) {
	docs := map[string][]byte{"schemas.Agent": schemas.Agent(), "schemas.StepsRegistry": schemas.StepsRegistry()}
	err := filepath.WalkDir("..", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == ".git" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".schema.json") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			docs[filepath.ToSlash(path)] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"../schemas/agent.schema.json", "../examples/fix-failing-test/schemas/fix.schema.json", "../schema/testdata/schemas/issue.schema.json"} {
		if docs[want] == nil {
			t.Errorf("%s was not found; the walk of the repository is broken", want)
		}
	}
	for name, raw := range docs {
		d, doc := draftAndDoc(t, raw)
		if err := checkMeta(d, doc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The meta-schemas read nothing: capstan's own refer only inside
// themselves, and the library's are checked by a compiler without loaders
// (the library would need one for 2019-09 and 2020-12, which capstan
// never asks it for).
func TestMetaSchemasReadNothing(t *testing.T) {
	for _, d := range []*draft{draft201909, draft202012} {
		if d.libraryMeta {
			t.Errorf("%s is checked with the library's meta-schema", d.name)
		}
		m, err := ownMeta(d)
		if err != nil {
			t.Fatal(err)
		}
		if refs := m.sch.UnresolvedReferenceURIs(); len(refs) != 0 {
			t.Errorf("%s: unresolved %v", d.name, refs)
		}
		if bytes.Contains(m.raw, []byte(`"$ref":"http`)) {
			t.Errorf("%s refers to another document: %s", d.name, m.raw)
		}
	}
	for _, d := range []*draft{draft4, draft6, draft7} {
		m := libraryMetaOf(d)
		if len(m.c.Loaders) != 0 {
			t.Errorf("%s: the compiler has loaders %v", d.name, m.c.Loaders)
		}
	}
}

// The meta-schemas are used from many goroutines at once (run with -race).
func TestMetaSchemaConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, tc := range invalidSchemas[:12] {
				doc, _ := Decode([]byte(tc.raw))
				d, _ := draftOf(doc)
				if checkMeta(d, doc) == nil {
					t.Errorf("%s passed", tc.raw)
				}
			}
			for _, raw := range []string{`{` + s07 + `"type": "strin"}`, `{` + s04 + `"required": []}`} {
				doc, _ := Decode([]byte(raw))
				d, _ := draftOf(doc)
				if checkMeta(d, doc) == nil {
					t.Errorf("%s passed", raw)
				}
			}
		}()
	}
	wg.Wait()
}

// capstan's meta-schema for 2020-12 and the library's for draft-07 give
// the same verdict as the meta-schemas json-schema.org publishes, on every
// schema of the tables above. The published documents are read from the
// module cache of a dependency that ships them, when it is there; nothing
// is fetched.
func TestMetaSchemaAgreesWithThePublishedOnes(t *testing.T) {
	// The module is a dependency of package tool, so it is in the module
	// cache wherever capstan was built: on CI its absence is a failure,
	// not a reason to skip the comparison.
	missing := t.Skipf
	if os.Getenv("CI") != "" {
		missing = t.Fatalf
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/google/jsonschema-go")
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		missing("the published meta-schemas are not in the module cache (%v)", err)
	}
	root := filepath.Join(dir, "jsonschema", "meta-schemas")
	if _, err := os.Stat(root); err != nil {
		missing("the module has no published meta-schemas (%v)", err)
	}
	c := newCompiler(false)
	read := func(u string) (io.ReadCloser, error) {
		name := strings.TrimPrefix(stripFragment(u), "https://json-schema.org/draft/2020-12/")
		b, err := os.ReadFile(filepath.Join(root, "draft2020-12", filepath.FromSlash(name)+".json"))
		return io.NopCloser(bytes.NewReader(b)), err
	}
	c.RegisterLoader("https", read)
	published := map[*draft]*jsonschema.Schema{}
	for d, file := range map[*draft]string{draft202012: "draft2020-12/schema.json", draft7: "draft7/schema.json"} {
		raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if refs := sch.UnresolvedReferenceURIs(); len(refs) != 0 {
			t.Fatalf("%s: unresolved %v", file, refs)
		}
		published[d] = sch
	}
	raws := append([]string(nil), validSchemas...)
	for _, tc := range invalidSchemas {
		raws = append(raws, tc.raw)
	}
	compared := 0
	for _, raw := range raws {
		d, doc := draftAndDoc(t, []byte(raw))
		pub := published[d]
		if pub == nil {
			continue
		}
		compared++
		want := pub.ValidateStruct(doc).IsValid()
		if got := checkMeta(d, doc) == nil; got != want {
			t.Errorf("%s (%s): capstan says valid=%v, the published meta-schema says %v", raw, d.name, got, want)
		}
	}
	t.Logf("compared %d schemas", compared)
}

// BenchmarkCheckMeta checks a user schema of each kind of meta-schema:
// capstan's own (2020-12) and the library's (draft-07).
func BenchmarkCheckMeta(b *testing.B) {
	const body = `"type": "object", "required": ["id", "items"], "properties": {
	  "id": {"type": "string", "pattern": "^[a-z]+$", "minLength": 1},
	  "count": {"type": "integer", "minimum": 0, "maximum": 100},
	  "items": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}}}}}`
	for _, tc := range []struct{ name, raw string }{{"2020-12", `{` + s2020 + body}, {"draft-07", `{` + s07 + body}} {
		doc, err := Decode([]byte(tc.raw))
		if err != nil {
			b.Fatal(err)
		}
		d, err := draftOf(doc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := checkMeta(d, doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// checkMeta reports the ways doc does not satisfy draft d's meta-schema
// alone (checkSchema adds the regular expressions).
func checkMeta(d *draft, doc any) error {
	fails, err := metaFailures(d, doc)
	if err != nil || len(fails) == 0 {
		return err
	}
	return newMetaError(d, fails)
}
