package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/proc"
)

// maxLinks bounds the symbolic links followed while resolving one path.
const maxLinks = 40

// workspace is the confined working directory.
type workspace struct {
	root   string // absolute, symbolic links evaluated
	alias  string // absolute as configured (may differ from root through links)
	maxOut int
	// protected reports protected files (nil: none).
	protected func(rel string) bool
}

// refuseProtected is the error Write and Edit give for a protected file
// (rel is the resolved path); nil when rel may be changed.
func (w *workspace) refuseProtected(tool, rel, shown string) error {
	if w.protected == nil || !w.protected(filepath.ToSlash(rel)) {
		return nil
	}
	e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true,
		"%s: %s is protected (verification protect globs); you may read it but not change it", tool, shown)
	e.Hint = "change the code under test instead; if the task cannot be done without changing this file, end your answer with a line starting CANNOT_COMPLETE: and your reason"
	return e
}

func newWorkspace(dir string) (*workspace, error) {
	if strings.TrimSpace(dir) == "" {
		return nil, agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerTool, false, "builtin tools need a working directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeConfigurationValidation, agenterr.LayerTool, false, "working directory %q", dir)
	}
	real, err := proc.RealPath(abs)
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeConfigurationValidation, agenterr.LayerTool, false, "working directory %q", dir)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeConfigurationValidation, agenterr.LayerTool, false, "working directory %q", dir)
	}
	if !st.IsDir() {
		return nil, agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerTool, false, "working directory %q is not a directory", dir)
	}
	return &workspace{root: real, alias: filepath.Clean(abs)}, nil
}

// open opens the work dir as an os.Root; every file operation goes through
// it so that a path can never leave the directory, even if links change
// between resolve and use.
func (w *workspace) open() (*os.Root, error) {
	r, err := os.OpenRoot(w.root)
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerTool, true, "working directory is not accessible")
	}
	return r, nil
}

// openPath resolves p (see resolve) and opens the work dir as an os.Root
// for operating on it: the pair every file tool starts with. The caller
// closes the root.
func (w *workspace) openPath(p string) (root *os.Root, rel string, err error) {
	if rel, err = w.resolve(p); err != nil {
		return nil, "", err
	}
	if root, err = w.open(); err != nil {
		return nil, "", err
	}
	return root, rel, nil
}

func escapeErr(p, format string, args ...any) *agenterr.Error {
	e := agenterr.New(agenterr.CodePathEscape, agenterr.LayerTool, true, "%s: "+format, append([]any{p}, args...)...)
	e.Hint = "use a path inside the working directory"
	return e
}

// within returns p relative to base when p is base or below it.
func within(base, p string) (string, bool) {
	rel, err := filepath.Rel(base, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// rel turns a path given to a tool into a clean path relative to the work
// dir, refusing ".." escapes and absolute paths outside it. It does not
// look at the file system.
func (w *workspace) rel(p string) (string, error) {
	if p == "" {
		return "", agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true, "empty path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true, "path %q contains a NUL byte", p)
	}
	if filepath.IsAbs(p) {
		c := filepath.Clean(p)
		for _, base := range []string{w.root, w.alias} {
			if r, ok := within(base, c); ok {
				return r, nil
			}
		}
		return "", escapeErr(p, "absolute path is outside the working directory")
	}
	c := filepath.Clean(p)
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", escapeErr(p, "path leaves the working directory")
	}
	return c, nil
}

// resolve returns the real location of p relative to the work dir,
// following symbolic links in every component as the kernel would, and
// refusing any link that leads outside. The final components may not
// exist (a file about to be written); they are returned as given.
func (w *workspace) resolve(p string) (string, error) {
	rel, err := w.rel(p)
	if err != nil {
		return "", err
	}
	pending := splitPath(rel)
	var done []string
	links := 0
	missing := false
	for len(pending) > 0 {
		part := pending[0]
		pending = pending[1:]
		switch part {
		case ".", "":
			continue
		case "..":
			if len(done) == 0 {
				return "", escapeErr(p, "path leaves the working directory")
			}
			done = done[:len(done)-1]
			continue
		}
		if missing {
			done = append(done, part)
			continue
		}
		full := filepath.Join(append([]string{w.root}, append(done, part)...)...)
		fi, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			missing = true
			done = append(done, part)
			continue
		}
		if err != nil {
			if errors.Is(err, fs.ErrPermission) || isNotDir(err) {
				// The kernel will report the same problem on use.
				done = append(done, part)
				missing = true
				continue
			}
			return "", agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerTool, true, "%s", p)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, part)
			continue
		}
		links++
		if links > maxLinks {
			return "", agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true, "%s: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(full)
		if err != nil {
			return "", agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerTool, true, "%s", p)
		}
		linkName := displayPath(filepath.Join(append(append([]string(nil), done...), part)...))
		fromRoot, parts, err := w.linkTarget(p, linkName, target, len(done))
		if err != nil {
			return "", err
		}
		if fromRoot {
			done = nil
		}
		pending = append(parts, pending...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return filepath.Join(done...), nil
}

// linkTarget is where the walk of path p goes on after the symbolic link
// linkName, depth components below the root, whose target is target: an
// absolute target inside the working directory (under its real path or
// its alias) goes on from the root (fromRoot) with the parts below it; a
// relative one from the link's directory, where no ".." may climb past the
// root. A target outside the working directory is an error.
func (w *workspace) linkTarget(p, linkName, target string, depth int) (fromRoot bool, parts []string, err error) {
	if filepath.IsAbs(target) {
		for _, base := range []string{w.root, w.alias} {
			if r, ok := within(base, filepath.Clean(target)); ok {
				return true, splitPath(r), nil
			}
		}
		return false, nil, escapeErr(p, "symbolic link %s points outside the working directory", linkName)
	}
	t := splitPath(filepath.Clean(target))
	for _, c := range t {
		if c == ".." {
			depth--
		} else if c != "." {
			depth++
		}
		if depth < 0 {
			return false, nil, escapeErr(p, "symbolic link %s points outside the working directory", linkName)
		}
	}
	return false, t, nil
}

func splitPath(p string) []string {
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(filepath.ToSlash(p), "/")
}

func isNotDir(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "not a directory")
}

// osErr turns an error from an os.Root operation into an error result
// message, recognising the root's own escape refusal.
func osErr(p string, err error) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "path escapes from parent") {
		return escapeErr(p, "path resolves outside the working directory")
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true, "%s: no such file or directory", p)
	case errors.Is(err, fs.ErrPermission):
		return agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true, "%s: permission denied", p)
	}
	return agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true, "%s: %v", p, fmt.Sprint(err))
}
