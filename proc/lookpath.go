package proc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
)

// LookPath finds the program name on path (a PATH value) as the shell
// would and returns its absolute path. The program must not lie inside
// any of workDirs, where the model can write: a PATH entry inside a work
// dir that holds the program, or a name with a slash that points there, is
// refused with DEPENDENCY_RESOLUTION, and so is a program that is found
// nowhere. Relative PATH entries ("", ".", "bin") are skipped: they
// would name a directory relative to wherever the program is started.
func LookPath(name, path string, workDirs ...string) (string, error) {
	return newWorkDirGuard(workDirs).lookPath(name, path)
}

// workDirGuard answers whether a path lies inside one of the work dirs, each
// with its symbolic links resolved once (an EvalSymlinks is an lstat of
// every element of the path): the lookups and the PATH filter that
// NewGit makes for one agent share it.
type workDirGuard struct{ work []string }

func newWorkDirGuard(workDirs []string) workDirGuard {
	var g workDirGuard
	for _, w := range workDirs {
		g.work = append(g.work, candidates(w)...)
	}
	return g
}

// inside returns the form of p (as given, or resolved) that lies inside a
// work dir.
func (g workDirGuard) inside(p string) (string, bool) {
	for _, c := range candidates(p) {
		for _, wd := range g.work {
			if within(c, wd) {
				return c, true
			}
		}
	}
	return "", false
}

func (g workDirGuard) lookPath(name, path string) (string, error) {
	refuse := func(p, how string) error {
		e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false,
			"%s %s is %s, inside the work dir: the model could have written the program capstan would run there outside the sandbox", name, how, p)
		e.Hint = "remove the work dir's directories from PATH, or put the directory of the real " + filepath.Base(name) + " before them (for example PATH=/usr/bin:$PATH)"
		return e
	}
	if strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", agenterr.Wrap(err, agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "locate %s", name)
		}
		if p, ok := g.inside(abs); ok {
			return "", refuse(p, "named")
		}
		if !executable(abs) {
			e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "%s is not an executable file", abs)
			e.Hint = "name an installed program"
			return "", e
		}
		return abs, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if !executable(p) {
			continue
		}
		if in, ok := g.inside(p); ok {
			return "", refuse(in, "on PATH")
		}
		return p, nil
	}
	e := agenterr.Wrap(&fs.PathError{Op: "look up", Path: name, Err: fs.ErrNotExist}, agenterr.CodeDependencyResolution,
		agenterr.LayerLifecycle, false, "%s is not on PATH", name)
	e.Hint = "install " + name + " or add its directory to PATH"
	return "", e
}

// pathOutside is path without its relative entries and those inside a
// work dir (see PathOutside).
func (g workDirGuard) pathOutside(path string) string {
	var keep []string
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) || slices.Contains(keep, d) {
			continue // an entry kept already says nothing new
		}
		if _, in := g.inside(d); !in {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// candidates are p and p with its symbolic links resolved.
func candidates(p string) []string {
	out := []string{filepath.Clean(p)}
	if real, err := filepath.EvalSymlinks(p); err == nil && real != out[0] {
		out = append(out, real)
	}
	if abs, err := filepath.Abs(out[0]); err == nil && abs != out[0] {
		out = append(out, abs)
	}
	return out
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// executable reports whether p is a regular file with an execute bit.
func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// IsProgramNotFound reports whether err is LookPath's "not on PATH".
func IsProgramNotFound(err error) bool { return errors.Is(err, fs.ErrNotExist) }
