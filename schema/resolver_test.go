package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
