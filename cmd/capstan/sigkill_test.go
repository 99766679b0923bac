package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// processesRunning returns the pids of the processes whose command line
// is argv.
func processesRunning(argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == want {
			out = append(out, pid)
		}
	}
	return out
}

// SIGKILL of capstan while the model's Bash command or a validator runs
// leaves none of the command's processes behind — neither the command nor
// what it started in the background, in its group or in a session of its
// own — sandboxed and with --no-sandbox.
func TestKilledCapstanLeavesNoToolProcess(t *testing.T) {
	for _, c := range []struct {
		name    string
		sandbox bool
		what    string // bash or validator
	}{
		{"bash sandboxed", true, "bash"}, {"bash no-sandbox", false, "bash"},
		{"validator sandboxed", true, "validator"}, {"validator no-sandbox", false, "validator"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.sandbox {
				needSandbox(t)
			}
			// A duration no other process uses: the processes to look for.
			secs := fmt.Sprintf("%d.%03d", 3000+rand.IntN(5000), rand.IntN(1000))
			lingering := "sh -c 'sleep " + secs + " & setsid sleep " + secs + " & sleep " + secs + "'"
			var args []string
			if c.what == "bash" {
				dir := writeFiles(t, map[string]string{
					"agent.json": `{"version": "1.0.0", "name": "lingers", "description": "starts a long command",
  "runner": {"model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"}}}`,
					"steps_registry.json":                  `{"agentId": "lingers", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
					"prompts/steps/work/main/f_default.md": "Work.",
					"script.yaml":                          "turns:\n  - tool_calls: [{name: Bash, input: {command: " + strconv.Quote(lingering) + "}}]\n  - text: \"ALL_DONE\"\n",
				})
				args = []string{"run", dir, "--workdir", t.TempDir(), "--quiet"}
			} else {
				repo, _ := fixRepo(t, "pytest")
				script := filepath.Join(t.TempDir(), "script.yaml")
				if err := os.WriteFile(script, []byte("turns:\n  - structured: {status: completed, summary: done, next_action: {action: complete, reason: done}}\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				args = []string{"fix", "x", "--workdir", repo, "--check", "tests=test -d .", "--check", "slow=" + lingering, "--model", "script:" + script, "--quiet"}
			}
			if !c.sandbox {
				args = append(args, "--no-sandbox")
			}
			cmd := cliCommand(args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, pid := range processesRunning("sleep", secs) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}()
			deadline := time.Now().Add(60 * time.Second)
			for len(processesRunning("sleep", secs)) < 3 {
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("the command's three sleeps did not start (%d running)", len(processesRunning("sleep", secs)))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			// The kernel and the supervisor end them at once; the margin
			// is for a loaded machine.
			deadline = time.Now().Add(30 * time.Second)
			for len(processesRunning("sleep", secs)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if left := processesRunning("sleep", secs); len(left) > 0 {
				t.Fatalf("after SIGKILL of capstan, %d of the command's processes still run: %v", len(left), left)
			}
		})
	}
}
