package proc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

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
func (g workDirGuard) inside(p string) (string, bool) { return g.insideAny(candidates(p)) }

// insideAny returns the first of forms (the forms of one path) that lies
// inside a work dir.
func (g workDirGuard) insideAny(forms []string) (string, bool) {
	for _, c := range forms {
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
	if f := foundBefore(name, path); f != nil {
		if in, planted := g.plantedBefore(f, name); planted {
			return "", refuse(in, "on PATH")
		}
		if fi, err := os.Lstat(f.path); err == nil && sameFile(fi, f.info) {
			if in, ok := g.insideAny(f.forms); ok {
				return "", refuse(in, "on PATH")
			}
			return f.path, nil
		}
	}
	var before []string
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil {
			before = append(before, dir)
			continue
		}
		var forms []string
		if fi.Mode()&fs.ModeSymlink != 0 {
			// A link is followed to what it names, and all of it resolved.
			if !executable(p) {
				before = append(before, dir)
				continue
			}
			forms = candidates(p)
		} else if isExecutable(fi) {
			for _, d := range dirCandidates(dir) {
				forms = append(forms, filepath.Join(d, name))
			}
		} else {
			before = append(before, dir)
			continue
		}
		if in, ok := g.insideAny(forms); ok {
			return "", refuse(in, "on PATH")
		}
		rememberFound(name, path, &foundProgram{path: p, forms: forms, info: fi, before: before})
		return p, nil
	}
	e := agenterr.Wrap(&fs.PathError{Op: "look up", Path: name, Err: fs.ErrNotExist}, agenterr.CodeDependencyResolution,
		agenterr.LayerLifecycle, false, "%s is not on PATH", name)
	e.Hint = "install " + name + " or add its directory to PATH"
	return "", e
}

// foundProgram is a program lookPath found on a PATH: where, the forms
// of that path the work-dir check tests, the file as it was found (its
// lstat), and the absolute PATH entries searched before its own.
type foundProgram struct {
	path   string
	forms  []string
	info   fs.FileInfo
	before []string
}

// foundPrograms holds the programs this process found (at most
// maxResolvedDirs of them), by name and PATH value, so that the agents one
// program builds do not search the whole PATH for git and ssh again each:
// a search is an lstat of the program in every entry before its own, and
// it was most of what building an agent allocated after its journal. A
// remembered program is used again while its file is the one found (same
// file, mode, size and time); what lookPath refuses is refused as before,
// because the entries before its own that lie inside this lookup's work
// dirs are searched again (a program planted there is refused). What is
// not looked at again is an entry outside the work dirs: a program
// installed there while this process runs is found by the next process,
// as a shell finds it after `hash -r`.
var foundPrograms struct {
	sync.Mutex
	m map[[2]string]*foundProgram
}

// foundBefore is the program name that lookPath found on path before, or nil.
func foundBefore(name, path string) *foundProgram {
	foundPrograms.Lock()
	defer foundPrograms.Unlock()
	return foundPrograms.m[[2]string{name, path}]
}

// rememberFound records f as name's program on path.
func rememberFound(name, path string, f *foundProgram) {
	foundPrograms.Lock()
	defer foundPrograms.Unlock()
	if foundPrograms.m == nil {
		foundPrograms.m = make(map[[2]string]*foundProgram)
	}
	if _, ok := foundPrograms.m[[2]string{name, path}]; ok || len(foundPrograms.m) < maxResolvedDirs {
		foundPrograms.m[[2]string{name, path}] = f
	}
}

// plantedBefore searches the entries before f's own that lie inside a work
// dir of g for an executable name, and returns the form of the first one
// found that lies inside.
func (g workDirGuard) plantedBefore(f *foundProgram, name string) (string, bool) {
	for _, dir := range f.before {
		forms := rememberedCandidates(dir)
		if _, in := g.insideAny(forms); !in {
			continue
		}
		if p := filepath.Join(dir, name); executable(p) {
			return g.inside(p)
		}
	}
	return "", false
}

// sameFile reports whether a and b (two lstats of one path) describe the
// same file, unchanged.
func sameFile(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Mode() == b.Mode() && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// pathOutside is path without its relative entries and those inside a
// work dir (see PathOutside).
func (g workDirGuard) pathOutside(path string) string {
	keep := make([]string, 0, strings.Count(path, string(filepath.ListSeparator))+1)
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) || slices.Contains(keep, d) {
			continue // an entry kept already says nothing new
		}
		if _, in := g.insideAny(dirCandidates(d)); !in {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// candidates are p and p with its symbolic links resolved.
func candidates(p string) []string {
	c, _ := candidatesResolved(p)
	return c
}

// candidatesResolved is candidates(p) and whether p's links could be
// resolved (p exists).
func candidatesResolved(p string) ([]string, bool) {
	out := []string{filepath.Clean(p)}
	real, err := RealPath(p)
	if err == nil && real != out[0] {
		out = append(out, real)
	}
	if abs, err := filepath.Abs(out[0]); err == nil && abs != out[0] {
		out = append(out, abs)
	}
	return out, err == nil
}

// within reports whether p is dir or lies below it. Both are clean
// (candidates cleans every form), so this is a comparison of their
// elements, made without allocating: it runs for every PATH entry of
// every agent.
func within(p, dir string) bool {
	if !strings.HasPrefix(p, dir) || filepath.IsAbs(p) != filepath.IsAbs(dir) {
		return false
	}
	return len(p) == len(dir) || os.IsPathSeparator(p[len(dir)]) || os.IsPathSeparator(dir[len(dir)-1])
}

// executable reports whether p is a regular file with an execute bit.
func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && isExecutable(fi)
}

// isExecutable reports whether fi is a regular file with an execute bit.
func isExecutable(fi fs.FileInfo) bool { return fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 }

// resolvedDirs holds the candidates of the PATH entries this process has
// looked programs up in (at most maxResolvedDirs of them), so that the
// agents one program builds resolve each entry's symbolic links once, not
// once per agent: resolving is an lstat of every element of the path, and
// it made a third of what building an agent allocated. An entry that did
// not resolve (it does not exist yet) is resolved again once it exists. What
// an entry resolves to changes only if somebody who may write its parent
// directory replaces a directory of it with a link; a model that can do
// that can put a program in the entry itself, which the guard does not
// refuse either (it keeps programs out of the work dirs), so the cached
// answer refuses exactly what a new one would.
var resolvedDirs struct {
	sync.RWMutex
	m map[string]resolvedDir
}

// resolvedDir is an entry's candidates and whether its links resolved.
type resolvedDir struct {
	forms    []string
	resolved bool
}

const maxResolvedDirs = 256

// dirCandidates is candidates(dir), from resolvedDirs when dir was
// resolved before. An entry that did not resolve (it did not exist) is
// resolved again once it exists. The list is shared: callers must not
// change it.
func dirCandidates(dir string) []string {
	if r, ok := lookupResolved(dir); ok {
		if r.resolved {
			return r.forms
		}
		if _, err := os.Lstat(dir); err != nil {
			return r.forms // still missing: what a new resolution would give
		}
	}
	return resolveDir(dir).forms
}

// rememberedCandidates is dirCandidates(dir) without looking again at an
// entry that did not exist when it was resolved: what plantedBefore does
// not look at again (see foundPrograms).
func rememberedCandidates(dir string) []string {
	if r, ok := lookupResolved(dir); ok {
		return r.forms
	}
	return resolveDir(dir).forms
}

func lookupResolved(dir string) (resolvedDir, bool) {
	resolvedDirs.RLock()
	defer resolvedDirs.RUnlock()
	r, ok := resolvedDirs.m[dir]
	return r, ok
}

// resolveDir resolves dir's links and records the answer.
func resolveDir(dir string) resolvedDir {
	forms, resolved := candidatesResolved(dir)
	r := resolvedDir{slices.Clip(forms), resolved}
	resolvedDirs.Lock()
	defer resolvedDirs.Unlock()
	if resolvedDirs.m == nil {
		resolvedDirs.m = make(map[string]resolvedDir)
	}
	if _, ok := resolvedDirs.m[dir]; ok || len(resolvedDirs.m) < maxResolvedDirs {
		resolvedDirs.m[dir] = r
	}
	return r
}

// IsProgramNotFound reports whether err is LookPath's "not on PATH".
func IsProgramNotFound(err error) bool { return errors.Is(err, fs.ErrNotExist) }
