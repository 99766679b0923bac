package verify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
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

// What the run with the hidden files placed writes into the work dir goes
// with them: the code under test ran with the hidden tests in reach and
// could have copied them for the model to read. A new file or folder is
// removed; a changed file stops the run, named, and stays for the human.
func TestRunPlacedRemovesWhatTheRunWrote(t *testing.T) {
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "calc.go"), []byte("package calc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadHidden(fstest.MapFS{"h/calc_hidden_test.go": {Data: []byte("hidden\n")}}, []string{"h/**"})
	if err != nil {
		t.Fatal(err)
	}
	copyOut := func(write func(hidden []byte) error) HiddenRunFunc {
		return func(context.Context, string) (event.ValidatorRun, bool, error) {
			b, err := os.ReadFile(filepath.Join(wd, "calc_hidden_test.go"))
			if err != nil {
				t.Fatal(err)
			}
			return event.ValidatorRun{}, true, write(b)
		}
	}
	g := &HiddenGuard{Set: s, Dir: wd, Run: copyOut(func(b []byte) error {
		if err := os.MkdirAll(filepath.Join(wd, ".cache/deep"), 0o755); err != nil {
			return err
		}
		return errors.Join(os.WriteFile(filepath.Join(wd, ".leak"), b, 0o644), os.WriteFile(filepath.Join(wd, ".cache/deep/leak"), b, 0o644))
	})}
	if _, ok, err := g.runPlaced(context.Background(), "tests"); err != nil || !ok {
		t.Fatalf("run: %v %v", ok, err)
	}
	entries, _ := os.ReadDir(wd)
	if len(entries) != 1 || entries[0].Name() != "calc.go" {
		t.Fatalf("the work dir after the run holds %v, want calc.go alone", entries)
	}
	// The same size and modification time put back: the change time
	// still tells.
	g.Run = copyOut(func(b []byte) error {
		p := filepath.Join(wd, "calc.go")
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		return errors.Join(os.WriteFile(p, append(b, "//xyz\n"...), 0o644), os.Chtimes(p, info.ModTime(), info.ModTime()))
	})
	_, _, err = g.runPlaced(context.Background(), "tests")
	if agenterr.CodeOf(err) != agenterr.CodeValidator || !strings.Contains(err.Error(), "changed calc.go") {
		t.Fatalf("a changed file: %v", err)
	}
	// A file a test tool rewrites at every run, in its cache folder
	// (vitest's results in node_modules/.vite): removed, the run goes on.
	if err := os.WriteFile(filepath.Join(wd, "calc.go"), []byte("package calc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(wd, "node_modules", ".vite", "vitest", "results.json")
	if err := os.MkdirAll(filepath.Dir(results), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(results, []byte(`{"results":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Run = copyOut(func(b []byte) error {
		return os.WriteFile(results, append([]byte(`{"results":{"calc_hidden_test.go":`), b...), 0o644)
	})
	if _, ok, err := g.runPlaced(context.Background(), "tests"); err != nil || !ok {
		t.Fatalf("a changed file in a tool's cache: %v %v", ok, err)
	}
	if _, err := os.Stat(results); !os.IsNotExist(err) {
		t.Errorf("the tool's cache file the run changed was kept: %v", err)
	}
}
