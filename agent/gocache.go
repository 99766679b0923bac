package agent

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/procenv"
	"github.com/capstan-dev/capstan/sandbox"
)

// seedGoCaches fills the run's new build caches (the validators' and the
// Bash tool's) when the work dir is a Go module, so the test baseline
// does not spend its first minutes compiling: from the work dir's own
// build cache that an earlier run's baseline left (sandbox.GoWorkDirCache,
// see saveGoCache), else from the Go standard library's compiled packages,
// built once per toolchain from no repository's code
// (sandbox.GoStdlibSeed). Both are only ever copied into a run, so
// nothing a run executes changes them in place. A seed that cannot be had
// costs time, not safety: it becomes a warning.
func (a *Agent) seedGoCaches(ctx context.Context, wd string) {
	caches := make([]*sandbox.Cache, 0, 2)
	for _, c := range []*sandbox.Cache{a.validatorCache, a.bashCache} {
		if c != nil {
			caches = append(caches, c)
		}
	}
	if len(caches) == 0 || !isGoModule(wd) {
		return
	}
	userCache, err := os.UserCacheDir()
	if err != nil {
		return
	}
	environ := procenv.ForCommands(os.Environ(), a.spec.Runner.Boundaries.Env)
	root := filepath.Join(userCache, "capstan")
	if a.validatorCache != nil {
		// Only a run whose validators fill a cache of their own (a new
		// run's baseline) saves it for the next one (saveGoCache); a
		// resumed run only seeds from it.
		if a.goWorkDirCache, err = sandbox.GoWorkDirCache(ctx, filepath.Join(root, "go-workdir"), environ, wd); err != nil {
			a.warnings = append(a.warnings, "the work dir's Go build cache is not kept for the next run: "+err.Error())
		}
	}
	act := event.Activity{Kind: event.ActivityBuildCache, Name: "Go standard library", Detail: "preparing (compiled once per Go toolchain)"}
	var seed string
	if dir := a.goWorkDirCache; dir != "" && sandbox.HasGoBuild(dir) {
		act.Name, act.Detail, seed = "the work dir's Go packages", "copying what the last run's test baseline compiled", dir
	}
	start := time.Now()
	event.EmitActivity(a.emit, event.ActivityStartEvent{Activity: act})
	if seed == "" {
		seed, err = a.goStdlibSeed(ctx, wd)
	}
	for _, c := range caches {
		if err == nil && seed != "" {
			err = c.Seed(seed)
		}
	}
	act.Took, act.Failed = time.Since(start), err != nil
	event.EmitActivity(a.emit, event.ActivityEndEvent{Activity: act})
	if err != nil {
		a.warnings = append(a.warnings, "the build caches start empty (the test baseline compiles Go's standard library): "+err.Error())
	}
}

// saveGoCache keeps what the test baseline compiled for the next run in
// this work dir. It is called when the baseline has ended and before any
// validator runs the model's code: the validators' cache then holds the
// seed and what the baseline's commands wrote for the work dir as the run
// found it, nothing the model did. Later validators work on private copies
// (sandbox.Cache.Seal), which are never saved. A cache that cannot be
// saved costs the next run time: a warning.
func (a *Agent) saveGoCache(ctx context.Context) {
	if a.goWorkDirCache == "" || a.validatorCache == nil || a.opts.Resume != nil || ctx.Err() != nil {
		return
	}
	act := event.Activity{Kind: event.ActivityBuildCache, Name: "the work dir's Go packages", Detail: "keeping what the test baseline compiled for the next run"}
	start := time.Now()
	event.EmitActivity(a.emit, event.ActivityStartEvent{Activity: act})
	err := a.validatorCache.SaveGoBuild(a.goWorkDirCache)
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
	environ := procenv.ForCommands(os.Environ(), a.spec.Runner.Boundaries.Env)
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
