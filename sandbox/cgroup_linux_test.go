//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRunTreeStaysInItsPidsAndMemoryCgroups joins a process to a run's
// pids cgroup and then to its memory cgroup, as Run does, and checks that
// it is in both: on cgroup v2, where a process is in one cgroup only, a
// memory cgroup of its own would take the tree out of its pids limit.
func TestRunTreeStaysInItsPidsAndMemoryCgroups(t *testing.T) {
	cg, err := newPidsCgroup(64)
	if err != nil {
		t.Skipf("no pids cgroup here: %v", err)
	}
	defer cg.remove()
	mcg, err := newMemoryCgroup(1<<30, cg)
	if err != nil {
		t.Skipf("no memory cgroup here: %v", err)
	}
	defer mcg.remove()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if err := cg.join(pid); err != nil {
		t.Fatal(err)
	}
	if err := mcg.join(pid); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{cg.dir, mcg.dir} {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if !hasWord(string(b), strconv.Itoa(pid)) {
			t.Errorf("pid %d is not in %s (cgroup.procs: %q)", pid, dir, strings.TrimSpace(string(b)))
		}
	}
}
