package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/proc"
)

// Cache is the build cache that the command validators of one run share,
// so that a test suite does not recompile its toolchain's libraries on
// every validation: a directory outside the work dir, which the Bash
// tool's commands cannot reach, named to the commands by GOCACHE,
// XDG_CACHE_HOME (pip and other tools that follow it), npm_config_cache
// and PYTHONPYCACHEPREFIX (where Python reads and writes the bytecode of
// every module, instead of the __pycache__ folders beside the sources).
//
// Commands write it only until [Cache.Seal]. The runs before the model's
// first turn (the test baseline) fill it with what the unchanged work dir
// needs; every later run, which may execute code the model wrote, gets a
// private copy of it, removed when the run ends. A cache the model's code
// could write would let it plant a result — a compiled package, a passing
// test — for a state of the work dir it never ran, so that a later
// validation passes without the cheating code being there. (Tools need
// their cache writable: go fails on a read-only GOCACHE; hence the copy.)
//
// A cache made by [NewLazyCache] has no directory until the first command
// that runs with it (or [Cache.Create]): a run that never runs a command
// makes none.
//
// A Cache is safe for concurrent use. Remove deletes it.
type Cache struct {
	// parent is where the directory is made ("" = the system temporary
	// directory); prepare, when set, fills it before any command sees it.
	parent  string
	prepare func(context.Context, *Cache)
	// create guards tried and err: whether the directory was made (or
	// tried, or the cache removed first) and why it could not be.
	create sync.Mutex
	tried  bool
	err    error
	// mu guards dir ("" until made) and sealed.
	mu     sync.Mutex
	dir    string
	sealed bool
}

// cacheVars are the variables a Cache sets and the subdirectories they
// name.
var cacheVars = []struct{ env, sub string }{
	{"GOCACHE", "go-build"},
	{"XDG_CACHE_HOME", "xdg"},
	{"npm_config_cache", "npm"},
	{"PYTHONPYCACHEPREFIX", "pycache"},
}

// NewCache creates an empty cache in a new private directory under parent
// (the system temporary directory when parent is "").
func NewCache(parent string) (*Cache, error) {
	c := &Cache{parent: parent}
	if err := c.Create(context.Background()); err != nil {
		return nil, err
	}
	return c, nil
}

// NewLazyCache returns a cache whose private directory under parent (the
// system temporary directory when parent is "") is made by the first
// command that runs with it, or by [Cache.Create]: once, however many
// commands start at the same time. prepare, when not nil, is then called
// once with the new cache, before any command sees it (to [Cache.Seed]
// it); what it cannot do it reports itself. A directory that cannot be
// made fails that command, and every later one, with SANDBOX_SETUP (see
// [Cache.Err]).
func NewLazyCache(parent string, prepare func(ctx context.Context, c *Cache)) *Cache {
	return &Cache{parent: parent, prepare: prepare}
}

// errCacheRemoved is why a cache removed before any command made its
// directory makes none afterwards.
var errCacheRemoved = errors.New("the build cache was removed before its first command")

// Create makes the cache's directory if it does not exist yet (see
// [NewLazyCache]) and returns why it could not, the same error every
// time. Commands that need the cache wait here until it is prepared.
func (c *Cache) Create(ctx context.Context) error {
	c.create.Lock()
	defer c.create.Unlock()
	if c.tried {
		return c.err
	}
	c.tried = true
	dir, err := makeCache(c.parent)
	if err != nil {
		c.err = agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the validators' build cache")
		return c.err
	}
	c.mu.Lock()
	c.dir = dir
	c.mu.Unlock()
	if c.prepare != nil {
		c.prepare(ctx, c)
	}
	return nil
}

// Err is why the cache's directory could not be made: nil when it was, or
// when nothing has needed it yet.
func (c *Cache) Err() error {
	c.create.Lock()
	defer c.create.Unlock()
	return c.err
}

// makeCache makes a cache's directory under parent: its subdirectories
// and its owner file. It returns the directory's real path.
func makeCache(parent string) (string, error) {
	dir, err := os.MkdirTemp(parent, "capstan-cache-")
	if err != nil {
		return "", err
	}
	// The sandbox's writable directories are matched by their real path.
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	if err := makeCacheDirs(real); err != nil {
		_ = removeTree(real)
		return "", err
	}
	// A run killed before it could remove its cache leaves it behind:
	// the owner file lets a later run tell, and remove, such leftovers.
	if err := markOwned(real); err != nil {
		_ = removeTree(real)
		return "", err
	}
	if parent == "" {
		sweepStale()
	}
	return real, nil
}

// lastStaleSweep is when this process last removed what killed runs left
// in the system's temporary directory (Unix nanoseconds; 0 = never). It
// is process-wide, as that directory is.
var lastStaleSweep atomic.Int64

// staleSweepEvery is how often a process looks for what killed runs left
// again after its first cache.
const staleSweepEvery = 10 * time.Minute

// sweepStale runs RemoveStale("") at a process's first cache and then at
// most every staleSweepEvery: the directories of this process's own runs
// are never stale, and a program that builds many agents (an embedder,
// a worker) read the whole temporary directory, and the owner file of
// every live run's cache in it, for each one (about 100 ms per agent with
// a thousand agents alive).
func sweepStale() {
	now := time.Now().UnixNano()
	last := lastStaleSweep.Load()
	if last != 0 && now-last < int64(staleSweepEvery) {
		return
	}
	if lastStaleSweep.CompareAndSwap(last, now) {
		RemoveStale("")
	}
}

// makeCacheDirs creates the subdirectories of the cache variables in dir.
func makeCacheDirs(dir string) error {
	for _, v := range cacheVars {
		if err := os.MkdirAll(filepath.Join(dir, v.sub), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Env are the variables that name the cache's directories (GOCACHE,
// XDG_CACHE_HOME, npm_config_cache, PYTHONPYCACHEPREFIX), for a command
// run outside a sandbox.
func (c *Cache) Env() []string {
	dir := c.Dir()
	out := make([]string, len(cacheVars))
	for i, v := range cacheVars {
		out[i] = v.env + "=" + filepath.Join(dir, v.sub)
	}
	return out
}

// Dir is the cache's directory: "" while a lazy cache has not made it
// (see [NewLazyCache]).
func (c *Cache) Dir() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dir
}

// DropBytecodeUnder removes the bytecode Python wrote into the cache for
// the modules below dir (the work dir, as given and resolved), keeping
// that of every other module (the standard library, the test runner's
// packages). Python trusts a .pyc whose recorded source size and
// modification time (in whole seconds) match the source's: a fix that
// keeps a line's length, made within the second of the test baseline,
// would otherwise be tested as the baseline's bytecode of the code before
// it. Called once the baseline has ended, before [Cache.Seal].
func (c *Cache) DropBytecodeUnder(dir string) error {
	d := c.Dir()
	if d == "" || dir == "" {
		return nil
	}
	forms := []string{filepath.Clean(dir)}
	if real, err := proc.RealPath(dir); err == nil && real != forms[0] {
		forms = append(forms, real)
	}
	for _, f := range forms {
		if !filepath.IsAbs(f) {
			continue
		}
		if err := removeTree(filepath.Join(d, "pycache", f)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("sandbox: drop the work dir's bytecode from the build cache: %w", err)
		}
	}
	return nil
}

// Seal makes every run that starts afterwards work on a private copy of
// the cache. A run already going keeps the access it started with.
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

// Remove deletes the cache and everything in it. A lazy cache removed
// before any command made its directory makes none afterwards.
func (c *Cache) Remove() error {
	c.create.Lock()
	if !c.tried {
		c.tried = true
		c.err = agenterr.Wrap(errCacheRemoved, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the validators' build cache")
	}
	c.create.Unlock()
	dir := c.Dir()
	if dir == "" {
		return nil
	}
	if err := removeTree(dir); err != nil {
		return fmt.Errorf("remove the validators' build cache: %w", err)
	}
	return nil
}

// removeTree deletes dir, first giving its owner write access to every
// directory in it: some tools make their cache entries read-only (Go's
// module cache), which would stop the removal.
func removeTree(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// apply adds the cache to a run: its variables to env (replacing what env
// had for them) and, until the cache is sealed, its directory to the
// writable ones. Once sealed the run gets a private copy of the cache
// instead (a cacheLayer, which the helper puts in place); the returned
// function removes it.
func (c *Cache) apply(ctx context.Context, s *Spec) (cleanup func(), err error) {
	if err := c.Create(ctx); err != nil {
		return nil, err
	}
	dir, cleanup := c.Dir(), func() {}
	if c.Sealed() {
		layer, err := c.newLayer()
		if err != nil {
			return nil, err
		}
		s.cacheLayer, dir = layer, layer.Merged
		cleanup = func() { _ = removeTree(layer.Root) }
	}
	env := make([]string, 0, len(s.Env)+len(cacheVars)+1)
	goflags := ""
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			goflags = v
			continue
		}
		// Python writes its bytecode into the cache's pycache, which
		// holds no source and which the work dir never sees: what the
		// baseline compiled (the standard library, the test runner)
		// serves every later validation, instead of all of it being
		// compiled again each time.
		if !isCacheVar(kv) && !strings.HasPrefix(kv, "PYTHONDONTWRITEBYTECODE=") {
			env = append(env, kv)
		}
	}
	for _, v := range cacheVars {
		env = append(env, v.env+"="+filepath.Join(dir, v.sub))
	}
	// go test never answers from a test result in the cache: what the
	// cache holds was written by commands that ran code, and a result is
	// not a build output that its inputs' hash vouches for. -count=1 in
	// GOFLAGS turns the result cache off whatever the command line says
	// (go build and go vet ignore it).
	env = append(env, "GOFLAGS="+strings.TrimSpace(goflags+" -count=1"))
	s.Env = env
	s.Writable = append(s.Writable, dir)
	return cleanup, nil
}

// cacheLayer is a run's private copy of a sealed cache: Merged, the
// directory the run's cache variables name, shows Lower (the sealed cache,
// which nothing the run does can change) with the run's own changes,
// which go to Upper. Where the kernel allows, the helper mounts an overlay
// file system there (Work is its work directory), so that nothing is
// copied; elsewhere it copies Lower into Merged. Root holds the three and
// is removed after the run.
type cacheLayer struct {
	Root   string `json:"root"`
	Lower  string `json:"lower"`
	Upper  string `json:"upper"`
	Work   string `json:"work"`
	Merged string `json:"merged"`
}

// newLayer creates the empty directories of a run's cacheLayer beside the
// cache.
func (c *Cache) newLayer() (*cacheLayer, error) {
	lower := c.Dir()
	root, err := os.MkdirTemp(filepath.Dir(lower), "capstan-cache-run-")
	if err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the run's copy of the validators' build cache")
	}
	// A run killed before it could remove its copy leaves it behind: the
	// owner file lets a later run tell, and remove, such leftovers.
	if err := markOwned(root); err != nil {
		_ = removeTree(root)
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "mark the run's copy of the validators' build cache")
	}
	l := &cacheLayer{Root: root, Lower: lower, Upper: filepath.Join(root, "upper"), Work: filepath.Join(root, "work"), Merged: filepath.Join(root, "cache")}
	for _, d := range []string{l.Upper, l.Work, l.Merged} {
		if err := os.Mkdir(d, 0o700); err != nil {
			_ = removeTree(root)
			return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the run's copy of the validators' build cache")
		}
	}
	return l, nil
}

// copyInto is the layer without an overlay: Lower copied into Merged.
func (l *cacheLayer) copyInto() error {
	if err := copyTree(l.Lower, l.Merged); err != nil {
		return fmt.Errorf("copy the validators' build cache: %w", err)
	}
	return makeCacheDirs(l.Merged)
}

// copyTree copies the directories and regular files (nothing else) under
// src into the existing directory dst.
func copyTree(src, dst string) error {
	return walkTree(src, dst, copyFile)
}

// walkTree recreates the directories under src in dst and calls file for
// each regular file (nothing else is taken).
func walkTree(src, dst string, file func(from, to string) error) error {
	return filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		switch {
		case e.IsDir():
			return os.Mkdir(filepath.Join(dst, rel), 0o700)
		case e.Type().IsRegular():
			return file(p, filepath.Join(dst, rel))
		}
		return nil
	})
}

// linkTree is copyTree with each regular file hard-linked where the file
// system allows (copied where it does not).
func linkTree(src, dst string) error {
	return walkTree(src, dst, func(from, to string) error {
		if os.Link(from, to) == nil {
			return nil
		}
		return copyFile(from, to)
	})
}

// copyFile copies the regular file src to the new file dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
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
