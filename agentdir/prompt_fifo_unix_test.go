//go:build unix

package agentdir

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

// A FIFO planted in place of a prompt must be rejected, not block the loop.
func TestFIFOPromptDoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "prompts/steps/a/b/f_default.md")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	_, err := r.Resolve(context.Background(), PromptRef{C2: "a", C3: "b"}, nil)
	wantCode(t, err, agenterr.CodePromptParse)
	if _, ok := r.Exists(PromptRef{C2: "a", C3: "b"}); ok {
		t.Fatal("a FIFO exists as a prompt")
	}
}
