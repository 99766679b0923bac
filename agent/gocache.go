package agent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/sandbox"
)

// seedGoCaches chooses what fills the run's build caches (the
// validators' and the Bash tool's) when the work dir is a Go module, so
// the test baseline does not spend its first minutes compiling: the work
// dir's own build cache that an earlier run's baseline left
// (sandbox.GoWorkDirCache, see saveGoCache), else the Go standard
// library's compiled packages, built once per toolchain from no
// repository's code (sandbox.GoStdlibSeed). It is chosen now, before the
// model can touch the work dir (the go commands it runs read the work
// dir's go.mod); seedCache copies it into a cache when a command first
// makes one. Both are only ever copied into a run, so nothing a run
// executes changes them in place. A seed that cannot be had costs time,
// not safety: it becomes a warning.
func (a *Agent) seedGoCaches(ctx context.Context, wd string) {
	if a.validatorCache == nil && a.bashCache == nil || !isGoModule(wd) {
		return
	}
	userCache, err := os.UserCacheDir()
	if err != nil {
		return
	}
	g := &goCaches{}
	a.goCaches = g
	environ := proc.ForCommands(os.Environ(), a.spec.Runner.Boundaries.Env)
	root := filepath.Join(userCache, "capstan")
	if a.validatorCache != nil {
		// Only a run whose validators fill a cache of their own (a new
		// run's baseline) saves it for the next one (saveGoCache); a
		// resumed run only seeds from it.
		if g.workDir, err = sandbox.GoWorkDirCache(ctx, filepath.Join(root, "go-workdir"), environ, wd); err != nil {
			a.warnings = append(a.warnings, "the work dir's Go build cache is not kept for the next run: "+err.Error())
		}
	}
	if dir := g.workDir; dir != "" && sandbox.HasGoBuild(dir) {
		g.seed, g.name, g.detail = dir, "the work dir's Go packages", "copying what the last run's test baseline compiled"
		return
	}
	act := event.Activity{Kind: event.ActivityBuildCache, Name: "Go standard library", Detail: "preparing (compiled once per Go toolchain)"}
	start := time.Now()
	event.EmitActivity(a.emit, event.ActivityStartEvent{Activity: act})
	seed, err := a.goStdlibSeed(ctx, wd)
	act.Took, act.Failed = time.Since(start), err != nil
	event.EmitActivity(a.emit, event.ActivityEndEvent{Activity: act})
	if err != nil {
		a.warnings = append(a.warnings, "the build caches start empty (the test baseline compiles Go's standard library): "+err.Error())
		return
	}
	g.seed, g.name, g.detail = seed, "Go standard library", "copying the compiled packages into the run's build cache"
}

// goCaches is what seedGoCaches chose for a run in a Go module: the
// directory of Go build cache files its build caches start from (seed;
// "" for none) and how copying it is shown (name, detail), and workDir,
// where the run keeps the work dir's Go build cache for the next run
// ("" when it keeps none). An Agent keeps a pointer to it (nil outside a
// Go module), not the strings, so that an agent stays within its
// allocation size class.
type goCaches struct{ seed, name, detail, workDir string }

// seedCache is the prepare function of the run's build caches
// (sandbox.NewLazyCache): it copies the seed seedGoCaches chose into c
// when a command first makes it. It may run on several goroutines at
// once, one per cache. A copy that fails costs time: a warning.
func (a *Agent) seedCache(ctx context.Context, c *sandbox.Cache) {
	g := a.goCaches
	if g == nil || g.seed == "" {
		return
	}
	act := event.Activity{Kind: event.ActivityBuildCache, Name: g.name, Detail: g.detail}
	start := time.Now()
	event.EmitActivity(a.emit, event.ActivityStartEvent{Activity: act})
	err := c.Seed(g.seed)
	act.Took, act.Failed = time.Since(start), err != nil
	event.EmitActivity(a.emit, event.ActivityEndEvent{Activity: act})
	if err != nil {
		a.emit.Emit(event.Warning("a build cache starts empty (its first go command compiles Go's standard library): " + err.Error()))
	}
}

// cacheFailed is why one of the run's build caches could not be made by
// the command that first needed it (nil when none failed): the run ends
// with that SANDBOX_SETUP error (LoopConfig.Broken), as it did when the
// caches were made before the model's first turn.
func (a *Agent) cacheFailed() error {
	for _, c := range []*sandbox.Cache{a.bashCache, a.validatorCache} {
		if c != nil {
			if err := c.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// realTemp is the system temporary directory's real path, resolved once
// for each value of os.TempDir (TMPDIR) rather than for every agent.
var realTemp struct {
	sync.Mutex
	dir, real string
}

// realTempDir is os.TempDir() with its symbolic links resolved.
func realTempDir() (string, error) {
	dir := os.TempDir()
	realTemp.Lock()
	defer realTemp.Unlock()
	if realTemp.real != "" && realTemp.dir == dir {
		return realTemp.real, nil
	}
	r, err := proc.RealPath(dir)
	if err != nil {
		return "", err
	}
	realTemp.dir, realTemp.real = dir, r
	return r, nil
}

// tempOutside reports whether the system temporary directory, where the
// run's build caches are made, lies outside the work dir wd (false when
// wd's real path cannot be had). A temporary directory that does not
// resolve is SANDBOX_SETUP: no cache could be made in it.
func tempOutside(wd string) (bool, error) {
	tmp, err := realTempDir()
	if err != nil {
		return false, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the validators' build cache")
	}
	realWD, err := proc.RealPath(wd)
	return err == nil && !pathInside(realWD, tmp), nil
}

// saveGoCache keeps what the test baseline compiled for the next run in
// this work dir. It is called when the baseline has ended and before any
// validator runs the model's code: the validators' cache then holds the
// seed and what the baseline's commands wrote for the work dir as the run
// found it, nothing the model did. Later validators work on private copies
// (sandbox.Cache.Seal), which are never saved. A cache that cannot be
// saved costs the next run time: a warning.
func (a *Agent) saveGoCache(ctx context.Context) {
	if a.goCaches == nil || a.goCaches.workDir == "" || a.validatorCache == nil || a.validatorCache.Dir() == "" || a.opts.Resume != nil || ctx.Err() != nil {
		return
	}
	act := event.Activity{Kind: event.ActivityBuildCache, Name: "the work dir's Go packages", Detail: "keeping what the test baseline compiled for the next run"}
	start := time.Now()
	event.EmitActivity(a.emit, event.ActivityStartEvent{Activity: act})
	err := a.validatorCache.SaveGoBuild(a.goCaches.workDir)
	act.Took, act.Failed = time.Since(start), err != nil
	event.EmitActivity(a.emit, event.ActivityEndEvent{Activity: act})
	if err != nil {
		a.emit.Emit(event.Warning("the work dir's Go build cache is not kept for the next run: " + err.Error()))
	}
}

// goStdlibSeed is the Go standard library's compiled packages for the
// toolchain the run's commands use (sandbox.GoStdlibSeed, kept in the
// user's cache directory).
func (a *Agent) goStdlibSeed(ctx context.Context, wd string) (string, error) {
	userCache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	environ := proc.ForCommands(os.Environ(), a.spec.Runner.Boundaries.Env)
	return sandbox.GoStdlibSeed(ctx, filepath.Join(userCache, "capstan", "go-stdlib"), environ, wd)
}

// isGoModule reports whether dir is the root of a Go module or workspace.
func isGoModule(dir string) bool {
	for _, name := range []string{"go.mod", "go.work"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}
