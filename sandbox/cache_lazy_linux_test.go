//go:build linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// cacheDirs lists the build caches (capstan-cache-*) in parent.
func cacheDirs(t *testing.T, parent string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(parent, "capstan-cache-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLazyCacheIsMadeOnceByItsFirstCommands: a lazy cache has no
// directory until a command runs with it; two commands that start at
// the same time make one, prepared (seeded) once before either runs, and
// both see what the preparation put there. Remove deletes it.
func TestLazyCacheIsMadeOnceByItsFirstCommands(t *testing.T) {
	r := sharedRunner(t)
	parent := t.TempDir()
	var prepared atomic.Int32
	cache := NewLazyCache(parent, func(_ context.Context, c *Cache) {
		prepared.Add(1)
		// A slow preparation: the second command must wait for it.
		time.Sleep(50 * time.Millisecond)
		if err := os.WriteFile(filepath.Join(c.Dir(), "go-build", "seeded"), []byte("seed\n"), 0o600); err != nil {
			t.Error(err)
		}
	})
	if got := cacheDirs(t, parent); len(got) != 0 || cache.Dir() != "" || cache.Err() != nil {
		t.Fatalf("a lazy cache made a directory before any command: %v %q %v", got, cache.Dir(), cache.Err())
	}
	runner := (&CommandRunner{Runner: r}).WithCache(cache)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := runner.Run(context.Background(), tool.CommandSpec{Command: `cat "$GOCACHE/seeded"`, Dir: t.TempDir(),
				Timeout: 20 * time.Second, Env: []string{"PATH=/usr/bin:/bin"}})
			outs[i], errs[i] = res.Output, err
		}()
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil || outs[i] != "seed\n" {
			t.Errorf("command %d: %q %v, want the prepared cache's file", i, outs[i], errs[i])
		}
	}
	if got := cacheDirs(t, parent); len(got) != 1 || got[0] != cache.Dir() || prepared.Load() != 1 {
		t.Fatalf("two first commands made caches %v (Dir %q), prepared %d times; want one, prepared once", got, cache.Dir(), prepared.Load())
	}
	if err := cache.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := cacheDirs(t, parent); len(got) != 0 {
		t.Errorf("Remove left %v", got)
	}
}

// TestLazyCacheSetupFailsOnFirstUse: a cache whose directory cannot be
// made fails its first command, and every later one, with SANDBOX_SETUP,
// before the command runs; Err reports it. A lazy cache removed before
// any command made it never makes one.
func TestLazyCacheSetupFailsOnFirstUse(t *testing.T) {
	r := sharedRunner(t)
	parent := filepath.Join(t.TempDir(), "gone")
	cache := NewLazyCache(parent, func(context.Context, *Cache) { t.Error("prepared a cache that was not made") })
	runner := (&CommandRunner{Runner: r}).WithCache(cache)
	marker := filepath.Join(t.TempDir(), "ran")
	for range 2 {
		_, err := runner.Run(context.Background(), tool.CommandSpec{Command: "touch " + marker, Dir: t.TempDir(), Timeout: 20 * time.Second,
			Env: []string{"PATH=/usr/bin:/bin"}})
		if !errors.Is(err, agenterr.ErrSandboxSetup) || !strings.Contains(err.Error(), "build cache") {
			t.Fatalf("a command with a cache that cannot be made: %v, want SANDBOX_SETUP", err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without its cache")
	}
	if err := cache.Err(); !errors.Is(err, agenterr.ErrSandboxSetup) {
		t.Errorf("Err = %v, want SANDBOX_SETUP", err)
	}

	other := t.TempDir()
	removed := NewLazyCache(other, nil)
	if err := removed.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := removed.Create(context.Background()); !errors.Is(err, agenterr.ErrSandboxSetup) {
		t.Errorf("Create after Remove: %v, want SANDBOX_SETUP", err)
	}
	if got := cacheDirs(t, other); len(got) != 0 {
		t.Errorf("a removed cache made %v", got)
	}
}

// TestLazyCacheSealedBeforeItsFirstCommand: a lazy cache sealed before
// any command made it (a test baseline that ran nothing) gives its first
// command a private copy, like any sealed cache, and saves nothing.
func TestLazyCacheSealedBeforeItsFirstCommand(t *testing.T) {
	r := sharedRunner(t)
	parent := t.TempDir()
	cache := NewLazyCache(parent, nil)
	cache.Seal()
	dst := filepath.Join(t.TempDir(), "saved")
	if err := cache.SaveGoBuild(dst); err != nil || cacheDirs(t, parent) != nil {
		t.Fatalf("SaveGoBuild of a cache no command made: %v, caches %v", err, cacheDirs(t, parent))
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("SaveGoBuild of a cache no command made wrote %s: %v", dst, err)
	}
	runner := (&CommandRunner{Runner: r}).WithCache(cache)
	res, err := runner.Run(context.Background(), tool.CommandSpec{Command: `echo "$GOCACHE" && echo x > "$GOCACHE/planted"`, Dir: t.TempDir(),
		Timeout: 20 * time.Second, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil || res.ExitCode != 0 || strings.HasPrefix(res.Output, cache.Dir()+"/") {
		t.Fatalf("first command of a sealed lazy cache: %+v %v, want a private copy", res, err)
	}
	if _, err := os.Stat(filepath.Join(cache.Dir(), "go-build", "planted")); err == nil {
		t.Error("a command wrote the sealed cache")
	}
	_ = cache.Remove()
}
