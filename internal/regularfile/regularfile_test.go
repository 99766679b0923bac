package regularfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenRegularFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, fi, err := Open(os.OpenFile, p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil || string(data) != "hello" || fi.Size() != 5 {
		t.Fatalf("read %q, size %d, err %v", data, fi.Size(), err)
	}
}

func TestOpenRefusesDirectory(t *testing.T) {
	dir := t.TempDir()
	_, _, err := Open(os.OpenFile, dir)
	var nr *NotRegularError
	if !errors.As(err, &nr) || !nr.Info.IsDir() || nr.Name != dir {
		t.Fatalf("err = %v, want a NotRegularError for the directory", err)
	}
	if want := dir + " is a directory, not a regular file"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}

func TestOpenMissingKeepsOpenError(t *testing.T) {
	_, _, err := Open(os.OpenFile, filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

// Through an os.Root, a path leading outside is refused by the root, and
// its error is handed back unchanged.
func TestOpenThroughRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f, _, err := Open(root.OpenFile, "in.json")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := Open(root.OpenFile, "../outside"); err == nil {
		t.Fatal("a path leaving the root was opened")
	}
}
