package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/proc"
)

// The standard library's part of Go's build cache is the same for every
// repository: compiling the packages behind "testing" (and go vet's view
// of them) takes tens of CPU seconds on an empty cache, which every new
// run's test baseline would pay again. GoStdlibSeed builds that part once
// per toolchain, from no repository's code, and [Cache.Seed] copies it
// into a run's cache. The seed is never handed to a command: a run gets a
// copy, so nothing a validator or the model runs can change what the next
// run starts from.

// seedBuildPrefix names the directories under the seeds' root in which a
// seed is built before it is renamed into place.
const seedBuildPrefix = "build-"

// seedEnvKeys are the go env settings that change the standard library's
// build actions; the seed is kept per distinct combination.
var seedEnvKeys = []string{"GOVERSION", "GOOS", "GOARCH", "GOFLAGS", "GOEXPERIMENT", "CGO_ENABLED", "GOAMD64", "GOARM64", "CC", "CGO_CFLAGS"}

// GoStdlibSeed returns a directory holding Go's build cache for the
// standard library packages a test binary and its vet check need, building
// it under root on first use (root is created if missing). environ is the
// environment the validators' commands get; workDirs are the directories
// the model can write, where no go binary may be taken from. It returns ""
// and no error when there is no go on the path of environ.
func GoStdlibSeed(ctx context.Context, root string, environ []string, workDirs ...string) (string, error) {
	goBin, env, key, err := goToolchain(ctx, environ, workDirs)
	if goBin == "" || err != nil {
		return "", err
	}
	dir := filepath.Join(root, key)
	if _, err := os.Stat(filepath.Join(dir, "README")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("create the go build cache seed: %w", err)
	}
	removeStaleSeedBuilds(root)
	work, err := os.MkdirTemp(root, seedBuildPrefix)
	if err != nil {
		return "", fmt.Errorf("create the go build cache seed: %w", err)
	}
	defer removeTree(work)
	if err := markOwned(work); err != nil {
		return "", fmt.Errorf("create the go build cache seed: %w", err)
	}
	if err := buildSeed(ctx, goBin, env, work); err != nil {
		return "", err
	}
	// Another capstan may have finished the same seed meanwhile: either
	// copy is the same, so losing the rename is not an error.
	if err := os.Rename(filepath.Join(work, "cache"), dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "README")); statErr != nil {
			return "", fmt.Errorf("store the go build cache seed: %w", err)
		}
	}
	return dir, nil
}

// goToolchain finds the go binary on the PATH of environ (never in
// workDirs) and returns it, environ without the cache variables, and a
// key naming the toolchain and the settings that change build actions.
// goBin is "" (and err nil) when there is no go.
func goToolchain(ctx context.Context, environ, workDirs []string) (goBin string, env []string, key string, err error) {
	goBin, err = proc.LookPath("go", pathValue(environ), workDirs...)
	if err != nil {
		if proc.IsProgramNotFound(err) {
			return "", nil, "", nil
		}
		return "", nil, "", err
	}
	env = seedEnv(environ)
	cmd := exec.CommandContext(ctx, goBin, append([]string{"env"}, seedEnvKeys...)...)
	cmd.Env, cmd.Dir = env, os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		return "", nil, "", fmt.Errorf("read the go toolchain's settings: %w", err)
	}
	sum := sha256.Sum256(out)
	return goBin, env, hex.EncodeToString(sum[:8]), nil
}

// GoWorkDirCache returns the directory under root that keeps the Go
// build cache of the work dir wd from one run to the next: one per real
// path of wd and toolchain (as [GoStdlibSeed] tells toolchains apart).
// It returns "" and no error when there is no go on the path of environ.
// The directory may not exist yet; [Cache.SaveGoBuild] writes it and
// [Cache.Seed] copies it into a new run's cache.
func GoWorkDirCache(ctx context.Context, root string, environ []string, wd string) (string, error) {
	real, err := filepath.EvalSymlinks(wd)
	if err != nil {
		return "", fmt.Errorf("the work dir's Go build cache: %w", err)
	}
	goBin, _, key, err := goToolchain(ctx, environ, []string{real})
	if goBin == "" || err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(real))
	return filepath.Join(root, filepath.Base(real)+"-"+hex.EncodeToString(sum[:6])+"-"+key), nil
}

// HasGoBuild reports whether dir holds a Go build cache (its README).
func HasGoBuild(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "README"))
	return err == nil && fi.Mode().IsRegular()
}

// SaveGoBuild replaces dst with a copy of the cache's Go build cache. It
// must be called only once no command writes the cache any more (it is
// sealed and the runs before the seal have ended): the copy's files are
// hard links to the cache's where the file system allows, so saving costs
// no copying, and [Cache.Seed] later copies them, never links. The copy is
// written beside dst and renamed into place, so a run that starts
// meanwhile seeds from the old cache or the new one, never from half of
// one. A lazy cache that no command made (see [NewLazyCache]) holds
// nothing to save: dst is left as it is.
func (c *Cache) SaveGoBuild(dst string) error {
	fail := func(err error) error {
		return agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "save the work dir's Go build cache")
	}
	src := c.Dir()
	if src == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fail(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), filepath.Base(dst)+".new-")
	if err != nil {
		return fail(err)
	}
	defer removeTree(tmp)
	if err := linkTree(filepath.Join(src, "go-build"), tmp); err != nil {
		return fail(err)
	}
	old := tmp + ".old"
	if err := os.Rename(dst, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fail(err)
	}
	_ = removeTree(old)
	return nil
}

// buildSeed compiles and vets an empty test package in work/module, with
// the build cache in work/cache.
func buildSeed(ctx context.Context, goBin string, env []string, work string) error {
	module, cache := filepath.Join(work, "module"), filepath.Join(work, "cache")
	files := map[string]string{
		"go.mod":       "module capstanseed\n\ngo 1.21\n",
		"seed_test.go": "package capstanseed\n\nimport \"testing\"\n\nfunc TestSeed(t *testing.T) {}\n",
	}
	if err := os.MkdirAll(module, 0o700); err != nil {
		return fmt.Errorf("create the go build cache seed: %w", err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(module, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("create the go build cache seed: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "./...")
	endsWithCapstan(cmd) // a killed run leaves no build of the seed going on
	cmd.Dir = module
	cmd.Env = append(env, "GOCACHE="+cache, "GOTOOLCHAIN=local", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the go build cache seed: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if _, err := os.Stat(filepath.Join(cache, "README")); err != nil {
		return errors.New("build the go build cache seed: go wrote no build cache")
	}
	return nil
}

// seedEnv is environ without the variables a Cache sets, so the seed's go
// commands see the toolchain settings the validators see.
func seedEnv(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !isCacheVar(kv) {
			env = append(env, kv)
		}
	}
	return env
}

// pathValue is the PATH of environ.
func pathValue(environ []string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], "PATH="); ok {
			return v
		}
	}
	return ""
}

// Seed copies the files of a seed made by [GoStdlibSeed] into the cache's
// Go build cache. It must be called before the cache's first run: on a
// lazy cache, by the prepare function of [NewLazyCache].
func (c *Cache) Seed(seed string) error {
	dir := c.Dir()
	if dir == "" {
		return agenterr.New(agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "seed the validators' build cache: it has no directory yet")
	}
	if err := copyTree(seed, filepath.Join(dir, "go-build")); err != nil {
		return agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "seed the validators' build cache")
	}
	return nil
}
