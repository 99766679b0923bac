//go:build unix

package schema

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A FIFO planted in place of a schema file must be rejected, not block.
func TestFIFOSchemaDoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "s.json"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	writeFile(t, dir, "ref.json", `{"a": {"$ref": "s.json#/x"}}`)
	if err := os.Mkdir(filepath.Join(dir, "d.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := NewResolver(dir)
	for _, f := range []string{"s.json", "d.json"} {
		_, err := r.Resolve(f, "x")
		wantSchemaErr(t, err)
	}
	_, err := r.Resolve("ref.json", "a")
	wantSchemaErr(t, err)
}
