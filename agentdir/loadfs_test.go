package agentdir

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// copyFS reads every file of dir into a MapFS.
func copyFS(t *testing.T, dir string) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(os.DirFS(dir), p)
		out[p] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// LoadAndValidateFS reads the files and checks file references in the
// given file system only: the folder on disk may be changed or gone.
func TestLoadAndValidateFSReadsOnlyTheFS(t *testing.T) {
	dir := writeAgent(t, baseAgent(), baseRegistry(), nil)
	fsys := copyFS(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	a, err := LoadAndValidateFS(fsys, dir, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if a.FS() == nil || a.Definition().FS() == nil || a.Definition().Name != "demo" {
		t.Fatalf("agent %+v", a.Definition())
	}
	// A file reference the FS does not hold is reported like a missing file.
	delete(fsys, "prompts/system.md")
	res := CheckFS(fsys, dir, testOpts)
	if res.Valid() || !strings.Contains(dump(res), "AC-SYSTEM-PROMPT-MISSING") {
		t.Fatalf("missing system prompt:\n%s", dump(res))
	}
	// Loaded from disk, a definition has no FS.
	if def, _, err := Load(writeAgent(t, baseAgent(), baseRegistry(), nil)); err != nil || def.FS() != nil {
		t.Fatalf("disk load: %v", err)
	}
}

// A missing agent folder is said once, without the file system's own
// "open …: no such file or directory" repeating it.
func TestLoadMissingFolderSaysItOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fix-issue")
	_, _, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "does not exist or is not a directory") || strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Load(%s) = %v", dir, err)
	}
}
