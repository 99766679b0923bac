package agent

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agentdir"
)

// A schemas makes its resolver at the first reference, then resolves and
// compiles each reference once, from disk or from a pinned folder.
func TestSchemasMadeAtFirstReference(t *testing.T) {
	const doc = `{"$defs": {"out": {"type": "object", "required": ["ok"]}}}`
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schemas", "out.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	pinned := fstest.MapFS{"schemas/out.json": {Data: []byte(doc)}}
	ref := agentdir.SchemaRef{File: "out.json", Schema: "#/$defs/out"}
	for name, s := range map[string]*schemas{"disk": newSchemas(dir, "", nil), "pinned": newSchemas(dir, "", pinned)} {
		if s.made != nil {
			t.Fatalf("%s: made before the first reference", name)
		}
		raw, v, err := s.OutputSchema(ref)
		if err != nil || len(raw) == 0 || v == nil {
			t.Fatalf("%s: %s %v %v", name, raw, v, err)
		}
		if s.made == nil || len(s.made.compiled) != 1 {
			t.Fatalf("%s: not kept after the first reference", name)
		}
		v2, err := s.Schema(ref)
		if err != nil || v2 != v {
			t.Errorf("%s: compiled again (%v)", name, err)
		}
		if _, err := s.Schema(agentdir.SchemaRef{File: "missing.json", Schema: "#/$defs/out"}); err == nil {
			t.Errorf("%s: a missing file resolved", name)
		}
	}
}
