package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
)

// sharedCache is the sealed validators' build cache that the runs of
// the Go fixtures share (Config.ValidatorCache), filled once per test
// binary: without it every run's sandboxed go test validators compile the
// testing packages from scratch.
var sharedCache struct {
	once  sync.Once
	cache *sandbox.Cache
}

// withSharedCache returns opts with the shared, sealed validators' cache
// (none where the machine cannot sandbox or has no go).
func withSharedCache(t testing.TB, opts BuildOptions) BuildOptions {
	t.Helper()
	sharedCache.once.Do(func() {
		ctx := context.Background()
		if _, err := exec.LookPath("go"); err != nil || sandbox.Probe(ctx).Unavailable() != nil {
			return
		}
		c, err := sandbox.NewCache("")
		if err != nil {
			t.Fatal(err)
		}
		// From the standard library's seed that every test binary of this
		// user shares, as a run seeds its own cache: otherwise the warm-up
		// compiles the standard library again (about 20 CPU seconds) in
		// every run of this package.
		env := proc.ForCommands(os.Environ(), nil)
		seed, err := sandbox.GoStdlibSeed(ctx, testenv.GoStdlibSeeds(), env)
		if err != nil {
			t.Fatal(err)
		}
		if seed != "" {
			if err := c.Seed(seed); err != nil {
				t.Fatal(err)
			}
		}
		mod, err := os.MkdirTemp("", "capstan-warm-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(mod)
		for name, text := range map[string]string{"go.mod": "module example.com/warm\n\ngo 1.21\n",
			"warm_test.go": "package warm\n\nimport \"testing\"\n\nfunc TestWarm(t *testing.T) {}\n"} {
			if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r, err := sandbox.NewCommandRunner(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.WithLimits(sandbox.ValidatorLimits()).WithCache(c).Run(ctx, tool.CommandSpec{Command: "go test ./...", Dir: mod,
			Env: env, Timeout: 10 * time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("warm the shared cache: %v %+v", err, res)
		}
		c.Seal()
		sharedCache.cache = c
	})
	opts.ValidatorCache = sharedCache.cache
	return opts
}

// removeSharedCache removes the shared cache (TestMain, after the tests).
func removeSharedCache() {
	if sharedCache.cache != nil {
		_ = sharedCache.cache.Remove()
	}
}
