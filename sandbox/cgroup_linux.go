//go:build linux

package sandbox

import (
	"bufio"
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

// helperTasks is what a run's pids cgroup allows above Limits.Processes:
// the threads of the helper that waits for the program (a Go process).
const helperTasks = 16

// pidsCgroup is the pids cgroup that holds one run's whole process tree:
// the kernel refuses a fork past pids.max with EAGAIN, whatever the uid,
// so a fork bomb cannot outrun a sampler.
type pidsCgroup struct {
	cgroup
}

// cgroup is one run's child cgroup directory, in any hierarchy.
type cgroup struct {
	dir string
}

// newChildCgroup creates a uniquely named child of the cgroup parent.
func newChildCgroup(parent string) (cgroup, error) {
	dir, err := os.MkdirTemp(parent, "capstan-sbx-")
	if err != nil {
		return cgroup{}, fmt.Errorf("create a child of %s: %w", parent, err)
	}
	return cgroup{dir: dir}, nil
}

// cgroupRoots are where the cgroup hierarchies are mounted.
var (
	cgroupV2Roots = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
	cgroupV1Root  = "/sys/fs/cgroup/pids"
)

// newPidsCgroup creates a pids cgroup for one run with pids.max = max
// tasks, below capstan's own cgroup: on cgroup v2 when that cgroup
// delegates the pids controller to its children, else on a writable
// cgroup v1 pids hierarchy. It returns nil and the reason when neither
// is possible.
func newPidsCgroup(max int) (*pidsCgroup, error) {
	create := func(parent string) (*pidsCgroup, error) { return makePidsCgroup(parent, max) }
	return placeCgroup("pids", cgroupV1Root, create, create)
}

// placeCgroup makes a run's cgroup of controller below capstan's own
// cgroup: with makeV2 on capstan's cgroup v2 directory when it delegates
// controller to its children, else with makeV1 on capstan's directory of
// the cgroup v1 hierarchy mounted at v1Root. It returns the zero T and
// every reason when neither is possible.
func placeCgroup[T any](controller, v1Root string, makeV2, makeV1 func(parent string) (T, error)) (T, error) {
	var none T
	v2, v1, err := ownCgroups(controller)
	if err != nil {
		return none, err
	}
	var reasons []string
	if parent, err := delegatingV2Parent(v2, controller); err != nil {
		reasons = append(reasons, err.Error())
	} else if parent != "" {
		cg, err := makeV2(parent)
		if err == nil {
			return cg, nil
		}
		reasons = append(reasons, "cgroup v2: "+err.Error())
	}
	if v1 != "" && isFS(v1Root, unix.CGROUP_SUPER_MAGIC) {
		cg, err := makeV1(filepath.Join(v1Root, v1))
		if err == nil {
			return cg, nil
		}
		reasons = append(reasons, "cgroup v1: "+err.Error())
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "no "+controller+" cgroup hierarchy is mounted")
	}
	return none, errors.New(strings.Join(reasons, "; "))
}

// delegatingV2Parent returns capstan's own cgroup v2 directory, own
// below the first mounted cgroup v2 root, when it delegates controller
// to its children; "" when own is "" or no cgroup v2 root is mounted,
// and an error when the directory does not delegate controller.
func delegatingV2Parent(own, controller string) (string, error) {
	if own == "" {
		return "", nil
	}
	for _, root := range cgroupV2Roots {
		if !isFS(root, unix.CGROUP2_SUPER_MAGIC) {
			continue
		}
		parent := filepath.Join(root, own)
		ctl, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
		if err != nil || !hasWord(string(ctl), controller) {
			return "", errors.New("cgroup v2: " + parent + " does not delegate the " + controller + " controller")
		}
		return parent, nil
	}
	return "", nil
}

// ownCgroups reads capstan's cgroup paths from /proc/self/cgroup: the
// unified (v2) one and the v1 one of controller, "" when absent.
func ownCgroups(controller string) (v2, v1 string, err error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", "", fmt.Errorf("read own cgroup: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case hasWord(strings.ReplaceAll(parts[1], ",", " "), controller):
			v1 = parts[2]
		}
	}
	return v2, v1, sc.Err()
}

func isFS(path string, magic int64) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && int64(st.Type) == magic
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// makePidsCgroup creates a uniquely named child of parent with pids.max set.
func makePidsCgroup(parent string, max int) (*pidsCgroup, error) {
	c, err := newChildCgroup(parent)
	if err != nil {
		return nil, err
	}
	cg := &pidsCgroup{c}
	if err := os.WriteFile(filepath.Join(c.dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		cg.remove()
		return nil, fmt.Errorf("set pids.max in %s: %w", c.dir, err)
	}
	return cg, nil
}

// join moves pid into the cgroup. Its later children are born there.
func (c cgroup) join(pid int) error {
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move pid %d into %s: %w", pid, c.dir, err)
	}
	return nil
}

// counter is the value of the line "key N" of the cgroup's file (0 when
// the file or the line is missing).
func (c cgroup) counter(file, key string) int64 {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// refused is how many forks the kernel refused because the cgroup was at
// pids.max (the "max" count of pids.events).
func (c *pidsCgroup) refused() int64 { return c.counter("pids.events", "max") }

// remove kills whatever is left in the cgroup and deletes it. A cgroup
// can only be removed once its last task has been reaped, so it retries
// for up to two seconds.
func (c cgroup) remove() {
	deadline := time.Now().Add(2 * time.Second)
	for {
		c.killAll()
		err := syscall.Rmdir(c.dir)
		if err == nil || errors.Is(err, syscall.ENOENT) || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killAll sends SIGKILL to every task in the cgroup.
func (c cgroup) killAll() {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// ProcessBound says how the sandbox bounds the processes of a run's tree on
// this machine, found the way a run finds it: by creating (and removing) a
// pids cgroup. kernel is false when only the watchdog bounds it — a root
// caller without a pids cgroup, whom the kernel exempts from RLIMIT_NPROC.
func ProcessBound() (how string, kernel bool) {
	cg, err := newPidsCgroup(1)
	if err == nil {
		cg.remove()
		return "a pids cgroup per run (" + filepath.Dir(cg.dir) + ")", true
	}
	if os.Geteuid() != 0 {
		return "RLIMIT_NPROC (no pids cgroup: " + err.Error() + ")", true
	}
	return "only a 2 ms watchdog: running as root without a pids cgroup (" + err.Error() + ")", false
}
