package proc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealPathAnswersAsEvalSymlinks: for a plain directory, a file, links
// to both, a chain of links, a linked parent, a name with "..", a relative
// name, a link to nothing and a name that does not exist, RealPath gives
// what filepath.EvalSymlinks gives, errors included.
func TestRealPathAnswersAsEvalSymlinks(t *testing.T) {
	root := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ln := func(target, name string) string {
		name = filepath.Join(root, name)
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
		return name
	}
	dir := mk("a/b/c")
	long := mk(strings.Repeat(strings.Repeat("l", 100)+"/", 11)) // an answer longer than RealPath's buffer
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	toDir := ln(dir, "todir")
	ln(filepath.Join(root, "a"), "toa")
	chain := ln(toDir, "chain")
	ln("a/b", "relb")
	cases := []string{
		root, dir, file, toDir, chain, long,
		filepath.Join(root, "toa", "b", "c", "f"),
		filepath.Join(root, "relb", "c"),
		filepath.Join(root, "toa", "b", "..", "b", "c"),
		filepath.Join(chain, "f"),
		ln(filepath.Join(root, "nothing"), "dangling"),
		filepath.Join(root, "missing", "x"),
		filepath.Join(file, "below-a-file"),
		"relative/name",
	}
	for _, p := range cases {
		want, wantErr := filepath.EvalSymlinks(p)
		got, err := RealPath(p)
		if got != want || (err == nil) != (wantErr == nil) || errors.Is(err, fs.ErrNotExist) != errors.Is(wantErr, fs.ErrNotExist) {
			t.Errorf("RealPath(%q) = %q, %v; EvalSymlinks: %q, %v", p, got, err, want, wantErr)
		}
	}
}
