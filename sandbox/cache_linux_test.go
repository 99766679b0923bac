//go:build linux

package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
