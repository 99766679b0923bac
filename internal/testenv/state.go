package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/journal"
)

// Run sets journal.EnvStateDir to a new temporary directory,
// XDG_CONFIG_HOME to an empty one, XDG_CACHE_HOME to another and git's
// global configuration with Git (all inherited by subprocesses the tests
// start), runs the tests and removes the directories; it returns m.Run's
// exit code. Call it from TestMain: os.Exit(Run(m)).
//
// The Go standard library's build cache seed (capstan/go-stdlib in the
// cache directory) is the one thing test binaries share: it is the same
// for every test and costs tens of CPU seconds to build, so it lives in
// the system's temporary directory, one per user, and is kept.
func Run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "capstan-state-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	state, cfg, cache := filepath.Join(dir, "state"), filepath.Join(dir, "config"), filepath.Join(dir, "cache")
	for _, d := range []string{state, cfg, cache, filepath.Join(cache, "capstan")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			panic(err)
		}
	}
	seeds := GoStdlibSeeds()
	if err := os.MkdirAll(seeds, 0o700); err != nil {
		panic(err)
	}
	if err := os.Symlink(seeds, filepath.Join(cache, "capstan", "go-stdlib")); err != nil {
		panic(err)
	}
	if os.Getenv(envGoCache) == "" {
		// Before XDG_CACHE_HOME moves, which moves go's default cache.
		if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
			os.Setenv(envGoCache, strings.TrimSpace(string(out)))
		}
	}
	os.Setenv(journal.EnvStateDir, state)
	os.Setenv("XDG_CONFIG_HOME", cfg)
	os.Setenv("XDG_CACHE_HOME", cache)
	if err := IsolateGitConfig(dir); err != nil {
		panic(err)
	}
	return m.Run()
}

// envGoCache names the go build cache the tests' own go commands use:
// the one the test binary was started with, set by Run before it moves
// XDG_CACHE_HOME (and inherited by the processes the tests start).
const envGoCache = "CAPSTAN_TEST_GOCACHE"

// GoCommand is the go command with args for a test that builds a helper
// program (a stdio MCP server, a fake CLI): it uses the build cache the
// test binary was built with, not the empty one under the temporary
// XDG_CACHE_HOME that Run sets, so the helper's dependencies are not
// compiled again in every test binary.
func GoCommand(args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	if dir := os.Getenv(envGoCache); dir != "" {
		cmd.Env = append(os.Environ(), "GOCACHE="+dir)
	}
	return cmd
}

// IsolateGitConfig gives git, for this process and the subprocesses it starts, a
// global configuration of its own — dir/gitconfig, with an author and
// committer identity and no commit signing — in place of ~/.gitconfig and
// the system's, so a test that commits needs no identity of the machine
// and a developer's settings (signing, hooks) cannot
// change its verdict. A test's own "git -c user.name=…" or repository
// config still wins. Call it from TestMain (Run calls it).
func IsolateGitConfig(dir string) error {
	file := filepath.Join(dir, "gitconfig")
	conf := "[user]\n\tname = capstan test\n\temail = test@capstan.invalid\n[commit]\n\tgpgsign = false\n"
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		return err
	}
	os.Setenv("GIT_CONFIG_GLOBAL", file)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	return nil
}

// GoStdlibSeeds is the directory where the test binaries of this user keep
// the Go standard library's build cache seeds (see Run).
func GoStdlibSeeds() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("capstan-test-go-stdlib-%d", os.Getuid()))
}
