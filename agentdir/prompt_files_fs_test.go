package agentdir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agenterr"
)

// With Config.FS every prompt comes from that file system (a pinned
// definition), read once: the files on disk, edited or removed, are never
// consulted, and a later change of the file system is not seen either.
func TestResolverReadsPromptsFromPinnedFS(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "prompts", "steps", "w", "m", "f_default.md")
	os.MkdirAll(filepath.Dir(disk), 0o755)
	os.WriteFile(disk, []byte("FORGED STEP"), 0o644)
	fsys := fstest.MapFS{
		"prompts/steps/w/m/f_default.md":       {Data: []byte("step {uv-x}")},
		"prompts/steps/w/m/f_failed_retry.md":  {Data: []byte("real retry")},
		"prompts/system.md":                    {Data: []byte("real system")},
		"prompts/steps/w/m/f_default_huge.md":  {Data: make([]byte, maxPromptBytes+1)},
		"prompts/steps/w/m/f_default_dir.md/x": {Data: []byte("x")},
	}
	r := NewPromptResolver(PromptConfig{AgentDir: dir, SystemPath: "prompts/system.md", FS: fsys})
	ctx := context.Background()
	res, err := r.Resolve(ctx, PromptRef{C2: "w", C3: "m"}, map[string]string{"x": "1"})
	if err != nil || res.Text != "step 1" {
		t.Fatalf("step prompt %q %v", res.Text, err)
	}
	sys, err := r.ResolveSystem(ctx, nil)
	if err != nil || sys.Text != "real system" {
		t.Fatalf("system prompt %q %v", sys.Text, err)
	}
	rt, err := r.ResolveRetry(ctx, "steps", "w", "m", "failed", "retry")
	if err != nil || !rt.Found || rt.Text != "real retry" {
		t.Fatalf("retry prompt %+v %v", rt, err)
	}
	if _, ok := r.Exists(PromptRef{C2: "w", C3: "m", Edition: "failed", Adaptation: "retry"}); !ok {
		t.Fatal("Exists does not see the pinned retry prompt")
	}
	fsys["prompts/steps/w/m/f_default.md"] = &fstest.MapFile{Data: []byte("changed")}
	if res, _ := r.Resolve(ctx, PromptRef{C2: "w", C3: "m"}, nil); res.Text != "step {uv-x}" {
		t.Fatalf("a pinned prompt was read again: %q", res.Text)
	}
	if _, err := r.Resolve(ctx, PromptRef{C2: "w", C3: "m", Adaptation: "huge"}, nil); agenterr.CodeOf(err) != agenterr.CodePromptParse {
		t.Fatalf("oversized prompt: %v", err)
	}
	_, err = r.Resolve(ctx, PromptRef{C2: "w", C3: "m", Edition: "none"}, nil)
	if !errors.Is(err, agenterr.ErrPromptNotFound) {
		t.Fatalf("missing prompt: %v", err)
	}
}
