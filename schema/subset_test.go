package schema

import (
	"reflect"
	"strings"
	"testing"
)

// subsetDoc uses every keyword the subset validator implements.
const subsetDoc = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://example.com/s.json",
  "title": "annotations are left out",
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$", "description": "a name"},
    "mode": {"enum": ["fast", "slow"], "default": "fast"},
    "count": {"type": "integer", "minimum": 1, "maximum": 10},
    "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5},
    "tags": {"type": "array", "items": {"type": "string"}},
    "either": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/item"}]},
    "map": {"type": "object", "additionalProperties": {"$ref": "#/$defs/item"}, "minProperties": 1},
    "open": {"type": "object", "additionalProperties": true},
    "nullable": {"type": ["string", "null"]}
  },
  "required": ["name", "mode"],
  "additionalProperties": false,
  "$defs": {"item": {"type": "object", "properties": {"id": {"type": "string"}, "tree": {"type": "array", "items": {"$ref": "#/$defs/item"}}}, "required": ["id"], "additionalProperties": false}}
}`

// The subset validator reports the library's failures, keyword for
// keyword, on values that fail each keyword it implements.
func TestSubsetMatchesLibrary(t *testing.T) {
	table, err := CompileSubset([]byte(subsetDoc))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := CompileSource(Source{Raw: []byte(subsetDoc), Builtin: true, Subset: table})
	if err != nil {
		t.Fatal(err)
	}
	if sub.sub == nil {
		t.Fatal("a built-in schema with a table is not checked by the subset validator")
	}
	lib, err := CompileSource(Source{Raw: []byte(subsetDoc), Builtin: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range []string{
		`{"name": "ab", "mode": "fast"}`,
		`{}`,
		`[]`,
		`{"name": 1, "mode": "other", "extra": 1, "more": null}`,
		`{"name": "a", "mode": "slow", "count": 0, "ratio": 0}`,
		`{"name": "abcdef", "mode": "slow", "count": 11, "ratio": 1.5, "tags": ["a", 2, null]}`,
		`{"name": "AB", "mode": "slow", "count": 2.0, "ratio": 1e-1, "tags": "a"}`,
		`{"name": "ünï", "mode": 3, "count": 2.5, "ratio": 2}`,
		`{"name": "ab", "mode": "fast", "either": 1, "map": {}, "open": {"x": 1}, "nullable": null}`,
		`{"name": "ab", "mode": "fast", "either": "s", "map": {"a": {"id": 1}, "b": {}}, "nullable": 1}`,
		`{"name": "ab", "mode": "fast", "either": {"tree": [{"id": "x", "tree": [{"nope": 1}]}]}}`,
		`{"name": "ab", "mode": "fast", "either": 1.5, "map": 3}`,
		`{"name": "ab", "mode": "fast", "either": {"id": "x"}}`,
	} {
		v, err := Decode([]byte(inst))
		if err != nil {
			t.Fatal(err)
		}
		got, want := sub.Failures(v), lib.Failures(v)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nsubset:  %+v\nlibrary: %+v", inst, got, want)
		}
	}
}

// A value that holds leaves the full document undecoded; a failure is
// worded from it.
func TestSubsetDecodesDocumentOnlyForFailures(t *testing.T) {
	table, err := CompileSubset([]byte(subsetDoc))
	if err != nil {
		t.Fatal(err)
	}
	sch, err := CompileSource(Source{Raw: []byte(subsetDoc), Builtin: true, Subset: table})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := Decode([]byte(`{"name": "ab", "mode": "fast"}`))
	if fails := sch.Failures(v); len(fails) != 0 {
		t.Fatalf("failures %+v for a valid value", fails)
	}
	if sch.doc != nil {
		t.Error("the full document was decoded for a valid value")
	}
	v, _ = Decode([]byte(`{"name": 1, "mode": "fast"}`))
	if fails := sch.Failures(v); len(fails) != 1 || fails[0].Node["description"] != "a name" {
		t.Fatalf("failures %+v: want one, on the schema object that describes the name", fails)
	}
}

// CompileSubset refuses what the subset validator might judge otherwise
// than the library, and CompileSource refuses a table for a user's schema
// or a table that names nodes it does not have.
func TestCompileSubsetRefuses(t *testing.T) {
	for doc, want := range map[string]string{
		`{"$schema": "http://json-schema.org/draft-07/schema#"}`: "2020-12 only",
		`{"const": 1}`: "const is not implemented",
		`{"properties": {"a": {"format": "email"}}}`: "at #/properties/a/format",
		`{"properties": {"a": {"$id": "x"}}}`:        "only allowed at the root",
		`{"items": false}`:                           "true and false only as additionalProperties",
		`{"$ref": "#"}`:                              "below its root",
		`{"$ref": "other.json#/a"}`:                  "JSON pointer into the document",
		`{"$ref": "#/$defs/none"}`:                   "does not resolve",
		`{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}`:                    "lead back to this schema",
		`{"anyOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}}`: "lead back to this schema",
		`{"enum": ["a", 1]}`: "strings only",
		`{"minLength": 1.5}`: "non-negative integer",
		`{"maximum": "1"}`:   "must be a number",
		`{"pattern": "(["}`:  "not a regular expression",
		`{"type": "text"}`:   `unknown type "text"`,
		`{"type": 1}`:        "type name",
		`{"required": "a"}`:  "list of names",
		`{"anyOf": []}`:      "non-empty list",
		`[1]`:                "must be an object",
		`{"a": `:             "unexpected EOF",
	} {
		_, err := CompileSubset([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", doc, err, want)
		}
	}
	// A recursive schema that enters a member or an item each time is
	// accepted.
	if _, err := CompileSubset([]byte(`{"$ref": "#/$defs/a", "$defs": {"a": {"items": {"$ref": "#/$defs/a"}}}}`)); err != nil {
		t.Error(err)
	}
	table, err := CompileSubset([]byte(subsetDoc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CompileSource(Source{Raw: []byte(subsetDoc), Subset: table}); err == nil {
		t.Error("a subset table was used for a user's schema")
	}
	for want, broken := range map[string]*SubsetTable{
		"names node 7": {Nodes: []SubsetNode{{Path: "#", Items: 7}}},
		"not sorted":   {Nodes: []SubsetNode{{Path: "#", Properties: []SubsetProperty{{Name: "b", Node: 1}, {Name: "a", Node: 1}}}, {Path: "#/x"}}},
		"count":        {Nodes: []SubsetNode{{Path: "#", MinLength: "-1"}}},
		"bound":        {Nodes: []SubsetNode{{Path: "#", Maximum: "ten"}}},
		"lead back":    {Nodes: []SubsetNode{{Path: "#"}, {Path: "#/a", Ref: 2}, {Path: "#/b", AnyOf: []int{1}}}},
		"at least":     {},
	} {
		if _, err := CompileSource(Source{Raw: []byte(`{}`), Builtin: true, Subset: broken}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a broken table: error %v, want one saying %q", err, want)
		}
	}
}
