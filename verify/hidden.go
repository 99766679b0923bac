package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// HiddenSet is the hidden test files of an agent.
type HiddenSet struct {
	// Globs are runner.verification.hidden as written.
	Globs []string
	// files maps a slash path (where it is placed, relative to the work
	// dir) to its content.
	files map[string][]byte
}

// LoadHidden reads the files of fsys (the pinned agent folder) that globs match.
// Each file goes to its path below the glob's folder: with "hidden/**",
// hidden/calc/more_test.go is placed at calc/more_test.go in the work dir
// (a glob without a folder, "*_test.go", keeps the path as it is). A glob
// that matches no file is an error: a hidden test that is not there
// verifies nothing; so are two files that go to one path.
func LoadHidden(fsys fs.FS, globs []string) (*HiddenSet, error) {
	s := &HiddenSet{Globs: slices.Clone(globs), files: map[string][]byte{}}
	for _, g := range globs {
		matches, err := doublestar.Glob(fsys, g, doublestar.WithFilesOnly(), doublestar.WithFailOnPatternNotExist())
		if err != nil && !errors.Is(err, doublestar.ErrPatternNotExist) {
			return nil, fmt.Errorf("hidden tests %q: %w", g, err)
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("hidden tests %q: no file of the agent folder matches", g)
		}
		base, _ := doublestar.SplitPattern(g)
		for _, m := range matches {
			data, err := fs.ReadFile(fsys, m)
			if err != nil {
				return nil, fmt.Errorf("hidden tests %q: %w", m, err)
			}
			at := m
			if base != "." {
				at = strings.TrimPrefix(m, base+"/")
			}
			if _, dup := s.files[at]; dup {
				return nil, fmt.Errorf("hidden tests %q: two hidden files go to %s in the work dir", g, at)
			}
			s.files[at] = data
		}
	}
	return s, nil
}

// Paths are the hidden files, sorted.
func (s *HiddenSet) Paths() []string {
	out := make([]string, 0, len(s.files))
	for p := range s.files {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Has reports whether p (a slash path relative to the work dir) is a
// hidden file.
func (s *HiddenSet) Has(p string) bool { _, ok := s.files[p]; return ok }

// Place writes the hidden files into workDir, each at its path, creating
// the folders it needs. undo removes them and the folders Place made, and
// puts back what was at those paths before (a file the model wrote there);
// call it whatever happened. A path that leaves workDir through a
// symbolic link the model made is refused (os.Root).
func (s *HiddenSet) Place(workDir string) (undo func() error, err error) {
	root, err := os.OpenRoot(workDir)
	if err != nil {
		return nil, fmt.Errorf("hidden tests: %w", err)
	}
	type saved struct {
		path string
		data []byte
		mode fs.FileMode
		had  bool
	}
	var done []saved
	var made []string // folders Place created, deepest last
	undo = func() error {
		defer root.Close()
		var first error
		keep := func(err error) {
			if err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
				first = fmt.Errorf("hidden tests: %w", err)
			}
		}
		for i := len(done) - 1; i >= 0; i-- {
			f := done[i]
			keep(root.RemoveAll(f.path))
			if f.had {
				keep(root.WriteFile(f.path, f.data, f.mode))
			}
		}
		for i := len(made) - 1; i >= 0; i-- {
			keep(root.RemoveAll(made[i]))
		}
		return first
	}
	for _, p := range s.Paths() {
		rel := filepath.FromSlash(p)
		// The folders on the way, outermost first.
		var dirs []string
		for dir := path.Dir(p); dir != "." && dir != "/"; dir = path.Dir(dir) {
			dirs = append([]string{dir}, dirs...)
		}
		for _, d := range dirs {
			fd := filepath.FromSlash(d)
			info, err := root.Lstat(fd)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				if err := root.Mkdir(fd, 0o755); err != nil {
					_ = undo()
					return nil, fmt.Errorf("hidden tests: %w", err)
				}
				made = append(made, fd)
			case err != nil:
				_ = undo()
				return nil, fmt.Errorf("hidden tests: %w", err)
			case !info.IsDir():
				_ = undo()
				return nil, fmt.Errorf("hidden tests: %s is in the way of %s (not a folder)", d, p)
			}
		}
		sv := saved{path: rel}
		if info, err := root.Lstat(rel); err == nil {
			if !info.Mode().IsRegular() {
				_ = undo()
				return nil, fmt.Errorf("hidden tests: %s is in the way (not a regular file)", p)
			}
			data, err := root.ReadFile(rel)
			if err != nil {
				_ = undo()
				return nil, fmt.Errorf("hidden tests: %w", err)
			}
			sv.data, sv.mode, sv.had = data, info.Mode().Perm(), true
		}
		done = append(done, sv)
		if err := root.WriteFile(rel, s.files[p], 0o644); err != nil {
			_ = undo()
			return nil, fmt.Errorf("hidden tests: %w", err)
		}
	}
	return undo, nil
}
