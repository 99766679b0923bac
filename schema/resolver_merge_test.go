package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestAdditionalPropertiesEverywhere(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s.json", `{
	  "root": {
	    "type": "object",
	    "properties": {
	      "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
	      "tuple": {"type": "array", "prefixItems": [{"type": "object"}, {"type": "string"}]},
	      "choice": {"anyOf": [{"type": "object", "properties": {"x": {"type": "string"}}}, {"type": "null"}]},
	      "one": {"oneOf": [{"properties": {"y": {"type": "string"}}}, {"type": "integer"}]},
	      "ref": {"$ref": "#/$defs/thing"},
	      "open": {"type": "object", "additionalProperties": true},
	      "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "number"}}}},
	      "uneval": {"type": "object", "unevaluatedProperties": false},
	      "nullable": {"type": ["object", "null"], "properties": {"z": {"type": "string"}}},
	      "cond": {"if": {"type": "object"}, "then": {"type": "object"}, "else": {"type": "object"}},
	      "neg": {"not": {"type": "object"}}
	    }
	  },
	  "$defs": {"thing": {"type": "object", "properties": {"deep": {"$ref": "#/$defs/deeper"}}}, "deeper": {"type": "object"}}
	}`)
	got, err := NewResolver(dir).Resolve("s.json", "root")
	if err != nil {
		t.Fatal(err)
	}
	root := generic(t, got).(map[string]any)
	count := 0
	var walk func(v any, at string)
	walk = func(v any, at string) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		isObj := false
		switch ty := m["type"].(type) {
		case string:
			isObj = ty == "object"
		case []any:
			for _, e := range ty {
				isObj = isObj || e == "object"
			}
		case nil:
			_, isObj = m["properties"]
		}
		if isObj {
			count++
			_, ap := m["additionalProperties"]
			_, up := m["unevaluatedProperties"]
			if !ap && !up {
				t.Errorf("object schema at %s lacks additionalProperties", at)
			}
		}
		for k, sub := range m {
			switch k {
			case "properties":
				for pk, pv := range sub.(map[string]any) {
					walk(pv, at+"/properties/"+pk)
				}
			case "anyOf", "oneOf", "prefixItems":
				for i, e := range sub.([]any) {
					walk(e, fmt.Sprintf("%s/%s/%d", at, k, i))
				}
			case "enum", "const", "required":
			case "if", "then", "else", "not":
				// partial subschemas stay open (TestConditionalsKeepMeaning)
				if sm, ok := sub.(map[string]any); ok {
					if _, ap := sm["additionalProperties"]; ap {
						t.Errorf("%s/%s was closed with additionalProperties", at, k)
					}
				}
			default:
				walk(sub, at+"/"+k)
			}
		}
	}
	walk(root, "")
	if count < 12 {
		t.Fatalf("walked only %d object schemas: %s", count, got)
	}
	props := root["properties"].(map[string]any)
	if props["open"].(map[string]any)["additionalProperties"] != true {
		t.Fatal("explicit additionalProperties:true was overwritten")
	}
	if _, ok := props["uneval"].(map[string]any)["additionalProperties"]; ok {
		t.Fatal("additionalProperties added next to unevaluatedProperties")
	}
	if _, ok := props["one"].(map[string]any)["additionalProperties"]; ok {
		t.Fatal("additionalProperties added to a schema that is not an object schema")
	}
}

func TestAllOfMerge(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s.json", `{
	  "merged": {
	    "description": "outer wins",
	    "allOf": [
	      {"type": "object", "description": "base", "properties": {"a": {"type": "string", "minLength": 1}, "n": {"type": "number", "minimum": 0, "maximum": 100}}, "required": ["a"]},
	      {"type": ["object", "null"], "properties": {"a": {"maxLength": 10}, "n": {"type": "integer", "minimum": 5, "maximum": 50}, "b": {"enum": ["x", "y", "z"]}}, "required": ["b", "a"]},
	      {"properties": {"b": {"enum": ["y", "z", "w"]}}},
	      true
	    ]
	  },
	  "typeConflict": {"allOf": [{"type": "string"}, {"type": "object"}]},
	  "enumDisjoint": {"allOf": [{"enum": [1]}, {"enum": [2]}]},
	  "constConflict": {"allOf": [{"const": "a"}, {"const": "b"}]},
	  "withFalse": {"allOf": [{"type": "string"}, false]},
	  "nested": {"allOf": [{"allOf": [{"properties": {"a": {"type": "string"}}}]}, {"properties": {"b": {"type": "string"}}}]},
	  "siblings": {"$ref": "#/$defs/base", "properties": {"extra": {"type": "boolean"}}, "required": ["extra"]},
	  "$defs": {"base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
	}`)
	r := NewResolver(dir)
	got, err := r.Resolve("s.json", "merged")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `{
	  "type": "object",
	  "description": "outer wins",
	  "properties": {
	    "a": {"type": "string", "minLength": 1, "maxLength": 10},
	    "n": {"type": "integer", "minimum": 5, "maximum": 50},
	    "b": {"enum": ["y", "z"]}
	  },
	  "required": ["a", "b"],
	  "additionalProperties": false
	}`)
	got, err = r.Resolve("s.json", "nested")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `{"properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "additionalProperties": false}`)
	got, err = r.Resolve("s.json", "siblings")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `{"type": "object", "properties": {"id": {"type": "string"}, "extra": {"type": "boolean"}}, "required": ["id", "extra"], "additionalProperties": false}`)
	got, err = r.Resolve("s.json", "withFalse")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `false`)
	for name, mention := range map[string]string{"typeConflict": "conflicting types", "enumDisjoint": "disjoint enums", "constConflict": `"const"`} {
		_, err := r.Resolve("s.json", name)
		e := wantSchemaErr(t, err)
		if !strings.Contains(e.Message, mention) || e.Pointer != "/"+name || e.Hint == "" {
			t.Errorf("%s: %v (pointer %q)", name, e, e.Pointer)
		}
	}
}

// TestConditionalsKeepMeaning: resolving (additionalProperties:false added
// to object schemas, allOf merged) keeps if/then/else working: an answer
// that breaks a "then" is rejected, and two conditionals in one allOf are
// both kept and both enforced.
func TestConditionalsKeepMeaning(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s.json", `{
	  "$defs": {
	    "base": {"type": "object", "properties": {"status": {"type": "string"}, "reason": {"type": "string"}, "pr": {"type": "integer"}},
	             "required": ["status"]}
	  },
	  "single": {
	    "allOf": [{"$ref": "#/$defs/base"}],
	    "if": {"properties": {"status": {"const": "blocked"}}},
	    "then": {"required": ["reason"]}
	  },
	  "double": {
	    "allOf": [
	      {"$ref": "#/$defs/base"},
	      {"if": {"properties": {"status": {"const": "blocked"}}}, "then": {"required": ["reason"]}},
	      {"if": {"properties": {"status": {"const": "done"}}}, "then": {"required": ["pr"]}, "else": {"properties": {"pr": {"maximum": 0}}}}
	    ]
	  }
	}`)
	r := NewResolver(dir)
	cases := []struct {
		schema, answer string
		ok             bool
	}{
		{"single", `{"status": "blocked", "reason": "waiting"}`, true},
		{"single", `{"status": "blocked"}`, false}, // breaks then
		{"single", `{"status": "working"}`, true},
		{"single", `{"status": "working", "extra": 1}`, false}, // still closed
		{"double", `{"status": "blocked", "reason": "x"}`, true},
		{"double", `{"status": "blocked"}`, false}, // breaks the first then
		{"double", `{"status": "done", "pr": 7}`, true},
		{"double", `{"status": "done"}`, false},             // breaks the second then
		{"double", `{"status": "working", "pr": 3}`, false}, // breaks the second else
		{"double", `{"status": "working"}`, true},
	}
	for _, c := range cases {
		raw, err := r.Resolve("s.json", c.schema)
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		v, err := Compile(raw)
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		var answer any
		if err := json.Unmarshal([]byte(c.answer), &answer); err != nil {
			t.Fatal(err)
		}
		if err := v.Validate(answer); (err == nil) != c.ok {
			t.Errorf("%s %s: valid=%v, want %v (err %v)", c.schema, c.answer, err == nil, c.ok, err)
		}
	}
}
