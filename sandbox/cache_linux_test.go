//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/tool"
)

// TestCacheIsWritableUntilSealed: the commands of a runner with a Cache
// get its variables and write it until it is sealed; after, each gets a
// private copy that it may write and that is gone when it ends, so the
// cache stays as it was sealed. A runner without the cache (the Bash
// tool's) can neither read nor write it. Remove deletes it.
func TestCacheIsWritableUntilSealed(t *testing.T) {
	r := sharedRunner(t)
	cache, err := NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	validators := (&CommandRunner{Runner: r}).WithCache(cache)
	bash := &CommandRunner{Runner: r}
	run := func(c *CommandRunner, command string) tool.CommandResult {
		t.Helper()
		res, err := c.Run(context.Background(), tool.CommandSpec{Command: command, Dir: t.TempDir(), Timeout: 20 * time.Second,
			Env: []string{"PATH=/usr/bin:/bin", "GOCACHE=/elsewhere", "XDG_CACHE_HOME=/elsewhere", "npm_config_cache=/elsewhere"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	goCache := filepath.Join(cache.Dir(), "go-build")
	res := run(validators, `echo "$GOCACHE $XDG_CACHE_HOME $npm_config_cache" && mkdir -p "$GOCACHE/00" && echo warm > "$GOCACHE/00/entry" && mkdir -p "$XDG_CACHE_HOME/pip" && echo warm > "$XDG_CACHE_HOME/pip/entry"`)
	want := goCache + " " + filepath.Join(cache.Dir(), "xdg") + " " + filepath.Join(cache.Dir(), "npm")
	if res.ExitCode != 0 || !strings.HasPrefix(res.Output, want+"\n") {
		t.Fatalf("before Seal the validators' commands get the cache and write it: %+v (want %q)", res, want)
	}
	res = run(bash, "cat "+goCache+"/00/entry; echo planted > "+goCache+"/01/entry")
	if res.ExitCode == 0 || strings.Contains(res.Output, "warm") || !strings.Contains(res.Output, "Permission denied") {
		t.Errorf("a command without the cache reached it: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(goCache, "01", "entry")); err == nil {
		t.Error("a command without the cache wrote it")
	}

	cache.Seal()
	for i := 0; i < 2; i++ { // the second run sees nothing the first planted
		res = run(validators, `echo "$GOCACHE" && cat "$GOCACHE/00/entry" "$XDG_CACHE_HOME/pip/entry" && `+
			`echo planted > "$GOCACHE/00/entry" && mkdir -p "$GOCACHE/01" && echo planted > "$GOCACHE/01/entry" && echo planted > "$XDG_CACHE_HOME/pip/entry" && echo wrote`)
		copied, _, _ := strings.Cut(res.Output, "\n")
		if res.ExitCode != 0 || !strings.HasSuffix(res.Output, "\nwarm\nwarm\nwrote\n") || !strings.HasPrefix(copied, filepath.Dir(cache.Dir())+"/") || copied == goCache {
			t.Fatalf("after Seal a run gets a writable copy of the cache: %+v", res)
		}
		if _, err := os.Stat(copied); !os.IsNotExist(err) {
			t.Errorf("the run's copy of the cache outlived it: %v", err)
		}
	}
	for _, p := range []string{filepath.Join(goCache, "00", "entry"), filepath.Join(cache.Dir(), "xdg", "pip", "entry")} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "warm\n" {
			t.Errorf("%s changed after Seal: %q %v", p, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(goCache, "01", "entry")); err == nil {
		t.Error("a command wrote the sealed cache")
	}
	if entries, _ := os.ReadDir(filepath.Dir(cache.Dir())); len(entries) != 1 {
		t.Errorf("copies of the cache left behind: %v", entries)
	}
	if err := cache.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cache.Dir()); !os.IsNotExist(err) {
		t.Errorf("Remove left the cache: %v", err)
	}
}

// TestWorkDirGoCacheWarmsTheNextRun: the work dir's build cache is kept
// per real path of the work dir: a symlink to it names the same one,
// another work dir another. What a run's baseline compiled (saved with
// SaveGoBuild) warms the next run's cache, so its go test compiles
// nothing of the module again; what the validators wrote after Seal (the
// model's turns) is not in what was saved; and a go test through the
// cache never answers from a cached test result, even without -count=1
// on its command line.
func TestWorkDirGoCacheWarmsTheNextRun(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	ctx := context.Background()
	env := append(proc.ForCommands(os.Environ(), nil), "GOTOOLCHAIN=local", "GOPROXY=off")
	module := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":    "module m\n\ngo 1.21\n",
		"m.go":      "package m\n\nfunc M() int { return 1 }\n",
		"m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestM(t *testing.T) { if M() != 1 { t.Fatal() } }\n",
	} {
		if err := os.WriteFile(filepath.Join(module, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	dir, err := GoWorkDirCache(ctx, root, env, module)
	if err != nil || dir == "" || HasGoBuild(dir) {
		t.Fatalf("GoWorkDirCache: %q, %v (or it exists already)", dir, err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(module, link); err != nil {
		t.Fatal(err)
	}
	if same, err := GoWorkDirCache(ctx, root, env, link); err != nil || same != dir {
		t.Errorf("through a symlink: %q, %v (want %q)", same, err, dir)
	}
	if other, err := GoWorkDirCache(ctx, root, env, t.TempDir()); err != nil || other == dir {
		t.Errorf("another work dir: %q, %v", other, err)
	}
	seed, err := GoStdlibSeed(ctx, testenv.GoStdlibSeeds(), env, module)
	if err != nil || seed == "" {
		t.Fatalf("seed %q: %v", seed, err)
	}
	r := sharedRunner(t)
	goTest := func(c *Cache, args string) string {
		t.Helper()
		res, err := (&CommandRunner{Runner: r}).WithCache(c).Run(ctx, tool.CommandSpec{Command: "go test -x " + args + " ./...", Dir: module,
			Timeout: 5 * time.Minute, Env: env})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("go test: %v %+v", err, res)
		}
		return res.Output
	}
	first, err := NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Seed(seed); err != nil {
		t.Fatal(err)
	}
	if out := goTest(first, ""); !strings.Contains(out, " -p m ") {
		t.Fatalf("the first run did not compile the module:\n%s", out)
	}
	first.Seal()
	if err := first.SaveGoBuild(dir); err != nil || !HasGoBuild(dir) {
		t.Fatalf("SaveGoBuild: %v", err)
	}
	// The model's turn: a validator after Seal writes its copy only.
	res, err := (&CommandRunner{Runner: r}).WithCache(first).Run(ctx, tool.CommandSpec{Command: `mkdir -p "$GOCACHE/ff" && echo planted > "$GOCACHE/ff/planted-a"`,
		Dir: module, Timeout: time.Minute, Env: env})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("plant: %v %+v", err, res)
	}
	if err := first.SaveGoBuild(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ff", "planted-a")); err == nil {
		t.Error("a write after Seal reached the work dir's cache")
	}
	next, err := NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Seed(dir); err != nil {
		t.Fatal(err)
	}
	out := goTest(next, "")
	if strings.Contains(out, " -p m ") || strings.Contains(out, " -p testing ") {
		t.Errorf("the next run compiled again:\n%s", out)
	}
	if strings.Contains(out, "(cached)") || !strings.Contains(out, "ok  \tm\t") {
		t.Errorf("a test result came from the cache:\n%s", out)
	}
}

// A module with a dependency builds and tests in the sandbox from the
// user's module cache, which commands read but cannot write; without it
// the sandbox (no network) could not get the dependency.
func TestGoModuleCacheIsReadOnlyInTheSandbox(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	out, err := testenv.GoCommand("env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	modCache := strings.TrimSpace(string(out))
	sum, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	var sysSum []string
	for _, line := range strings.Split(string(sum), "\n") {
		if strings.HasPrefix(line, "golang.org/x/sys v0.49.0") {
			sysSum = append(sysSum, line)
		}
	}
	if _, err := os.Stat(filepath.Join(modCache, "golang.org", "x", "sys@v0.49.0")); err != nil || len(sysSum) != 2 {
		t.Fatalf("golang.org/x/sys v0.49.0 (a dependency of capstan) is not in the module cache %s (run go mod download): %v", modCache, err)
	}
	module := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":    "module m\n\ngo 1.26.0\n\nrequire golang.org/x/sys v0.49.0\n",
		"go.sum":    strings.Join(sysSum, "\n") + "\n",
		"m.go":      "package m\n\nimport \"golang.org/x/sys/unix\"\n\nfunc M() int { return unix.Getpid() }\n",
		"m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestM(t *testing.T) { if M() <= 0 { t.Fatal() } }\n",
	} {
		if err := os.WriteFile(filepath.Join(module, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(proc.ForCommands(os.Environ(), nil), "GOTOOLCHAIN=local", "GOMODCACHE="+modCache)
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	if seed, err := GoStdlibSeed(ctx, testenv.GoStdlibSeeds(), env, module); err != nil || c.Seed(seed) != nil {
		t.Fatalf("seed: %v", err)
	}
	run := func(command string) tool.CommandResult {
		t.Helper()
		res, err := (&CommandRunner{Runner: sharedRunner(t)}).WithCache(c).Run(ctx, tool.CommandSpec{Command: command, Dir: module,
			Timeout: 5 * time.Minute, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run("go test -count=1 ./..."); res.ExitCode != 0 {
		t.Fatalf("go test of a module with a dependency: %+v", res)
	}
	marker := filepath.Join(modCache, "golang.org", "x", "sys@v0.49.0", "capstan-planted")
	if res := run("touch " + marker + "; echo touched=$?"); !strings.Contains(res.Output, "touched=1") {
		t.Errorf("a command could write the module cache: %s", res.Output)
	}
	if _, err := os.Stat(marker); err == nil {
		os.Remove(marker)
		t.Fatal("a command planted a file in the module cache")
	}
}

// TestSealedCacheCopyOfARun: a run's private copy of a sealed cache is an
// overlay on the sealed cache where the helper has a mount namespace and
// the kernel mounts one there (nothing is copied), and a copy of it
// everywhere else (here: placed by a process that is not the PID 1 of a
// namespace of its own). Either way the run reads what was sealed and
// its writes never reach the sealed cache (TestCacheIsWritableUntilSealed
// runs both through the sandbox).
func TestSealedCacheCopyOfARun(t *testing.T) {
	cache, err := NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(cache.Dir(), "go-build", "00", "entry")
	if err := os.MkdirAll(filepath.Dir(entry), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry, []byte("warm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cache.Seal()

	// The fallback: copied.
	l, err := cache.newLayer()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.place(); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(l.Merged, "go-build", "00", "entry")
	if b, err := os.ReadFile(copied); err != nil || string(b) != "warm\n" {
		t.Fatalf("the copy of the sealed cache: %q %v", b, err)
	}
	if err := os.WriteFile(copied, []byte("planted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(entry); string(b) != "warm\n" {
		t.Fatalf("a write to the copy reached the sealed cache: %q", b)
	}
	if err := removeTree(l.Root); err != nil {
		t.Fatal(err)
	}

	// Through the sandbox: an overlay where the machine allows.
	r := sharedRunner(t)
	res, err := (&CommandRunner{Runner: r}).WithCache(cache).Run(context.Background(), tool.CommandSpec{
		Command: `cat "$GOCACHE/00/entry" && grep -c " $(dirname "$GOCACHE") .* - overlay " /proc/self/mountinfo || true`,
		Dir:     t.TempDir(), Timeout: 20 * time.Second, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil || !strings.HasPrefix(res.Output, "warm\n") {
		t.Fatalf("%+v %v", res, err)
	}
	if strings.HasSuffix(res.Output, "\n1\n") {
		t.Log("the run's copy of the sealed cache is an overlay")
	} else {
		t.Logf("the run's copy of the sealed cache is copied (no overlay on this machine): %q", res.Output)
	}
}

// TestPythonBytecodeOfTheBaselineServesLaterRuns: a validator's Python
// writes its bytecode into the cache (not the work dir, even when its
// environment says PYTHONDONTWRITEBYTECODE=1, as capstan's own validators'
// does); DropBytecodeUnder keeps what was compiled for modules outside the
// work dir and drops the work dir's own, so a sealed run reuses the
// standard library's bytecode and compiles the work dir's modules from
// their source.
func TestPythonBytecodeOfTheBaselineServesLaterRuns(t *testing.T) {
	needPython(t)
	r := sharedRunner(t)
	cache, err := NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	validators := (&CommandRunner{Runner: r}).WithCache(cache)
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "calc.py"), []byte("import json\nX = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(command string) tool.CommandResult {
		t.Helper()
		res, err := validators.Run(context.Background(), tool.CommandSpec{Command: command, Dir: wd, Timeout: 30 * time.Second,
			Env: []string{"PATH=/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(`python3 -S -c 'import calc; print(calc.X)'`); res.ExitCode != 0 || res.Output != "1\n" {
		t.Fatalf("baseline: %+v", res)
	}
	pyc := func(under string) []string {
		var found []string
		_ = filepath.WalkDir(filepath.Join(cache.Dir(), "pycache", under), func(p string, e os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".pyc") {
				found = append(found, p)
			}
			return nil
		})
		return found
	}
	if len(pyc(wd)) == 0 || len(pyc("")) <= len(pyc(wd)) {
		t.Fatalf("the baseline wrote no bytecode into the cache: work dir %v, in all %d", pyc(wd), len(pyc("")))
	}
	if entries, _ := os.ReadDir(wd); len(entries) != 1 {
		t.Errorf("bytecode reached the work dir: %v", entries)
	}
	if err := cache.DropBytecodeUnder(wd); err != nil {
		t.Fatal(err)
	}
	if got := pyc(wd); len(got) != 0 {
		t.Errorf("the work dir's bytecode was kept: %v", got)
	}
	stdlib := len(pyc(""))
	if stdlib == 0 {
		t.Fatal("DropBytecodeUnder removed the other modules' bytecode")
	}
	cache.Seal()
	// Same size, same second: only the source can tell the new X.
	if err := os.WriteFile(filepath.Join(wd, "calc.py"), []byte("import json\nX = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := run(`python3 -S -c 'import calc; print(calc.X)'`); res.ExitCode != 0 || res.Output != "2\n" {
		t.Errorf("a sealed run after the edit: %+v", res)
	}
	if len(pyc("")) != stdlib {
		t.Errorf("a sealed run changed the cache's bytecode: %d files, was %d", len(pyc("")), stdlib)
	}
}
