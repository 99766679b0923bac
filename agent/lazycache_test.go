package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// lazyCacheAgent is a sandboxed agent whose script model makes the
// given turns (YAML list items under turns:), with a one-iteration
// budget and no validators.
func lazyCacheAgent(t *testing.T, turns string) string {
	t.Helper()
	return writeAgent(t, map[string]string{
		"agent.json": `{
  "version": "1.0.0", "name": "lazy", "description": "builds its caches when a command needs one",
  "runner": {
    "model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"},
    "budgets": {"maxIterations": 1}
  }
}`,
		"steps_registry.json": `{"agentId": "lazy", "c1": "steps", "entryStep": "initial.work",
  "steps": {"initial.work": {"stepId": "initial.work", "c2": "initial", "c3": "work"}}}`,
		"prompts/steps/initial/work/f_default.md": "Work.",
		"script.yaml": "turns:\n" + turns,
	})
}

// buildCaches lists the build caches (capstan-cache-*) in dir.
func buildCaches(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "capstan-cache-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runUntilStop builds, starts and runs the agent in dir, calls during
// before Stop (while the agent holds what it made), and returns the
// result of Stop.
func runUntilStop(t *testing.T, dir, work string, during func()) *event.RunResult {
	t.Helper()
	ctx := context.Background()
	a, err := Build(ctx, load(t, dir), BuildOptions{WorkDir: work, Store: journal.Store{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_ = a.Run(ctx)
	during()
	return a.Stop()
}

// TestSandboxedRunWithoutCommandsMakesNoBuildCache: a sandboxed run
// whose model runs no command makes neither the Bash tool's build cache
// nor the validators'; its first Bash command makes the Bash tool's, and
// only that one; the run removes it when it ends.
func TestSandboxedRunWithoutCommandsMakesNoBuildCache(t *testing.T) {
	needSandbox(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	res := runUntilStop(t, lazyCacheAgent(t, "  - text: \"Nothing to run. DONE\"\n"), t.TempDir(), func() {
		if got := buildCaches(t, tmp); len(got) != 0 {
			t.Errorf("a run that ran no command made build caches: %v", got)
		}
	})
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}

	work := t.TempDir()
	res = runUntilStop(t, lazyCacheAgent(t, `  - tool_calls:
      - name: Bash
        input: {command: 'echo "$GOCACHE" > where.txt'}
  - text: "Ran it. DONE"
`), work, func() {
		got := buildCaches(t, tmp)
		where, err := os.ReadFile(filepath.Join(work, "where.txt"))
		if err != nil || len(got) != 1 || !strings.HasPrefix(string(where), got[0]+string(filepath.Separator)) {
			t.Errorf("the first Bash command must make the Bash tool's cache, and only it: caches %v, its GOCACHE %q %v", got, where, err)
		}
	})
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	if got := buildCaches(t, tmp); len(got) != 0 {
		t.Errorf("the run left its build cache: %v", got)
	}
}

// TestBuildCacheThatCannotBeMadeEndsTheRun: when the Bash tool's build
// cache cannot be made by its first command (the temporary directory
// went away after the agent was built), the command does not run and
// the run ends with SANDBOX_SETUP before the model's next turn, as a
// cache that could not be made when the agent was built ended it.
func TestBuildCacheThatCannotBeMadeEndsTheRun(t *testing.T) {
	needSandbox(t)
	tmp := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	dir := lazyCacheAgent(t, `  - tool_calls:
      - name: Bash
        input: {command: 'touch ran.txt'}
  - text: "Ran it. DONE"
`)
	ctx := context.Background()
	work := t.TempDir()
	a, err := Build(ctx, load(t, dir), BuildOptions{WorkDir: work, Store: journal.Store{Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	_ = a.Run(ctx)
	res := a.Stop()
	if res.Success || res.CompletionReason != ReasonError || !errors.Is(res.Err(), agenterr.ErrSandboxSetup) ||
		!strings.Contains(res.Error.Message, "build cache") {
		t.Fatalf("want the run ended by SANDBOX_SETUP: %+v %+v", res, res.Error)
	}
	if _, err := os.Stat(filepath.Join(work, "ran.txt")); err == nil {
		t.Error("the command ran without its build cache")
	}
}

// TestMissingTemporaryDirectoryFailsTheBuild: the temporary directory
// the build caches go in is checked when the agent is built, as when
// they were made then: SANDBOX_SETUP before the model is asked.
func TestMissingTemporaryDirectoryFailsTheBuild(t *testing.T) {
	needSandbox(t)
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	_, err := Build(context.Background(), load(t, lazyCacheAgent(t, "  - text: \"DONE\"\n")),
		BuildOptions{WorkDir: t.TempDir(), Store: journal.Store{Dir: t.TempDir()}})
	if !errors.Is(err, agenterr.ErrSandboxSetup) {
		t.Fatalf("Build with a missing TMPDIR: %v, want SANDBOX_SETUP", err)
	}
}
