package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

func writeFile(t testing.TB, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// generic decodes JSON into encoding/json's generic form for comparison.
func generic(t testing.TB, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", raw, err)
	}
	return v
}

func assertJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	if g, w := generic(t, got), generic(t, []byte(want)); !reflect.DeepEqual(g, w) {
		t.Fatalf("schema mismatch\n got %s\nwant %s", got, want)
	}
}

func wantSchemaErr(t *testing.T, err error) *agenterr.Error {
	t.Helper()
	if err == nil {
		t.Fatal("want SCHEMA_RESOLUTION error, got nil")
	}
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSchemaResolution || e.Layer != agenterr.LayerCompletion {
		t.Fatalf("want SCHEMA_RESOLUTION (completion), got %v", err)
	}
	if !errors.Is(err, agenterr.ErrSchemaResolution) {
		t.Fatal("errors.Is(ErrSchemaResolution) is false")
	}
	return e
}

const commonSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$defs": {
    "stepResponse": {
      "type": "object",
      "properties": {
        "stepId": {"type": "string"},
        "status": {"$ref": "#/$defs/status"},
        "next_action": {
          "type": "object",
          "properties": {"action": {"type": "string", "enum": ["next", "repeat", "closing"]}, "reason": {"type": "string"}},
          "required": ["action"]
        }
      },
      "required": ["stepId", "status"]
    },
    "status": {"type": "string", "enum": ["in_progress", "completed", "blocked"]}
  }
}`

const issueSchema = `{
  "initial.issue": {
    "allOf": [{"$ref": "common.schema.json#/$defs/stepResponse"}],
    "properties": {
      "stepId": {"const": "initial.issue"},
      "issue": {"$ref": "#/$defs/issueContext"}
    },
    "required": ["issue"]
  },
  "$defs": {
    "status": {"type": "string", "enum": ["WRONG FILE"]},
    "issueContext": {
      "type": "object",
      "properties": {
        "number": {"type": "integer", "minimum": 1},
        "labels": {"type": "array", "items": {"$ref": "#/$defs/label"}}
      },
      "required": ["number"]
    },
    "label": {"type": "object", "properties": {"name": {"type": "string"}}}
  }
}`

func TestResolveExternalAndInternalRefs(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "common.schema.json", commonSchema)
	writeFile(t, dir, "issue.schema.json", issueSchema)
	r := NewResolver(dir)
	got, err := r.Resolve("issue.schema.json", "initial.issue")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `{
	  "type": "object",
	  "properties": {
	    "stepId": {"type": "string", "const": "initial.issue"},
	    "status": {"type": "string", "enum": ["in_progress", "completed", "blocked"]},
	    "next_action": {
	      "type": "object",
	      "properties": {"action": {"type": "string", "enum": ["next", "repeat", "closing"]}, "reason": {"type": "string"}},
	      "required": ["action"],
	      "additionalProperties": false
	    },
	    "issue": {
	      "type": "object",
	      "properties": {
	        "number": {"type": "integer", "minimum": 1},
	        "labels": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": false}}
	      },
	      "required": ["number"],
	      "additionalProperties": false
	    }
	  },
	  "required": ["stepId", "status", "issue"],
	  "additionalProperties": false
	}`)
	// Property order is kept: base properties first, then the inheriting
	// schema's own.
	s := string(got)
	order := []string{`"stepId"`, `"status"`, `"next_action"`, `"issue"`}
	last := -1
	for _, k := range order {
		i := strings.Index(s, k)
		if i < last {
			t.Fatalf("property order lost: %s", s)
		}
		last = i
	}
	for _, banned := range []string{"$ref", "$defs", "$schema", "allOf", "WRONG FILE"} {
		if strings.Contains(s, banned) {
			t.Fatalf("output contains %q: %s", banned, s)
		}
	}
	// The result compiles and validates real output.
	v, err := Compile(got)
	if err != nil {
		t.Fatal(err)
	}
	ok := `{"stepId":"initial.issue","status":"completed","next_action":{"action":"closing"},"issue":{"number":3,"labels":[{"name":"bug"}]}}`
	if err := v.Validate(json.RawMessage(ok)); err != nil {
		t.Fatalf("valid output rejected: %v", err)
	}
	bad := `{"stepId":"other","status":"done","issue":{"number":0,"extra":1},"more":true}`
	err = v.Validate(json.RawMessage(bad))
	problems := Problems(err)
	if len(problems) < 4 {
		t.Fatalf("want a problem per failing location, got %q", problems)
	}
	joined := strings.Join(problems, "\n")
	for _, loc := range []string{"/stepId", "/status", "/issue/number", "(root)"} {
		if !strings.Contains(joined, "at "+loc+":") {
			t.Errorf("problems do not mention %s:\n%s", loc, joined)
		}
	}
}

func TestNameLookup(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s.json", `{
	  "top": {"type": "string"},
	  "$defs": {"inDefs": {"type": "integer"}, "top": {"type": "boolean"}},
	  "definitions": {"inDefinitions": {"type": "number"}, "a/b~c": {"type": "null"}}
	}`)
	r := NewResolver(dir)
	for name, want := range map[string]string{
		"top":                         `{"type":"string"}`,
		"inDefs":                      `{"type":"integer"}`,
		"inDefinitions":               `{"type":"number"}`,
		"#/$defs/top":                 `{"type":"boolean"}`,
		"#/definitions/a~1b~0c":       `{"type":"null"}`,
		"#/definitions/inDefinitions": `{"type":"number"}`,
		"#/%24defs/inDefs":            `{"type":"integer"}`,
		"":                            `{"top":{"type":"string"}}`,
	} {
		got, err := r.Resolve("s.json", name)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		assertJSON(t, got, want)
	}
	for _, name := range []string{"missing", "#/nope", "#/$defs/missing", "#/top/type"} {
		_, err := r.Resolve("s.json", name)
		e := wantSchemaErr(t, err)
		if e.File != "s.json" || e.Hint == "" {
			t.Fatalf("%q: %v", name, e)
		}
	}
}

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

func TestCycles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.json", `{
	  "tree": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/tree"}}}},
	  "ping": {"$ref": "#/$defs/pong"},
	  "cross": {"$ref": "b.json#/$defs/back"},
	  "$defs": {"pong": {"properties": {"p": {"$ref": "#/ping"}}}}
	}`)
	writeFile(t, dir, "b.json", `{"$defs": {"back": {"properties": {"x": {"$ref": "a.json#/cross"}}}}}`)
	writeFile(t, dir, "self.json", `{"type": "object", "properties": {"child": {"$ref": "#"}}}`)
	r := NewResolver(dir)
	_, err := r.Resolve("self.json", "")
	if e := wantSchemaErr(t, err); !strings.Contains(e.Message, "self.json# → self.json#") || e.Pointer != "/properties/child/$ref" {
		t.Fatalf("got %v", e)
	}
	for name, cycle := range map[string]string{
		"tree":  "a.json#/tree → a.json#/tree",
		"ping":  "a.json#/ping → a.json#/$defs/pong → a.json#/ping",
		"cross": "a.json#/cross → b.json#/$defs/back → a.json#/cross",
	} {
		_, err := r.Resolve("a.json", name)
		e := wantSchemaErr(t, err)
		if !strings.Contains(e.Message, "cyclic $ref") || !strings.Contains(e.Message, cycle) {
			t.Errorf("%s: %v, want cycle %s", name, e, cycle)
		}
		if e.Hint == "" || e.Pointer == "" {
			t.Errorf("%s: no hint or pointer: %v", name, e)
		}
	}
}

func TestDanglingRefs(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s.json", `{
	  "internal": {"properties": {"x": {"$ref": "#/$defs/nope"}}},
	  "external": {"$ref": "other.json#/$defs/nope"},
	  "nofile": {"$ref": "missing.json#/$defs/x"},
	  "anchor": {"$ref": "#myAnchor"},
	  "remote": {"$ref": "https://example.com/s.json"},
	  "urn": {"$ref": "urn:example:x"},
	  "notString": {"$ref": 5},
	  "notSchema": {"$ref": "#/$defs/str"},
	  "dynamic": {"$dynamicRef": "#meta"},
	  "$defs": {"str": "I am a string"}
	}`)
	writeFile(t, dir, "other.json", `{"$defs": {}}`)
	r := NewResolver(dir)
	for name, want := range map[string]struct{ ptr, msg string }{
		"internal":  {"/internal/properties/x/$ref", "s.json#/$defs/nope"},
		"external":  {"/external/$ref", "other.json#/$defs/nope"},
		"nofile":    {"/nofile/$ref", "missing.json"},
		"anchor":    {"/anchor/$ref", "anchor"},
		"remote":    {"/remote/$ref", "relative file reference"},
		"urn":       {"/urn/$ref", "relative file reference"},
		"notString": {"/notString/$ref", "must be a string"},
		"notSchema": {"/$defs/str", "not a string"},
		"dynamic":   {"/dynamic/$dynamicRef", "not supported"},
	} {
		_, err := r.Resolve("s.json", name)
		e := wantSchemaErr(t, err)
		if e.File == "" || e.Pointer != want.ptr || !strings.Contains(e.Message, want.msg) {
			t.Errorf("%s: got file %q pointer %q message %q; want pointer %q mentioning %q", name, e.File, e.Pointer, e.Message, want.ptr, want.msg)
		}
	}
}

func TestPathEscape(t *testing.T) {
	outer := t.TempDir()
	writeFile(t, outer, "x.json", `{"secret": {"type": "string"}}`)
	dir := filepath.Join(outer, "schemas")
	writeFile(t, dir, "s.json", `{
	  "up": {"$ref": "../x.json#/secret"},
	  "deepup": {"$ref": "sub/../../x.json#/secret"},
	  "abs": {"$ref": "`+filepath.ToSlash(filepath.Join(outer, "x.json"))+`#/secret"},
	  "file": {"$ref": "file:///etc/passwd"},
	  "link": {"$ref": "link.json#/secret"},
	  "sub": {"$ref": "sub/inner.json#/ok"}
	}`)
	writeFile(t, dir, "sub/inner.json", `{"ok": {"$ref": "../s.json#/$defs/leaf"}, "bad": {"$ref": "../../x.json#/secret"}}`)
	if err := os.Symlink(filepath.Join(outer, "x.json"), filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	r := NewResolver(dir)
	for _, f := range []string{"../x.json", "/etc/passwd", filepath.Join(outer, "x.json"), "", "..", "sub/../../x.json", "a\x00b", `..\x.json`, "link.json"} {
		_, err := r.Resolve(f, "secret")
		wantSchemaErr(t, err)
	}
	for _, name := range []string{"up", "deepup", "abs", "file", "link"} {
		out, err := r.Resolve("s.json", name)
		if err == nil {
			t.Fatalf("%s: resolved outside the directory: %s", name, out)
		}
		wantSchemaErr(t, err)
	}
	_, err := r.Resolve("sub/inner.json", "bad")
	wantSchemaErr(t, err)
	// Refs are relative to the file they appear in: sub/inner.json's
	// "../s.json" is s.json, which lacks $defs/leaf: a dangling ref, not an escape.
	_, err = r.Resolve("s.json", "sub")
	e := wantSchemaErr(t, err)
	if !strings.Contains(e.Message, "s.json#/$defs/leaf") {
		t.Fatalf("got %v", e)
	}
}

func TestInvalidFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "syntax.json", "{\n  \"a\": {\"type\": \"string\"},\n  \"b\": [1, 2,\n}\n")
	writeFile(t, dir, "array.json", `[{"type": "string"}]`)
	writeFile(t, dir, "trailing.json", `{"a": {}} {"b": {}}`)
	writeFile(t, dir, "bad.json", `{"a": {"properties": []}, "b": {"allOf": {}}, "c": {"items": 3}}`)
	r := NewResolver(dir)
	_, err := r.Resolve("syntax.json", "a")
	e := wantSchemaErr(t, err)
	if e.Line != 4 || e.Column == 0 || e.File != "syntax.json" {
		t.Fatalf("position %d:%d in %q: %v", e.Line, e.Column, e.File, e)
	}
	for _, f := range []string{"array.json", "trailing.json", "missing.json"} {
		_, err := r.Resolve(f, "")
		wantSchemaErr(t, err)
	}
	for _, name := range []string{"a", "b", "c"} {
		_, err := r.Resolve("bad.json", name)
		e := wantSchemaErr(t, err)
		if !strings.HasPrefix(e.Pointer, "/"+name+"/") {
			t.Errorf("%s: pointer %q", name, e.Pointer)
		}
	}
}

func TestCache(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "s.json", `{"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}}, "b": {"type": "string"}, "$defs": {"x": {"type": "integer"}}}`)
	r := NewResolver(dir)
	first, err := r.Resolve("s.json", "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	// Cached result, then a different name served from the cached file.
	again, err := r.Resolve("s.json", "a")
	if err != nil || string(again) != string(first) {
		t.Fatalf("cache miss after removal: %s %v", again, err)
	}
	if _, err := r.Resolve("s.json", "b"); err != nil {
		t.Fatalf("file cache miss: %v", err)
	}
	// Callers get their own copy.
	again[0] = 'X'
	third, _ := r.Resolve("s.json", "a")
	if string(third) != string(first) {
		t.Fatal("a caller modified the cached result")
	}
	// A new resolver reads the directory afresh.
	if _, err := NewResolver(dir).Resolve("s.json", "a"); err == nil {
		t.Fatal("new resolver used a stale cache")
	}
}

func TestConcurrentResolve(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "common.schema.json", commonSchema)
	writeFile(t, dir, "issue.schema.json", issueSchema)
	r := NewResolver(dir)
	want, err := NewResolver(dir).Resolve("issue.schema.json", "initial.issue")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				got, err := r.Resolve("issue.schema.json", "initial.issue")
				if err != nil || string(got) != string(want) {
					t.Errorf("got %s %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestBigSchemas(t *testing.T) {
	dir := t.TempDir()
	// Wide: 3000 properties each referring to a shared definition.
	var b strings.Builder
	b.WriteString(`{"wide": {"type": "object", "properties": {`)
	for i := 0; i < 3000; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d": {"$ref": "#/$defs/item"}`, i)
	}
	b.WriteString(`}}, "$defs": {"item": {"type": "object", "properties": {"v": {"type": "string"}}}}}`)
	writeFile(t, dir, "wide.json", b.String())
	got, err := NewResolver(dir).Resolve("wide.json", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), `"additionalProperties":false`); n != 3001 {
		t.Fatalf("additionalProperties count %d", n)
	}

	// Exponential: each level refers to the previous one twice.
	b.Reset()
	b.WriteString(`{"$defs": {"l0": {"type": "string"}`)
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, `, "l%d": {"type": "object", "properties": {"a": {"$ref": "#/$defs/l%d"}, "b": {"$ref": "#/$defs/l%d"}}}`, i, i-1, i-1)
	}
	b.WriteString(`}}`)
	writeFile(t, dir, "bomb.json", b.String())
	_, err = NewResolver(dir).Resolve("bomb.json", "l40")
	e := wantSchemaErr(t, err)
	if !strings.Contains(e.Message, "expands") {
		t.Fatalf("got %v", e)
	}

	// Deep nesting.
	deep := strings.Repeat(`{"items":`, 1000) + `{}` + strings.Repeat(`}`, 1000)
	writeFile(t, dir, "deep.json", `{"d": `+deep+`}`)
	_, err = NewResolver(dir).Resolve("deep.json", "d")
	wantSchemaErr(t, err)
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
