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
// Bash tool's) with the Go standard library's compiled packages when the
// work dir is a Go module, so the test baseline does not spend its first
// minutes compiling them. The seed is built once per toolchain in the
// user's cache directory from no repository's code (sandbox.GoStdlibSeed)
// and only ever copied, so nothing a run executes can change it. A seed
// that cannot be had costs time, not safety: it becomes a warning.
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
	act := event.Activity{Kind: event.ActivityBuildCache, Name: "Go standard library"}
	start := time.Now()
	event.EmitActivity(a.emit, event.ActivityStartEvent{Activity: act})
	environ := procenv.ForCommands(os.Environ(), a.spec.Runner.Boundaries.Env)
	seed, err := sandbox.GoStdlibSeed(ctx, filepath.Join(userCache, "capstan", "go-stdlib"), environ, wd)
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

// isGoModule reports whether dir is the root of a Go module or workspace.
func isGoModule(dir string) bool {
	for _, name := range []string{"go.mod", "go.work"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}
