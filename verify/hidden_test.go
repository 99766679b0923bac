package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// TestLoadPlacesBelowTheGlobsFolder: a file matched by "_hidden/**" goes
// to its path below _hidden/ in the work dir; a glob without a folder
// keeps the path; two files for one path, and a glob matching nothing,
// are errors.
func TestLoadPlacesBelowTheGlobsFolder(t *testing.T) {
	fsys := fstest.MapFS{
		"_hidden/calc/more_test.go": {Data: []byte("package calc\n")},
		"_hidden/top_test.go":       {Data: []byte("package top\n")},
		"extra_test.go":             {Data: []byte("package x\n")},
		"agent.json":                {Data: []byte("{}")},
	}
	s, err := LoadHidden(fsys, []string{"_hidden/**", "*_test.go"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Paths(), ","); got != "calc/more_test.go,extra_test.go,top_test.go" {
		t.Fatalf("paths %s", got)
	}
	if _, err := LoadHidden(fsys, []string{"_hidden/**", "dup/**"}); err == nil || !strings.Contains(err.Error(), "no file of the agent folder matches") {
		t.Fatalf("a glob matching nothing: %v", err)
	}
	fsys["other/top_test.go"] = &fstest.MapFile{Data: []byte("package y\n")}
	if _, err := LoadHidden(fsys, []string{"_hidden/**", "other/**"}); err == nil || !strings.Contains(err.Error(), "two hidden files go to top_test.go") {
		t.Fatalf("two files for one path: %v", err)
	}
}

// TestPlaceAndUndo: Place writes the files (making the folders they need)
// and undo leaves the work dir as it was: the folders it made are gone, a
// file the model had at a hidden path is back with its content and mode.
func TestPlaceAndUndo(t *testing.T) {
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "top_test.go"), []byte("model's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadHidden(fstest.MapFS{
		"h/deep/er/x_test.go": {Data: []byte("hidden x\n")},
		"h/top_test.go":       {Data: []byte("hidden top\n")},
	}, []string{"h/**"})
	if err != nil {
		t.Fatal(err)
	}
	undo, err := s.Place(wd)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"deep/er/x_test.go": "hidden x\n", "top_test.go": "hidden top\n"} {
		if b, err := os.ReadFile(filepath.Join(wd, p)); err != nil || string(b) != want {
			t.Fatalf("%s placed as %q %v", p, b, err)
		}
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wd, "deep")); !os.IsNotExist(err) {
		t.Fatalf("the folders Place made are left: %v", err)
	}
	info, err := os.Stat(filepath.Join(wd, "top_test.go"))
	if b, _ := os.ReadFile(filepath.Join(wd, "top_test.go")); err != nil || string(b) != "model's\n" || info.Mode().Perm() != 0o600 {
		t.Fatalf("the model's file is not back: %q %v", b, err)
	}
}

// TestPlaceRefusesALinkOut: a folder on a hidden file's path that the
// model made a symbolic link out of the work dir is refused, and nothing
// is written outside.
func TestPlaceRefusesALinkOut(t *testing.T) {
	wd, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(wd, "deep")); err != nil {
		t.Fatal(err)
	}
	s, err := LoadHidden(fstest.MapFS{"h/deep/x_test.go": {Data: []byte("hidden\n")}}, []string{"h/**"})
	if err != nil {
		t.Fatal(err)
	}
	if undo, err := s.Place(wd); err == nil {
		_ = undo()
		t.Fatal("placed through a link out of the work dir")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("written outside the work dir: %v", entries)
	}
}
