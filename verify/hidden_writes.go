package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
)

// treeEntry is what a tree snapshot keeps of one entry of the work dir:
// enough to tell that a file was written (a write moves its change time,
// which no program can set back), not its content.
type treeEntry struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	ctime int64 // nanoseconds; 0 where the system does not say
	dir   bool
}

// snapshotTree records every entry under dir (symbolic links not
// followed), keyed by its slash path relative to dir.
func snapshotTree(dir string) (map[string]treeEntry, error) {
	out := map[string]treeEntry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return unreadableBelow(dir, p, err)
		}
		if p == dir {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = treeEntry{mode: info.Mode(), size: info.Size(), mtime: info.ModTime(), ctime: changeTime(info), dir: d.IsDir()}
		return nil
	})
	return out, err
}

// same reports whether e and f show an entry nothing wrote to (a folder
// whose entries changed is judged by them).
func (e treeEntry) same(f treeEntry) bool {
	if e.dir || f.dir {
		return e.dir == f.dir
	}
	return e.mode == f.mode && e.size == f.size && e.mtime.Equal(f.mtime) && e.ctime == f.ctime
}

// toolCaches are the folders where test tools keep what they learn from a
// run (vitest its results and timings in node_modules/.vite, babel and
// others in node_modules/.cache): a file a test run changed there is
// removed after the hidden tests' run rather than stopping the run, since
// the tool writes it at every run and makes it again when it is missing.
var toolCaches = []string{"node_modules/.vite/", "node_modules/.vitest/", "node_modules/.cache/"}

// inToolCache reports whether the slash path p lies in a toolCaches folder,
// of the work dir or of a package below it.
func inToolCache(p string) bool {
	for _, c := range toolCaches {
		if strings.HasPrefix(p, c) || strings.Contains(p, "/"+c) {
			return true
		}
	}
	return false
}

// undoRunWrites compares the work dir dir with before, its snapshot from
// before the hidden files were placed, once the run with them has ended
// and they are removed: what the run added is removed, and a file it
// changed is an error that names it. The run executed code the model
// wrote with the hidden tests in reach; a copy it left in the work dir
// would show them to the model. skip are the placed paths, which Place's
// undo already put back.
func undoRunWrites(dir string, before map[string]treeEntry, skip []string) error {
	after, err := snapshotTree(dir)
	if err != nil {
		return fmt.Errorf("hidden tests: the work dir after their run: %w", err)
	}
	var added, changed []string
	for p, e := range after {
		if slices.Contains(skip, p) {
			continue
		}
		b, ok := before[p]
		switch {
		case !ok:
			added = append(added, p)
		case !b.same(e) && inToolCache(p):
			added = append(added, p) // a cache: removed, and written again by the next run
		case !b.same(e):
			changed = append(changed, p)
		}
	}
	slices.Sort(added)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("hidden tests: %w", err)
	}
	defer root.Close()
	var removed []string
	for _, p := range added {
		if i := slices.IndexFunc(removed, func(r string) bool { return strings.HasPrefix(p, r+"/") }); i >= 0 {
			continue // inside a folder removed already
		}
		if err := root.RemoveAll(filepath.FromSlash(p)); err != nil {
			return fmt.Errorf("hidden tests: remove %s, which their run wrote: %w", p, err)
		}
		removed = append(removed, p)
	}
	if len(changed) > 0 {
		slices.Sort(changed)
		return agenterr.New(agenterr.CodeValidator, agenterr.LayerCompletion, false,
			"hidden tests: their run changed %s in the work dir %s; the change may hold the hidden tests, which the model must not read, so the run stops here: look at the change (git -C %s diff; a file git ignores is listed by git -C %s status --ignored) and restore the files before the run goes on",
			strings.Join(changed, ", "), dir, ShellQuote(dir), ShellQuote(dir))
	}
	return nil
}
