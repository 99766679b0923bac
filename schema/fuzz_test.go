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
	})
}

func FuzzResolve(f *testing.F) {
	f.Add(commonSchema, issueSchema, "issue.schema.json", "initial.issue")
	f.Add(`{"a": {"$ref": "b.json#/x"}}`, `{"x": {"$ref": "a.json#/a"}}`, "a.json", "a")
	f.Add(`{"a": {"allOf": [{"type": "string"}, {"$ref": "#/a"}]}}`, `{}`, "a.json", "#/a")
	f.Add(`{"$defs": {"x": {"properties": {"p": {"$ref": "#/$defs/x"}}}}}`, `[]`, "a.json", "x")
	f.Add(`{"a": {"$ref": "../etc/passwd"}}`, `{"x": true}`, "b.json", "x")
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
		if _, err := Compile(out); err != nil {
			// Arbitrary input may be an invalid schema; Compile must only
			// report it.
			return
		}
	})
}
