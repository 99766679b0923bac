//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countByCmdline counts the host's processes whose command line contains
// marker.
func countByCmdline(marker []byte) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, marker) {
			n++
		}
	}
	return n
}

// TestForkBombBoundedByKernel checks that a fork bomb never has more
// processes than Limits.Processes plus the helper's allowance at any time,
// also for a root caller, whom the kernel exempts from RLIMIT_NPROC: the
// pids cgroup refuses the fork, where a sampling watchdog would let
// thousands through between two samples.
func TestForkBombBoundedByKernel(t *testing.T) {
	cg, cgErr := newPidsCgroup(1)
	if cg != nil {
		cg.remove()
	}
	// Without a cgroup a non-root caller's bound is RLIMIT_NPROC, counted
	// over all of the user's processes: the bomb may be refused its first
	// fork and never reach the watchdog's count.
	rlimitOnly := cg == nil && os.Geteuid() != 0
	name := fmt.Sprintf("bomb-%d-%d.sh", os.Getpid(), time.Now().UnixNano())
	root, build := skillDir(t, map[string]string{name: "bomb() { bomb | bomb & }; bomb\nsleep 2\necho survived\n"})
	const limit = 32
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if n := int64(countByCmdline([]byte(name))); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	res := runIn(t, root, build, []string{"bash", name}, func(s *Spec) {
		s.Limits.Processes = limit
		s.Timeout = 10 * time.Second
	})
	close(done)
	wg.Wait()
	bound := int64(limit + helperTasks)
	switch {
	case cg != nil:
		t.Logf("bounded by a pids cgroup")
	case rlimitOnly:
		t.Logf("no pids cgroup (%v): bounded by RLIMIT_NPROC", cgErr)
	default:
		t.Logf("no pids cgroup (%v): only the fast process watchdog bounds a root caller's tree", cgErr)
	}
	t.Logf("status %s, peak %d processes (bound %d)", res.Status, peak.Load(), bound)
	if peak.Load() > bound {
		t.Errorf("the fork bomb reached %d processes, over the limit %d plus %d for the helper", peak.Load(), limit, helperTasks)
	}
	if res.Status != StatusProcessLimit && !(rlimitOnly && strings.Contains(res.Stderr, "Resource temporarily unavailable")) {
		t.Errorf("status %s (%s), want %s", res.Status, res.Reason, StatusProcessLimit)
	}
	if n := countByCmdline([]byte(name)); n != 0 {
		t.Errorf("%d processes of the bomb survived the run", n)
	}
}
