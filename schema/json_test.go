package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func FuzzJSONRoundTrip(f *testing.F) {
	for _, s := range []string{
		`{"b": 1, "a": [true, null, "x\"y\\z\n\t\u0001\u2028é😀"], "c": {"": -1.5e-300}}`,
		`"\ud800"`, "\"bad \xff utf8\"", `[]`, `{}`, `12345678901234567890123`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			if _, err := decodeJSON([]byte(in)); err == nil {
				t.Fatalf("decodeJSON accepted invalid JSON %q", in)
			}
			return
		}
		want := useNumber(t, []byte(in))
		v, err := decodeJSON([]byte(in))
		if err != nil {
			if strings.Contains(err.Error(), "nested deeper") {
				return
			}
			t.Fatalf("decodeJSON rejected valid JSON %q: %v", in, err)
		}
		var buf bytes.Buffer
		if err := encodeJSON(&buf, v); err != nil {
			t.Fatal(err)
		}
		if !json.Valid(buf.Bytes()) {
			t.Fatalf("encodeJSON produced invalid JSON %q from %q", buf.Bytes(), in)
		}
		if got := useNumber(t, buf.Bytes()); !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip changed the value:\n in %q\nout %q", in, buf.Bytes())
		}
		if !equalJSON(v, v) {
			t.Fatal("value not equal to itself")
		}
	})
}

// useNumber decodes data into encoding/json's generic form with numbers as
// json.Number.
func useNumber(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return v
}

func TestKeyOrderKept(t *testing.T) {
	v, err := decodeJSON([]byte(`{"z": 1, "a": {"y": 2, "b": 3}, "m": 4, "z": 5}`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := encodeJSON(&buf, v); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), `{"z":5,"a":{"y":2,"b":3},"m":4}`; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestDraft07Keywords(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s.json", `{
	  "definitions": {"pt": {"type": "object", "properties": {"x": {"type": "number"}}}},
	  "tuple": {"type": "array", "items": [{"$ref": "#/definitions/pt"}, {"type": "string"}], "additionalItems": {"$ref": "#/definitions/pt"}},
	  "deps": {"type": "object", "properties": {"a": {"type": "string"}}, "dependencies": {"a": ["b"], "c": {"$ref": "#/definitions/pt"}}},
	  "arr": {"allOf": [{"type": "array", "items": {"type": "object"}}, {"items": {"properties": {"k": {"type": "string"}}}}]},
	  "byIndex": {"anyOf": [{"type": "string"}, {"$ref": "#/definitions/pt"}]}
	}`)
	r := NewResolver(dir)
	got, err := r.Resolve("s.json", "tuple")
	if err != nil {
		t.Fatal(err)
	}
	pt := `{"type": "object", "properties": {"x": {"type": "number"}}, "additionalProperties": false}`
	assertJSON(t, got, `{"type": "array", "items": [`+pt+`, {"type": "string"}], "additionalItems": `+pt+`}`)
	got, err = r.Resolve("s.json", "deps")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `{"type": "object", "properties": {"a": {"type": "string"}}, "dependencies": {"a": ["b"], "c": `+pt+`}, "additionalProperties": false}`)
	got, err = r.Resolve("s.json", "arr")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `{"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": false}}`)
	got, err = r.Resolve("s.json", "#/byIndex/anyOf/1")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, pt)
	for _, name := range []string{"#/byIndex/anyOf/2", "#/byIndex/anyOf/01", "#/byIndex/anyOf/-1", "#/byIndex/anyOf/x", "#/tuple/type/0", "#byIndex"} {
		_, err := r.Resolve("s.json", name)
		wantSchemaErr(t, err)
	}
}

func TestMalformedKeywordValues(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s.json", `{
	  "props": {"properties": 1},
	  "anyOf": {"anyOf": {"a": {}}},
	  "deps": {"dependencies": []},
	  "member": {"allOf": [1]},
	  "required": {"allOf": [{"required": "a"}, {"required": ["b"]}]},
	  "types": {"allOf": [{"type": 1}, {"type": "string"}]},
	  "bounds": {"allOf": [{"minimum": "1"}, {"minimum": 2}]},
	  "enums": {"allOf": [{"enum": "a"}, {"enum": ["a"]}]},
	  "alts": {"allOf": [{"anyOf": [{"type": "string"}]}, {"anyOf": [{"type": "number"}]}]},
	  "propsMerge": {"allOf": [{"properties": []}, {"properties": {"a": {}}}]}
	}`)
	r := NewResolver(dir)
	for _, name := range []string{"props", "anyOf", "deps", "member", "required", "types", "bounds", "enums", "alts", "propsMerge"} {
		_, err := r.Resolve("s.json", name)
		e := wantSchemaErr(t, err)
		if !strings.HasPrefix(e.Pointer, "/"+name) {
			t.Errorf("%s: pointer %q: %v", name, e.Pointer, e)
		}
	}
}
