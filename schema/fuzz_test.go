package schema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzExtractJSON(f *testing.F) {
	for _, s := range []string{
		`{"a": 1}`,
		"text ```json\n{\"b\": [1, {\"c\": \"}\"}]}\n``` more",
		"~~~\n[1,2]\n~~~",
		`prose {"x": "\"{"} prose {"y": 2}`,
		"{{{{\"a\":1}",
		"```json`\n{}\n```",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		out, ok := ExtractJSON(text)
		if !ok {
			if out != nil {
				t.Fatal("non-nil result without ok")
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("returned invalid JSON %q", out)
		}
		if !strings.Contains(text, string(out)) {
			t.Fatalf("returned %q, which is not part of the text", out)
		}
		all := JSONCandidates(text)
		if len(all) == 0 || string(all[0]) != string(out) {
			t.Fatalf("ExtractJSON %q is not the first of the candidates %q", out, all)
		}
		for i, c := range all {
			if !json.Valid(c) || !strings.Contains(text, string(c)) {
				t.Fatalf("candidate %q is not JSON from the text", c)
			}
			for _, d := range all[:i] {
				if string(c) == string(d) {
					t.Fatalf("candidate %q repeated", c)
				}
			}
		}
	})
}

func FuzzResolve(f *testing.F) {
	f.Add(commonSchema, issueSchema, "issue.schema.json", "initial.issue")
	f.Add(`{"a": {"$ref": "b.json#/x"}}`, `{"x": {"$ref": "a.json#/a"}}`, "a.json", "a")
	f.Add(`{"a": {"allOf": [{"type": "string"}, {"$ref": "#/a"}]}}`, `{}`, "a.json", "#/a")
	f.Add(`{"$defs": {"x": {"properties": {"p": {"$ref": "#/$defs/x"}}}}}`, `[]`, "a.json", "x")
	f.Add(`{"a": {"$ref": "../etc/passwd"}}`, `{"x": true}`, "b.json", "x")
	f.Add(`{"s": {"type": "object", "properties": {"l": {"type": "array", "items": {"$ref": "b.json#/$defs/i"}}, "c": {"anyOf": [{"properties": {"x": {"type": "string"}}}, {"type": "null"}]}}}}`,
		`{"$defs": {"i": {"allOf": [{"type": "object", "properties": {"a": {"enum": [1, 2]}}, "required": ["a"]}, {"properties": {"a": {"enum": [2, 3]}, "b": {"type": ["integer", "string"]}}}], "description": "d"}}}`, "a.json", "s")
	f.Add(`{"x": {"$ref": "b.json#/y", "properties": {"q": {"minimum": 3}}}}`, `{"y": {"type": "object", "properties": {"q": {"minimum": 1, "maximum": 9}}, "additionalProperties": {"type": "object"}}}`, "a.json", "#/x")
	f.Add(`{"$schema": "http://json-schema.org/draft-07/schema#", "t": {"items": [{"$ref": "b.json#/n"}], "additionalItems": false, "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}}`,
		`{"$schema": "http://json-schema.org/draft-07/schema", "n": {"type": "number", "format": "email", "prefixItems": [true]}}`, "a.json", "t")
	f.Add(`{"$schema": "http://json-schema.org/draft-04/schema#", "n": {"id": "x", "maximum": 3, "exclusiveMaximum": true, "const": 1, "allOf": [{"$ref": "b.json#/m"}]}}`,
		`{"$schema": "https://json-schema.org/draft/2019-09/schema", "m": {"items": [true], "additionalItems": {"type": "integer"}}}`, "a.json", "n")
	f.Fuzz(func(t *testing.T, a, b, file, name string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(a), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "b.json"), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		// The seed's file names map onto the two files.
		if file == "issue.schema.json" {
			file = "b.json"
		}
		r := NewResolver(dir)
		out, err := r.Resolve(file, name)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON output %s", out)
		}
		again, err := r.Resolve(file, name)
		if err != nil || string(again) != string(out) {
			t.Fatalf("second resolution differs: %s %v", again, err)
		}
		if msg := checkResolved(out); msg != "" {
			t.Fatalf("%s in %s", msg, out)
		}
		// Resolution is a fixpoint: resolving the result again changes
		// nothing.
		if err := os.WriteFile(filepath.Join(dir, "out.json"), out, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, isObj := generic(t, out).(map[string]any); isObj {
			again, err := NewResolver(dir).Resolve("out.json", "")
			if err != nil || string(again) != string(out) {
				t.Fatalf("not a fixpoint:\n%s\n%s %v", out, again, err)
			}
		}
		// Arbitrary input may be an invalid schema; Compile must only
		// report it, and Resolver.Compile hand back Resolve's document.
		_, _ = Compile(out)
		if raw, _, err := r.Compile(file, name); err == nil && string(raw) != string(out) {
			t.Fatalf("Resolver.Compile returned %s, Resolve %s", raw, out)
		}
	})
}

// checkResolved returns a description of the first violation of the
// resolver's output invariants in out, or "": no $ref, allOf or $defs at a
// schema position, and additionalProperties or unevaluatedProperties on
// every object schema.
func checkResolved(out []byte) string {
	v, err := decodeJSON(out)
	if err != nil {
		return "undecodable output: " + err.Error()
	}
	var walk func(v any, at string) string
	walk = func(v any, at string) string {
		s, ok := v.(*object)
		if !ok {
			return ""
		}
		for _, k := range []string{"$ref", "allOf", "$defs", "definitions"} {
			if _, ok := s.get(k); ok {
				return k + " left at " + at
			}
		}
		if isObjectSchema(s) {
			_, ap := s.get("additionalProperties")
			_, up := s.get("unevaluatedProperties")
			if !ap && !up {
				return "object schema without additionalProperties at " + at
			}
		}
		for _, k := range s.keys {
			sub := s.vals[k]
			switch {
			case schemaKeywords[k]:
				if a, ok := sub.([]any); ok {
					for _, e := range a {
						if m := walk(e, at+"/"+k); m != "" {
							return m
						}
					}
					continue
				}
				if m := walk(sub, at+"/"+k); m != "" {
					return m
				}
			case schemaMapKeywords[k]:
				if o, ok := sub.(*object); ok {
					for _, pk := range o.keys {
						if m := walk(o.vals[pk], at+"/"+k+"/"+pk); m != "" {
							return m
						}
					}
				}
			case schemaArrayKeywords[k]:
				if a, ok := sub.([]any); ok {
					for _, e := range a {
						if m := walk(e, at+"/"+k); m != "" {
							return m
						}
					}
				}
			}
		}
		return ""
	}
	return walk(v, "")
}

// FuzzCompileValidate compiles a schema from arbitrary text and, when it
// compiles, validates arbitrary JSON against it: neither may panic, every
// failure names a location inside the value, and a value the schema
// accepts yields no problems.
func FuzzCompileValidate(f *testing.F) {
	f.Add(`{"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}, "additionalProperties": false}`, `{"b": 1}`)
	f.Add(`{"$defs": {"n": {"minimum": 0}}, "items": {"$ref": "#/$defs/n"}}`, `[1, -1, "x"]`)
	f.Add(`{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"d": {"format": "date"}}, "properties": {"a/b": {"$ref": "#/definitions/d"}}}`, `{"a/b": "x"}`)
	f.Add(`{"anyOf": [{"required": ["x"]}, {"required": ["y"]}], "propertyNames": {"maxLength": 1}}`, `{"zz": 1}`)
	f.Add(`{"type": "strin"}`, `1`)
	f.Add(`{"$ref": "http://example.com/s.json"}`, `{}`)
	f.Fuzz(func(t *testing.T, schemaText, valueText string) {
		s, err := CompileSource(Source{Raw: []byte(schemaText)})
		if err != nil {
			return
		}
		v, err := Decode([]byte(valueText))
		if err != nil {
			return
		}
		for _, fl := range s.Failures(v) {
			if !fl.OfName && fl.Value != nil {
				at, _ := json.Marshal(pointerTo(v, fl.Pointer()))
				got, _ := json.Marshal(fl.Value)
				if string(at) != string(got) {
					t.Fatalf("failure %+v: its location holds %s", fl, at)
				}
			}
			if fl.Message == "" {
				t.Fatalf("failure %+v has no message", fl)
			}
		}
		err = s.Check([]byte(valueText))
		if (err == nil) != (len(s.Failures(v)) == 0) {
			t.Fatalf("Check and Failures disagree: %v", err)
		}
	})
}
