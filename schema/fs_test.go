package schema

import (
	"testing"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agenterr"
)

// A Resolver over a file system (a pinned definition) resolves external
// references inside it and never reads the directory it names.
func TestResolverFS(t *testing.T) {
	fsys := fstest.MapFS{
		"a.schema.json":      {Data: []byte(`{"$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "sub/b.schema.json#/$defs/B"}}}}}`)},
		"sub/b.schema.json":  {Data: []byte(`{"$defs": {"B": {"type": "string"}}}`)},
		"broken.schema.json": {Data: []byte(`{`)},
	}
	r := NewResolverFS(fsys, "/nonexistent/schemas")
	raw, err := r.Resolve("a.schema.json", "A")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(raw); got != `{"type":"object","properties":{"b":{"type":"string"}},"additionalProperties":false}` {
		t.Fatalf("resolved %s", got)
	}
	if _, err := r.Resolve("missing.schema.json", ""); agenterr.CodeOf(err) != agenterr.CodeSchemaResolution {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := r.Resolve("broken.schema.json", ""); agenterr.CodeOf(err) != agenterr.CodeSchemaResolution {
		t.Fatalf("broken file: %v", err)
	}
}
