package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/agenterr"
)

// Cache is the build cache that the command validators of one run share,
// so that a test suite does not recompile its toolchain's libraries on
// every validation: a directory outside the work dir, which the Bash
// tool's commands cannot reach, named to the commands by GOCACHE,
// XDG_CACHE_HOME (pip and other tools that follow it) and
// npm_config_cache.
//
// It is writable only until [Cache.Seal]. The runs before the model's
// first turn (the test baseline) fill it with what the unchanged work dir
// needs; every later run, which may execute code the model wrote, reads
// it only. A cache the model's code could write would let it plant a
// result — a compiled package, a passing test — for a state of the work
// dir it never ran, so that a later validation passes without the
// cheating code being there.
//
// A Cache is safe for concurrent use. Remove deletes it.
type Cache struct {
	dir    string
	mu     sync.Mutex
	sealed bool
}

// cacheVars are the variables a Cache sets and the subdirectories they
// name.
var cacheVars = []struct{ env, sub string }{
	{"GOCACHE", "go-build"},
	{"XDG_CACHE_HOME", "xdg"},
	{"npm_config_cache", "npm"},
}

// goCacheLayout are the subdirectories of a Go build cache: go creates
// them when it opens its cache, and fails when it cannot, so a sealed
// (read-only) GOCACHE must have them even when nothing filled it.
func goCacheLayout() []string {
	out := make([]string, 256)
	for i := range out {
		out[i] = fmt.Sprintf("%02x", i)
	}
	return out
}

// NewCache creates an empty, writable cache in a new private directory
// under parent (the system temporary directory when parent is "").
func NewCache(parent string) (*Cache, error) {
	dir, err := os.MkdirTemp(parent, "capstan-cache-")
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the validators' build cache")
	}
	// The sandbox's writable directories are matched by their real path.
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the validators' build cache")
	}
	c := &Cache{dir: dir}
	for _, v := range cacheVars {
		if err := os.Mkdir(filepath.Join(dir, v.sub), 0o700); err != nil {
			_ = c.Remove()
			return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the validators' build cache")
		}
	}
	for _, d := range goCacheLayout() {
		if err := os.Mkdir(filepath.Join(dir, "go-build", d), 0o700); err != nil {
			_ = c.Remove()
			return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the validators' build cache")
		}
	}
	return c, nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Seal makes the cache read-only for every run that starts afterwards.
// A run already going keeps the access it started with.
func (c *Cache) Seal() {
	c.mu.Lock()
	c.sealed = true
	c.mu.Unlock()
}

// Sealed reports whether Seal was called.
func (c *Cache) Sealed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sealed
}

// Remove deletes the cache and everything in it.
func (c *Cache) Remove() error {
	// Some tools make their cache entries read-only (Go's module cache);
	// give the owner write access back so that they can be removed.
	_ = filepath.WalkDir(c.dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("remove the validators' build cache: %w", err)
	}
	return nil
}

// apply adds the cache to a run: its variables to env (replacing what env
// had for them) and its directory to the writable or, once sealed, the
// read-only paths. A sealed subdirectory that nothing filled is left out
// (its tool then uses the run's private HOME), except GOCACHE, whose
// layout NewCache made.
func (c *Cache) apply(s *Spec) {
	sealed := c.Sealed()
	env := make([]string, 0, len(s.Env)+len(cacheVars))
	for _, kv := range s.Env {
		if !isCacheVar(kv) {
			env = append(env, kv)
		}
	}
	for _, v := range cacheVars {
		p := filepath.Join(c.dir, v.sub)
		if sealed && v.env != "GOCACHE" && emptyDir(p) {
			continue
		}
		env = append(env, v.env+"="+p)
	}
	s.Env = env
	if sealed {
		s.ReadOnly = append(s.ReadOnly, c.dir)
	} else {
		s.Writable = append(s.Writable, c.dir)
	}
}

// isCacheVar reports whether kv sets one of the Cache's variables.
func isCacheVar(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	for _, v := range cacheVars {
		if k == v.env {
			return true
		}
	}
	return false
}

// emptyDir reports whether dir has no entry (or cannot be read).
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return true
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}
