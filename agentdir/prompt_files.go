package agentdir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/regularfile"
)

// maxPromptBytes bounds the size of a prompt file. Larger files are almost
// certainly a mistake (a log or a binary) and would be sent to a model.
const maxPromptBytes = 4 << 20

// cacheEntry is a parsed prompt file together with the identity of the file
// it was read from (device, inode, size, modification time).
type cacheEntry struct {
	info os.FileInfo
	tmpl *promptTemplate
}

// fileCache caches parsed prompt files by absolute path. It is safe for
// concurrent use.
//
// With fsys set (a pinned definition snapshot, which never changes), a file
// is read from fsys once and every later lookup is a hit: an edit of the
// agent folder on disk cannot change a prompt of the running agent.
//
// Without fsys, every file is first read through an [os.Root] opened on the
// directory it must stay in, which refuses ".." and symlinks that lead
// outside. A cache hit is then validated with a plain stat of the same path:
// the entry is used only when that stat names the very file (same device
// and inode, same size and modification time) that was read through the
// root. So a hit can only ever return content that was read legitimately,
// and a symlink re-pointed elsewhere, or an edited file, is a miss that goes
// through the root again.
type fileCache struct {
	fsys    fs.FS
	mu      sync.RWMutex
	entries map[string]cacheEntry
}

// errNotFound reports that a candidate file does not exist.
var errNotFound = errors.New("not found")

// load returns the parsed template at root/rel, where root lies in
// agentDir. abs is filepath.Join(root, rel) and display the name used in
// messages. It returns errNotFound when the file does not exist.
func (c *fileCache) load(agentDir, root, rel, abs, display string) (*promptTemplate, error) {
	if c.fsys != nil {
		return c.loadFS(agentDir, abs, display)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if isNotExist(err) {
			return nil, errNotFound
		}
		// The plain path may fail where the confined one would not (and
		// vice versa); let the confined read decide and report.
		fi = nil
	}
	if fi != nil {
		c.mu.RLock()
		e, ok := c.entries[abs]
		c.mu.RUnlock()
		if ok && sameFile(e.info, fi) {
			return e.tmpl, nil
		}
	}
	info, data, err := readConfined(agentDir, root, rel, display)
	if err != nil {
		return nil, err
	}
	return c.store(abs, info, data, display)
}

// store parses data, read from the file info describes, and caches it
// under abs.
func (c *fileCache) store(abs string, info os.FileInfo, data []byte, display string) (*promptTemplate, error) {
	t, err := parsePromptTemplate(data, display)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[string]cacheEntry)
	}
	c.entries[abs] = cacheEntry{info: info, tmpl: t}
	c.mu.Unlock()
	return t, nil
}

// loadFS is load for a cache over a pinned file system: the file
// agentDir-relative path of abs is read and parsed once.
func (c *fileCache) loadFS(agentDir, abs, display string) (*promptTemplate, error) {
	c.mu.RLock()
	e, ok := c.entries[abs]
	c.mu.RUnlock()
	if ok {
		return e.tmpl, nil
	}
	name, ok := fsPath(agentDir, abs)
	if !ok {
		return nil, errNotFound
	}
	fi, err := fs.Stat(c.fsys, name)
	if err != nil {
		if isNotExist(err) {
			return nil, errNotFound
		}
		return nil, readError(err, display)
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(display)
	}
	if fi.Size() > maxPromptBytes {
		return nil, promptTooLarge(display)
	}
	data, err := fs.ReadFile(c.fsys, name)
	if err != nil {
		return nil, readError(err, display)
	}
	return c.store(abs, fi, data, display)
}

// fsPath turns abs, a path inside agentDir, into a path of the cache's
// file system.
func fsPath(agentDir, abs string) (string, bool) {
	rel, ok := within(agentDir, abs)
	if !ok {
		return "", false
	}
	name := filepath.ToSlash(rel)
	return name, fs.ValidPath(name)
}

// exists reports whether root/rel names a regular file reachable without
// leaving root (which lies in agentDir); with a pinned file system, whether
// that holds the file.
func (c *fileCache) exists(agentDir, root, rel, abs string) bool {
	if c.fsys != nil {
		name, ok := fsPath(agentDir, abs)
		if !ok {
			return false
		}
		fi, err := fs.Stat(c.fsys, name)
		return err == nil && fi.Mode().IsRegular()
	}
	if _, err := os.Stat(abs); err != nil {
		return false
	}
	r, err := openRoot(agentDir, root)
	if err != nil {
		return false
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	return err == nil && fi.Mode().IsRegular()
}

// sameFile reports whether a and b describe the same, unchanged file.
func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// openRoot opens root, a directory inside agentDir, as an os.Root reached
// through an os.Root on agentDir, so that root itself cannot be a symlink
// leading out of the agent directory.
func openRoot(agentDir, root string) (*os.Root, error) {
	ar, err := os.OpenRoot(agentDir)
	if err != nil || root == agentDir {
		return ar, err
	}
	defer ar.Close()
	rel, ok := within(agentDir, root)
	if !ok {
		return nil, &fs.PathError{Op: "openat", Path: root, Err: errors.New("path escapes from parent")}
	}
	return ar.OpenRoot(rel)
}

// readConfined reads root/rel through an os.Root, so that neither ".." nor
// a symlink can take the read outside root (nor root outside agentDir).
func readConfined(agentDir, root, rel, display string) (os.FileInfo, []byte, error) {
	r, err := openRoot(agentDir, root)
	if err != nil {
		if isNotExist(err) {
			return nil, nil, errNotFound
		}
		if isEscape(err) {
			return nil, nil, promptEscapeError(display, root)
		}
		return nil, nil, readError(err, display)
	}
	defer r.Close()
	// A FIFO planted in place of a prompt must not block the read.
	f, fi, err := regularfile.Open(r.OpenFile, rel)
	var nr *regularfile.NotRegularError
	switch {
	case errors.As(err, &nr):
		return nil, nil, notRegular(display)
	case isNotExist(err):
		return nil, nil, errNotFound
	case isEscape(err):
		return nil, nil, promptEscapeError(display, root)
	case err != nil:
		return nil, nil, readError(err, display)
	}
	defer f.Close()
	if fi.Size() > maxPromptBytes {
		return nil, nil, promptTooLarge(display)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPromptBytes+1))
	if err != nil {
		return nil, nil, readError(err, display)
	}
	if len(data) > maxPromptBytes {
		return nil, nil, promptTooLarge(display)
	}
	return fi, data, nil
}

func promptEscapeError(display, root string) error {
	return &agenterr.Error{
		Code: agenterr.CodePathEscape, Layer: agenterr.LayerPrompt,
		Message: fmt.Sprintf("prompt path leads outside %s (through \"..\" or a symlink)", root),
		File:    display,
		Hint:    "keep prompt files, and the targets of symlinks among them, inside the agent's prompt directory",
	}
}

func notRegular(display string) error {
	return &agenterr.Error{
		Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
		Message: "prompt path is not a regular file", File: display,
		Hint: "point the reference at a .md file",
	}
}

func readError(err error, display string) error {
	return &agenterr.Error{
		Code: agenterr.CodePromptNotFound, Layer: agenterr.LayerPrompt,
		Message: "cannot read prompt file", File: display, Err: err,
		Hint: "check the file's permissions",
	}
}

func promptTooLarge(display string) error {
	return &agenterr.Error{
		Code: agenterr.CodePromptParse, Layer: agenterr.LayerPrompt,
		Message: fmt.Sprintf("prompt file is larger than %d bytes", maxPromptBytes), File: display,
		Hint: "prompts are sent to the model on every iteration; keep them small",
	}
}

// within reports whether the cleaned absolute path p is dir or inside dir,
// and returns p relative to dir.
func within(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", false
	}
	return rel, true
}
