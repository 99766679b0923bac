package script

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/llm"
)

// With llm.Config.AgentFS (a pinned agent definition) a relative script
// file is read from it, never from the agent folder on disk.
func TestScriptFileFromPinnedDefinition(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("turns:\n  - text: forged\n"), 0o644)
	fsys := fstest.MapFS{"script.yaml": {Data: []byte("turns:\n  - text: pinned\n")}}
	ctx := context.Background()
	m, err := llm.OpenModel(ctx, "script", llm.Config{AgentDir: dir, AgentFS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(ctx, userReq("x"))
	if err != nil || resp.Message.Text != "pinned" {
		t.Fatalf("%v %v", resp, err)
	}
	// An absolute path inside the agent folder is pinned too.
	m, err = llm.OpenModel(ctx, "script:"+filepath.Join(dir, "script.yaml"), llm.Config{AgentDir: dir, AgentFS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := m.Generate(ctx, userReq("x")); err != nil || resp.Message.Text != "pinned" {
		t.Fatalf("absolute path: %v %v", resp, err)
	}
	_, err = llm.OpenModel(ctx, "script:other.yaml", llm.Config{AgentDir: dir, AgentFS: fsys})
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeConfigurationNotFound || e.File != "other.yaml" {
		t.Fatalf("file outside the pinned definition: %v", err)
	}
}
