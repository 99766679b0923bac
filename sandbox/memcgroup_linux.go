//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// memoryCgroup is the memory cgroup that holds one run's whole process
// tree: the kernel keeps the tree's memory (every process together, page
// cache included, no swap) under the limit, reclaiming or killing inside
// the group, whatever the processes reserve. A run bounded by one needs no
// address-space rlimit, which the Go race detector, V8 and the Go
// toolchain on a many-core machine cannot live with.
type memoryCgroup struct {
	cgroup
	v2 bool
}

// cgroupV1MemoryRoot is where a cgroup v1 memory hierarchy is mounted.
var cgroupV1MemoryRoot = "/sys/fs/cgroup/memory"

// newMemoryCgroup creates a memory cgroup for one run, limited to limit
// bytes without swap, below capstan's own cgroup: on cgroup v2 when that
// cgroup delegates the memory controller to its children, else on a
// writable cgroup v1 memory hierarchy. It returns nil and the reason when
// neither is possible.
//
// pids is the run's pids cgroup, or nil. On cgroup v2 a process is in one
// cgroup only: joining a second one below the same parent would take the
// tree out of its pids cgroup, so there the limit is set in pids itself.
func newMemoryCgroup(limit int64, pids *pidsCgroup) (*memoryCgroup, error) {
	v2 := func(parent string) (*memoryCgroup, error) {
		if pids != nil && filepath.Dir(pids.dir) == parent {
			cg := &memoryCgroup{cgroup: pids.cgroup, v2: true}
			return cg, cg.setLimit(limit)
		}
		return makeMemoryCgroup(parent, true, limit)
	}
	v1 := func(dir string) (*memoryCgroup, error) { return makeMemoryCgroup(dir, false, limit) }
	return placeCgroup("memory", cgroupV1MemoryRoot, v2, v1)
}

// makeMemoryCgroup creates a uniquely named child of parent limited to
// limit bytes, swap excluded. On cgroup v2 an out-of-memory kill ends
// every process of the group at once (memory.oom.group).
func makeMemoryCgroup(parent string, v2 bool, limit int64) (*memoryCgroup, error) {
	c, err := newChildCgroup(parent)
	if err != nil {
		return nil, err
	}
	cg := &memoryCgroup{cgroup: c, v2: v2}
	if err := cg.setLimit(limit); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// setLimit limits the cgroup to limit bytes, swap excluded.
func (c *memoryCgroup) setLimit(limit int64) error {
	n := []byte(strconv.FormatInt(limit, 10))
	settings := []struct {
		file     string
		value    []byte
		optional bool
	}{
		{"memory.limit_in_bytes", n, false},
		// Set after memory.limit_in_bytes, which it may not be below;
		// absent when the kernel does not account swap.
		{"memory.memsw.limit_in_bytes", n, true},
	}
	if c.v2 {
		settings = []struct {
			file     string
			value    []byte
			optional bool
		}{
			{"memory.max", n, false},
			{"memory.swap.max", []byte("0"), true},
			{"memory.oom.group", []byte("1"), true},
		}
	}
	for _, s := range settings {
		p := filepath.Join(c.dir, s.file)
		if err := os.WriteFile(p, s.value, 0); err != nil {
			if s.optional && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return fmt.Errorf("set %s: %w", p, err)
		}
	}
	return nil
}

// oomKills is how many processes of the cgroup the kernel killed for
// going over the limit (oom_kill of memory.events, v2, or of
// memory.oom_control, v1).
func (c *memoryCgroup) oomKills() int64 {
	if c.v2 {
		return c.counter("memory.events", "oom_kill")
	}
	return c.counter("memory.oom_control", "oom_kill")
}

// MemoryBound says how the sandbox bounds the memory of a run's process
// tree on this machine, found the way a run finds it: by creating (and
// removing) a memory cgroup. cgroup is false when none can be made: the
// tree's memory is then bounded by RLIMIT_AS per process and a watchdog
// of its resident memory, and toolchains that reserve much address space
// (the Go race detector, V8) may fail under the sandbox.
func MemoryBound() (how string, cgroup bool) {
	cg, err := newMemoryCgroup(int64(validatorLimits.MemoryMB)<<20, nil)
	if err == nil {
		cg.remove()
		return "a memory cgroup per run (" + filepath.Dir(cg.dir) + ")", true
	}
	return "RLIMIT_AS per process and a watchdog of the tree's memory (no memory cgroup: " + err.Error() + ")", false
}
