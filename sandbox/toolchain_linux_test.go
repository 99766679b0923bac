//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/tool"
)

// needGoInSandbox returns the directory of the go command when the
// sandbox can read it; else it skips (fails under CI).
func needGoInSandbox(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err == nil && under(p, defaultSystemPaths) {
		return filepath.Dir(p)
	}
	msg := fmt.Sprintf("go (%s %v) is not in a directory the sandbox can read (%s)", p, err, strings.Join(defaultSystemPaths[:6], " "))
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// memoryCgroupError is why runs get no memory cgroup here, nil when they
// do.
func memoryCgroupError() error {
	cg, err := newMemoryCgroup(1<<30, nil)
	if err == nil {
		cg.remove()
	}
	return err
}

// withoutMemoryCgroup makes the runs of the test find no memory cgroup,
// as on a machine without one.
func withoutMemoryCgroup(t *testing.T) {
	v1, v2 := cgroupV1MemoryRoot, cgroupV2Roots
	cgroupV1MemoryRoot, cgroupV2Roots = "/nonexistent", []string{"/nonexistent"}
	t.Cleanup(func() { cgroupV1MemoryRoot, cgroupV2Roots = v1, v2 })
}

// TestBashBuildsAndTestsGo: a Bash command in the sandbox, under the
// Bash tool's limits, builds and tests a Go module — with the race
// detector too when a C compiler is there, which reserves far more
// address space than any address-space limit allows, so it works where
// a memory cgroup bounds the run instead.
func TestBashBuildsAndTestsGo(t *testing.T) {
	r := sharedRunner(t)
	goDir := needGoInSandbox(t)
	if testing.Short() {
		t.Skip("compiles the standard library in a fresh build cache; not with -short")
	}
	work := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.21\n",
		"calc.go":      "// Package calc adds.\npackage calc\n\nimport \"fmt\"\n\n// Add returns a+b in decimal.\nfunc Add(a, b int) string { return fmt.Sprint(a + b) }\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != \"5\" {\n\t\tt.Fatal(\"Add\")\n\t}\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	command := "go build ./... && go test -v ./..."
	_, gccErr := exec.LookPath("gcc")
	cgErr := memoryCgroupError()
	race := gccErr == nil && cgErr == nil
	if race {
		command += " && CGO_ENABLED=1 go test -race -v ./..."
	} else {
		t.Logf("not testing -race: C compiler %v, memory cgroup %v", gccErr, cgErr)
	}
	c := &CommandRunner{Runner: r}
	// A generous timeout: on a loaded 2-core machine compiling the
	// standard library twice (once with -race) in a fresh cache took more
	// than 5 minutes. The test asserts how the command ended, not how
	// long it took.
	res, err := c.Run(context.Background(), tool.CommandSpec{Command: command, Dir: work, Timeout: 25 * time.Minute,
		Env: []string{"PATH=" + goDir + ":/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	want := 1
	if race {
		want = 2
	}
	if res.ExitCode != 0 || strings.Count(res.Output, "--- PASS: TestAdd") != want {
		t.Fatalf("go build and go test in sandboxed Bash: %+v", res)
	}
}

// TestEndlessAllocationIsStopped: a program that allocates without end
// under the Bash tool's limits (no address-space limit set) ends as
// memory_limit, bounded by the memory cgroup where there is one, and by
// the address-space limit and the resident-memory watchdog where not.
func TestEndlessAllocationIsStopped(t *testing.T) {
	r := sharedRunner(t)
	needPython(t)
	for _, c := range []struct {
		name  string
		setup func(*testing.T)
	}{{"as-found", func(*testing.T) {}}, {"no-memory-cgroup", withoutMemoryCgroup}} {
		t.Run(c.name, func(t *testing.T) {
			c.setup(t)
			t.Logf("memory cgroup: %v", memoryCgroupError())
			res, err := r.Run(context.Background(), Spec{
				Argv:    []string{"python3", "-c", "a = []\nwhile True:\n    a.append(b'x' * (20 << 20))\n"},
				Dir:     t.TempDir(),
				Timeout: 60 * time.Second,
				Limits:  Limits{MemoryMB: 300},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StatusMemoryLimit {
				t.Fatalf("status %s reason %q stderr %q", res.Status, res.Reason, res.Stderr)
			}
		})
	}
}

// TestBashCommandRunsABuildsProcesses: a Bash command may run more
// processes than a skill script (a build runs a compiler per core, each
// with threads), and is still stopped past its limit.
func TestBashCommandRunsABuildsProcesses(t *testing.T) {
	c := &CommandRunner{Runner: sharedRunner(t)}
	// Each process sleeps long enough that all n are alive at once even
	// when forking them is slow (a loaded machine): with a short sleep the
	// first ones ended before the last started and 400 never passed the
	// limit, a verdict that changed under load.
	run := func(n, sleep int) tool.CommandResult {
		t.Helper()
		res, err := c.Run(context.Background(), tool.CommandSpec{Dir: t.TempDir(), Timeout: 5 * time.Minute, Env: []string{"PATH=/usr/bin:/bin"},
			Command: fmt.Sprintf("for i in $(seq %d); do sleep %d & done; wait; echo all-done", n, sleep)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(150, 3); res.ExitCode != 0 || !strings.Contains(res.Output, "all-done") {
		t.Errorf("150 processes: %+v", res)
	}
	if res := run(400, 240); res.ExitCode == 0 || !strings.Contains(res.Output, "grew past 256 processes") {
		t.Errorf("400 processes: %+v", res)
	}
}
