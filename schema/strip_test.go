package schema

import (
	"encoding/json"
	"reflect"
	"testing"
)

const annotated = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "a thing", "description": "the root", "$comment": "for maintainers",
  "type": "object",
  "properties": {
    "description": {"type": "string", "description": "a property named like an annotation", "examples": ["x"]},
    "title": {"type": "string", "maxLength": 3, "deprecated": true},
    "mode": {"enum": ["description", {"title": "kept: data"}], "default": "description"},
    "fixed": {"const": {"description": "kept: data"}, "readOnly": true},
    "list": {"type": "array", "items": {"$ref": "#/$defs/item", "title": "an item"}},
    "either": {"anyOf": [{"type": "integer", "description": "n"}, {"type": "null", "writeOnly": true}]}
  },
  "required": ["description", "title"],
  "additionalProperties": false,
  "$defs": {"item": {"type": "object", "description": "an item", "properties": {"default": {"type": "boolean", "default": false}}}}
}`

func TestStripAnnotations(t *testing.T) {
	out, err := StripAnnotations([]byte(annotated))
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal([]byte(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "description": {"type": "string"},
    "title": {"type": "string", "maxLength": 3},
    "mode": {"enum": ["description", {"title": "kept: data"}]},
    "fixed": {"const": {"description": "kept: data"}},
    "list": {"type": "array", "items": {"$ref": "#/$defs/item"}},
    "either": {"anyOf": [{"type": "integer"}, {"type": "null"}]}
  },
  "required": ["description", "title"],
  "additionalProperties": false,
  "$defs": {"item": {"type": "object", "properties": {"default": {"type": "boolean"}}}}
}`), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stripped:\n%s", out)
	}
	if _, err := StripAnnotations([]byte(`{"type": `)); err == nil {
		t.Error("a document that is not JSON was stripped")
	}
}

// A built-in schema compiled from its stripped copy fails the same values
// at the same places, and its failures still point at the full document's
// schema objects (their descriptions word the hints).
func TestCompileStripped(t *testing.T) {
	full, err := CompileSource(Source{Raw: []byte(annotated), Builtin: true})
	if err != nil {
		t.Fatal(err)
	}
	stripped, err := StripAnnotations([]byte(annotated))
	if err != nil {
		t.Fatal(err)
	}
	fast, err := CompileSource(Source{Raw: []byte(annotated), Builtin: true, Stripped: stripped})
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range []string{
		`{}`,
		`{"description": 1, "title": "long", "mode": "other", "fixed": 2, "list": [{"default": "no"}], "either": "s", "extra": true}`,
		`{"description": "d", "title": "t", "list": [{"default": true}]}`,
	} {
		v, err := Decode([]byte(inst))
		if err != nil {
			t.Fatal(err)
		}
		a, b := full.Failures(v), fast.Failures(v)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s:\nfull:     %+v\nstripped: %+v", inst, a, b)
		}
	}
	v, _ := Decode([]byte(`{"description": 1, "title": "t"}`))
	fails := fast.Failures(v)
	if len(fails) != 1 || fails[0].Node["description"] != "a property named like an annotation" {
		t.Errorf("failures %+v: want one, on the schema object that describes the property", fails)
	}
	if _, err := CompileSource(Source{Raw: []byte(annotated), Stripped: stripped}); err == nil {
		t.Error("a stripped copy was compiled for a user's schema")
	}
}

// A built-in schema's full document is decoded only to word failures: a
// valid value leaves it undecoded.
func TestValidValueLeavesDocumentUndecoded(t *testing.T) {
	stripped, err := StripAnnotations([]byte(annotated))
	if err != nil {
		t.Fatal(err)
	}
	sch, err := CompileSource(Source{Raw: []byte(annotated), Builtin: true, Stripped: stripped})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := Decode([]byte(`{"description": "d", "title": "t"}`))
	if fails := sch.Failures(v); len(fails) != 0 {
		t.Fatalf("failures %+v for a valid value", fails)
	}
	if sch.doc != nil {
		t.Error("the full document was decoded for a valid value")
	}
	v, _ = Decode([]byte(`{"description": 1, "title": "t"}`))
	if fails := sch.Failures(v); len(fails) != 1 || fails[0].Node == nil {
		t.Fatalf("failures %+v: want one, with its schema object", fails)
	}
}
