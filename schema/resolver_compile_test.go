package schema

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

// Resolver.Compile locates each problem of an invalid schema in the file
// it is written in, a file a $ref leads to included, with the pointer
// into that whole file.
func TestResolverCompileLocatesProblems(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.json", "{\n  \"step\": {\n    \"properties\": {\"s\": {\"minLength\": -1}, \"o\": {\"$ref\": \"b.json#/$defs/x\"}}\n  }\n}")
	write("b.json", "{\"$defs\": {\"x\": {\"pattern\": \"([\"}}}")
	_, _, err := NewResolver(dir).Compile("a.json", "step")
	var inv *InvalidSchemaError
	if !errors.As(err, &inv) {
		t.Fatalf("got %v, want an InvalidSchemaError", err)
	}
	var got []string
	for _, p := range inv.Problems {
		got = append(got, p.String())
	}
	want := []string{
		"a.json:3:26: at /step/properties/s/minLength: -1 is less than the minimum 0",
		"b.json:1:18: at /$defs/x/pattern: \"([\" is not a regular expression capstan can use: missing closing ]",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if e := agenterr.From(err); e == nil || e.File != "a.json" || e.Line != 3 || e.Hint == "" {
		t.Fatalf("error not located at the first problem: %+v", e)
	}
}

// A schema file's $schema decides the draft its resolved schema is
// compiled and checked against: draft-07's array form of items is a tuple
// there, not an invalid schema, and its problems are worded for draft-07.
func TestResolverCompileUsesTheFilesDraft(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "d7.json", `{"$schema": "http://json-schema.org/draft-07/schema#",
  "pair": {"type": "array", "items": [{"type": "string"}, {"$ref": "num.json#/$defs/n"}], "additionalItems": false}}`)
	writeFile(t, dir, "num.json", `{"$defs": {"n": {"type": "number"}}}`)
	r := NewResolver(dir)
	raw, v, err := r.Compile("d7.json", "pair")
	if err != nil {
		t.Fatalf("draft-07 tuple refused: %v", err)
	}
	// Providers read the result as 2020-12: the tuple is prefixItems there.
	assertJSON(t, raw, `{"type":"array","prefixItems":[{"type":"string"},{"type":"number"}],"items":false}`)
	if err := v.Validate(json.RawMessage(`["a", 1]`)); err != nil {
		t.Fatalf("a valid pair refused: %v", err)
	}
	for _, bad := range []string{`["a", "b"]`, `[1, 1]`, `["a", 1, 2]`} {
		if err := v.Validate(json.RawMessage(bad)); err == nil {
			t.Errorf("%s passed the draft-07 tuple", bad)
		}
	}

	writeFile(t, dir, "bad7.json", "{\"$schema\": \"http://json-schema.org/draft-07/schema#\",\n \"s\": {\"items\": [{\"type\": \"strin\"}]}}")
	_, _, err = r.Compile("bad7.json", "s")
	var inv *InvalidSchemaError
	if !errors.As(err, &inv) || inv.Draft != "draft-07" {
		t.Fatalf("got %v, want draft-07 problems", err)
	}
	found := false
	for _, p := range inv.Problems {
		found = found || p.Pointer == "/s/items/0/type" && p.Line == 2 && strings.Contains(p.Message, "strin")
	}
	if !found {
		t.Fatalf("no problem at /s/items/0/type on line 2: %v", inv.Problems)
	}

	// No $schema anywhere: 2020-12, where the array form is invalid.
	writeFile(t, dir, "plain.json", `{"pair": {"type": "array", "items": [{"type": "string"}]}}`)
	if _, _, err := r.Compile("plain.json", "pair"); !errors.As(err, &inv) || inv.Draft != "2020-12" {
		t.Fatalf("got %v, want a 2020-12 problem", err)
	}
}

// Files whose $refs inline each other must agree on the draft; a $schema
// capstan does not know is refused where it is written.
func TestResolverRefusesMixedOrUnknownDrafts(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.json", `{"$schema": "http://json-schema.org/draft-07/schema#", "s": {"properties": {"x": {"$ref": "b.json#/$defs/x"}}}}`)
	writeFile(t, dir, "b.json", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"x": {"type": "string"}}}`)
	writeFile(t, dir, "c.json", `{"s": {"properties": {"x": {"$ref": "b.json#/$defs/x"}}}}`)
	writeFile(t, dir, "d.json", `{"$schema": "https://example.com/my-draft", "s": {"type": "string"}}`)
	r := NewResolver(dir)
	_, err := r.Resolve("a.json", "s")
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSchemaResolution || e.File != "b.json" || e.Pointer != "/$schema" ||
		!strings.Contains(e.Message, "a.json") || !strings.Contains(e.Message, "draft-07") || e.Hint == "" {
		t.Fatalf("mixed drafts: got %+v", e)
	}
	// A file without $schema takes the draft of the files it meets.
	if _, _, err := r.Compile("c.json", "s"); err != nil {
		t.Fatalf("a file without $schema referring to a 2020-12 file: %v", err)
	}
	_, err = r.Resolve("d.json", "s")
	if e := agenterr.From(err); e == nil || e.File != "d.json" || e.Pointer != "/$schema" || !strings.Contains(e.Message, "my-draft") {
		t.Fatalf("unknown draft: got %+v", e)
	}
}

// A file of an earlier draft is inlined in the 2020-12 form of what it
// means there, whatever its draft calls it; format is asserted for drafts
// 4 to 7.
func TestResolverModernizesEarlierDrafts(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "d4.json", `{"$schema": "http://json-schema.org/draft-04/schema#",
  "n": {"id": "n", "type": "integer", "maximum": 10, "exclusiveMaximum": true, "minimum": 0, "exclusiveMinimum": false, "const": 3}}`)
	writeFile(t, dir, "d7.json", `{"$schema": "http://json-schema.org/draft-07/schema#",
  "o": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "mail": {"type": "string", "format": "email"}},
        "dependencies": {"a": ["b"], "b": {"required": ["mail"]}}, "dependentRequired": {"mail": ["a"]},
        "additionalProperties": true},
  "list": {"type": "array", "items": {"type": "string"}, "additionalItems": false, "minContains": 2}}`)
	writeFile(t, dir, "d2019.json", `{"$schema": "https://json-schema.org/draft/2019-09/schema",
  "t": {"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "integer"}, "dependencies": {"x": ["y"]}}}`)
	writeFile(t, dir, "now.json", `{"mail": {"type": "string", "format": "email"}}`)
	r := NewResolver(dir)
	cases := []struct{ file, name, want string }{
		{"d4.json", "n", `{"type":"integer","exclusiveMaximum":10,"minimum":0}`},
		{"d7.json", "o", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"mail":{"type":"string","format":"email"}},` +
			`"dependentRequired":{"a":["b"]},"dependentSchemas":{"b":{"required":["mail"]}},"additionalProperties":true}`},
		{"d7.json", "list", `{"type":"array","items":{"type":"string"}}`},
		{"d2019.json", "t", `{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"}}`},
	}
	for _, c := range cases {
		raw, _, err := r.Compile(c.file, c.name)
		if err != nil {
			t.Fatalf("%s#%s: %v", c.file, c.name, err)
		}
		assertJSON(t, raw, c.want)
	}
	_, v, err := r.Compile("d4.json", "n")
	if err != nil {
		t.Fatal(err)
	}
	for val, ok := range map[string]bool{"9": true, "10": false, "0": true, "4": true} {
		if err := v.Validate(json.RawMessage(val)); (err == nil) != ok {
			t.Errorf("draft-04 %s: valid=%v, want %v", val, err == nil, ok)
		}
	}
	_, v, err = r.Compile("d7.json", "o")
	if err != nil {
		t.Fatal(err)
	}
	for val, ok := range map[string]bool{
		`{"a": "x", "b": "y", "mail": "m@example.com"}`: true,
		`{"a": "x"}`:                           false, // a needs b
		`{"b": "y"}`:                           false, // b needs mail
		`{"b": "y", "mail": "not an address"}`: false, // draft-07 asserts format
		`{"mail": "m@example.com"}`:            true,  // dependentRequired is not draft-07's
	} {
		if err := v.Validate(json.RawMessage(val)); (err == nil) != ok {
			t.Errorf("draft-07 %s: valid=%v, want %v (%v)", val, err == nil, ok, err)
		}
	}
	_, v, err = r.Compile("now.json", "mail")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(json.RawMessage(`"not an address"`)); err != nil {
		t.Errorf("2020-12 asserted format: %v", err)
	}
}
