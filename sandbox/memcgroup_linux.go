//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// memoryCgroup is the memory cgroup that holds one run's whole process
// tree: the kernel keeps the tree's memory (every process together, page
// cache included, no swap) under the limit, reclaiming or killing inside
// the group, whatever the processes reserve. A run bounded by one needs no
// address-space rlimit, which the Go race detector, V8 and the Go
// toolchain on a many-core machine cannot live with.
type memoryCgroup struct {
	dir string
	v2  bool
}

// cgroupV1MemoryRoot is where a cgroup v1 memory hierarchy is mounted.
var cgroupV1MemoryRoot = "/sys/fs/cgroup/memory"

// newMemoryCgroup creates a memory cgroup for one run, limited to limit
// bytes without swap, below capstan's own cgroup: on cgroup v2 when that
// cgroup delegates the memory controller to its children, else on a
// writable cgroup v1 memory hierarchy. It returns nil and the reason when
// neither is possible.
func newMemoryCgroup(limit int64) (*memoryCgroup, error) {
	v2, v1, err := ownCgroups("memory")
	if err != nil {
		return nil, err
	}
	var reasons []string
	if v2 != "" {
		for _, root := range cgroupV2Roots {
			if !isFS(root, unix.CGROUP2_SUPER_MAGIC) {
				continue
			}
			parent := filepath.Join(root, v2)
			ctl, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
			if err != nil || !hasWord(string(ctl), "memory") {
				reasons = append(reasons, "cgroup v2: "+parent+" does not delegate the memory controller")
				break
			}
			cg, err := makeMemoryCgroup(parent, true, limit)
			if err == nil {
				return cg, nil
			}
			reasons = append(reasons, "cgroup v2: "+err.Error())
			break
		}
	}
	if v1 != "" && isFS(cgroupV1MemoryRoot, unix.CGROUP_SUPER_MAGIC) {
		cg, err := makeMemoryCgroup(filepath.Join(cgroupV1MemoryRoot, v1), false, limit)
		if err == nil {
			return cg, nil
		}
		reasons = append(reasons, "cgroup v1: "+err.Error())
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "no memory cgroup hierarchy is mounted")
	}
	return nil, errors.New(strings.Join(reasons, "; "))
}

// makeMemoryCgroup creates a uniquely named child of parent limited to
// limit bytes, swap excluded. On cgroup v2 an out-of-memory kill ends
// every process of the group at once (memory.oom.group).
func makeMemoryCgroup(parent string, v2 bool, limit int64) (*memoryCgroup, error) {
	dir, err := os.MkdirTemp(parent, "capstan-sbx-")
	if err != nil {
		return nil, fmt.Errorf("create a child of %s: %w", parent, err)
	}
	cg := &memoryCgroup{dir: dir, v2: v2}
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
	if v2 {
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
		p := filepath.Join(dir, s.file)
		if err := os.WriteFile(p, s.value, 0); err != nil {
			if s.optional && errors.Is(err, os.ErrNotExist) {
				continue
			}
			cg.remove()
			return nil, fmt.Errorf("set %s: %w", p, err)
		}
	}
	return cg, nil
}

// join moves pid into the cgroup. Its later children are born there.
func (c *memoryCgroup) join(pid int) error {
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move pid %d into %s: %w", pid, c.dir, err)
	}
	return nil
}

// oomKills is how many processes of the cgroup the kernel killed for
// going over the limit (oom_kill of memory.events, v2, or of
// memory.oom_control, v1).
func (c *memoryCgroup) oomKills() int64 {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove kills whatever is left in the cgroup and deletes it, retrying
// for up to two seconds while its last tasks are reaped.
func (c *memoryCgroup) remove() {
	deadline := time.Now().Add(2 * time.Second)
	for {
		killCgroupProcs(c.dir)
		err := syscall.Rmdir(c.dir)
		if err == nil || errors.Is(err, syscall.ENOENT) || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
