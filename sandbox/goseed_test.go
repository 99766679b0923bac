package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/proc"
)

// TestGoStdlibSeedWarmsANewCache: a cache seeded from GoStdlibSeed runs a
// Go test binary without compiling the testing package, the seed is found
// again rather than rebuilt, and writing the seeded cache leaves the seed
// as it was (a run gets a copy, never the seed itself).
func TestGoStdlibSeedWarmsANewCache(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	ctx := context.Background()
	env := proc.ForCommands(os.Environ(), nil)
	seed, err := GoStdlibSeed(ctx, testenv.GoStdlibSeeds(), env, t.TempDir())
	if err != nil || seed == "" {
		t.Fatalf("seed %q: %v", seed, err)
	}
	if again, err := GoStdlibSeed(ctx, testenv.GoStdlibSeeds(), env, t.TempDir()); err != nil || again != seed {
		t.Fatalf("second call: %q, %v (want %q)", again, err, seed)
	}
	cache, err := NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.Seed(seed); err != nil {
		t.Fatal(err)
	}
	module := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":    "module m\n\ngo 1.21\n",
		"m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestM(t *testing.T) {}\n",
	} {
		if err := os.WriteFile(filepath.Join(module, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-x", "-count=1", "./...")
	cmd.Dir = module
	cmd.Env = append(seedEnv(env), "GOCACHE="+filepath.Join(cache.Dir(), "go-build"), "GOTOOLCHAIN=local", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	if strings.Contains(string(out), " -p testing ") || strings.Contains(string(out), " -p fmt ") {
		t.Fatalf("the seeded cache compiled the standard library again:\n%s", out)
	}
	// Write every file of the copy; the seed must not change.
	var seedFile, copyFile string
	_ = filepath.WalkDir(seed, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() && seedFile == "" && strings.HasSuffix(p, "-d") {
			seedFile = p
		}
		return nil
	})
	if seedFile == "" {
		t.Fatal("the seed holds no cache entry")
	}
	rel, _ := filepath.Rel(seed, seedFile)
	copyFile = filepath.Join(cache.Dir(), "go-build", rel)
	before, _ := os.ReadFile(seedFile)
	if err := os.WriteFile(copyFile, []byte("planted"), 0o600); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(seedFile); string(after) != string(before) {
		t.Fatal("writing the seeded cache changed the seed")
	}
}

// TestGoStdlibSeedRefusesAGoInTheWorkDir: the seed is built only by a go
// found outside the work dir.
func TestGoStdlibSeedRefusesAGoInTheWorkDir(t *testing.T) {
	wd := t.TempDir()
	bin := filepath.Join(wd, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\necho planted\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := GoStdlibSeed(context.Background(), t.TempDir(), []string{"PATH=" + bin + ":/usr/bin:/bin"}, wd)
	var e *agenterr.Error
	if !errors.As(err, &e) || e.Code != agenterr.CodeDependencyResolution {
		t.Fatalf("err %v, want DEPENDENCY_RESOLUTION", err)
	}
}
