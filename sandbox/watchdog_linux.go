//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capstan-dev/capstan/proc"
)

// watchInterval is how often the watchdog samples the process tree and the
// writable directories.
const watchInterval = 50 * time.Millisecond

// fastProcInterval is how often the process count is sampled when nothing
// else bounds it: a root caller (exempt from RLIMIT_NPROC) for whom no pids
// cgroup could be made.
const fastProcInterval = 2 * time.Millisecond

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat.
const clockTicks = 100

// watchdog enforces the limits no rlimit can express, on the whole process
// tree of a run while it runs: resident memory summed over every process
// (RLIMIT_AS is per process, so four children could each use the limit),
// and the bytes added to the writable directories (RLIMIT_FSIZE is per
// file). When one is exceeded it calls kill once. It also keeps the tree's
// CPU time, so a run stopped at the wall-clock limit while spinning can be
// told from one that was waiting.
type watchdog struct {
	root       int
	maxProcs   int
	memLimit   int64
	writeLimit int64
	dirs       []string
	base       int64
	kill       func()
	// cg, when set, holds the tree; a fork it refused at pids.max counts
	// as the tree growing past the limit.
	cg *pidsCgroup
	// mcg, when set, bounds the tree's memory: a process the kernel
	// killed for going over its limit counts as the tree going over the
	// memory limit, and the resident-memory sum is not needed.
	mcg *memoryCgroup

	memExceeded   atomic.Bool
	diskExceeded  atomic.Bool
	procsExceeded atomic.Bool
	cpuTicks      atomic.Int64
	// busy is the share (per mille) of wall time the program's live
	// processes spent on a CPU or waiting for one, from the first sample
	// that saw the program to the last; busyOver is that span.
	busy     atomic.Int64
	busyOver atomic.Int64
	first    time.Time
	firstRun int64
	peakMem  atomic.Int64
	done     chan struct{}
	wg       sync.WaitGroup
}

// startWatchdog samples the tree rooted at pid until stop. fastProcs adds
// a sampler of the process count every fastProcInterval.
func startWatchdog(pid, maxProcs int, memLimit, writeLimit int64, dirs []string, base int64, kill func(), cg *pidsCgroup, mcg *memoryCgroup, fastProcs bool) *watchdog {
	w := &watchdog{root: pid, maxProcs: maxProcs, memLimit: memLimit, writeLimit: writeLimit, dirs: dirs, base: base, kill: kill, cg: cg, mcg: mcg, done: make(chan struct{})}
	w.wg.Add(1)
	go w.loop()
	if fastProcs && maxProcs > 0 {
		w.wg.Add(1)
		go w.procLoop()
	}
	return w
}

// procLoop checks only the process count, often.
func (w *watchdog) procLoop() {
	defer w.wg.Done()
	t := time.NewTicker(fastProcInterval)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		w.checkProcs(len(processTree(w.root)))
	}
}

// checkProcs kills the tree the first time it has more than maxProcs
// processes below the helper, or its cgroup refused a fork.
func (w *watchdog) checkProcs(tree int) {
	// The helper at the root is not the program's; everything below it is.
	over := w.maxProcs > 0 && tree-1 > w.maxProcs
	if !over && w.cg != nil && w.cg.refused() > 0 {
		over = true
	}
	if over && !w.procsExceeded.Swap(true) {
		w.kill()
	}
}

func (w *watchdog) loop() {
	defer w.wg.Done()
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	page := int64(os.Getpagesize())
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		var rss, ticks, runnable int64
		tree := processTree(w.root)
		for _, p := range tree {
			r, c := processUsage(p)
			rss += r * page
			ticks += c
			runnable += runnableNanos(p)
		}
		if ticks > w.cpuTicks.Load() {
			w.cpuTicks.Store(ticks)
		}
		if len(tree) > 1 {
			now := time.Now()
			if w.first.IsZero() {
				w.first, w.firstRun = now, runnable
			} else if span := now.Sub(w.first); span > 0 {
				w.busy.Store((runnable - w.firstRun) * 1000 / int64(span))
				w.busyOver.Store(int64(span))
			}
		}
		w.checkProcs(len(tree))
		if rss > w.peakMem.Load() {
			w.peakMem.Store(rss)
		}
		if w.procsExceeded.Load() {
			continue // killed already; the first broken limit is the cause
		}
		if w.memoryOver(rss) && !w.memExceeded.Swap(true) {
			w.kill()
			continue
		}
		if w.writeLimit > 0 && !w.memExceeded.Load() && !w.diskExceeded.Load() && dirsSize(w.dirs)-w.base > w.writeLimit {
			w.diskExceeded.Store(true)
			w.kill()
		}
	}
}

// stop ends the sampling and waits for the goroutines. A fork the cgroup
// refused after the last sample still counts.
func (w *watchdog) stop() {
	close(w.done)
	w.wg.Wait()
	if w.cg != nil && w.cg.refused() > 0 {
		w.procsExceeded.Store(true)
	}
	if w.mcg != nil && w.mcg.oomKills() > 0 && !w.procsExceeded.Load() {
		w.memExceeded.Store(true)
	}
}

// memoryOver reports whether the tree went over its memory limit: its
// memory cgroup had a process killed for it, or, without one, the
// resident memory summed over the tree (rss) is above the limit.
func (w *watchdog) memoryOver(rss int64) bool {
	if w.mcg != nil {
		return w.mcg.oomKills() > 0
	}
	return w.memLimit > 0 && rss > w.memLimit
}

// cpu is the largest CPU time of the tree seen while it ran.
func (w *watchdog) cpu() time.Duration {
	return time.Duration(w.cpuTicks.Load()) * time.Second / clockTicks
}

// runnableNanos is the time pid has spent on a CPU or waiting in a run
// queue for one (/proc/<pid>/schedstat), 0 when unknown. A program that
// spins is runnable all the time even when a loaded machine gives it
// little CPU.
func runnableNanos(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	on, _ := strconv.ParseInt(f[0], 10, 64)
	wait, _ := strconv.ParseInt(f[1], 10, 64)
	return on + wait
}

// processTree lists pid and all its descendants.
func processTree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, proc.ChildPIDs(out[i])...)
	}
	return out
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (field 3, the state, first).
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// processUsage returns the resident pages of pid and its CPU time in clock
// ticks, its reaped children's included.
func processUsage(pid int) (rssPages, cpuTicks int64) {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			rssPages, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	// utime stime cutime cstime are fields 14-17, i.e. 11-14 here.
	if f := statFields(pid); len(f) > 14 {
		for _, s := range f[11:15] {
			n, _ := strconv.ParseInt(s, 10, 64)
			cpuTicks += n
		}
	}
	return rssPages, cpuTicks
}

// dirsSize is the total size of the regular files under dirs.
func dirsSize(dirs []string) int64 {
	var n int64
	for _, d := range dirs {
		n += dirSize(d)
	}
	return n
}

// removeWrittenSince deletes the regular files under dirs modified at or
// after since: what a run that broke its write budget left behind.
func removeWrittenSince(dirs []string, since time.Time) {
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return nil
			}
			if fi, err := e.Info(); err == nil && !fi.ModTime().Before(since) {
				_ = os.Remove(p)
			}
			return nil
		})
	}
}

// observed puts what the watchdog saw of the tree into the run's
// verdict: the limits it killed the tree for, its CPU time and how busy it
// kept the machine.
func (w *watchdog) observed(in *classifyInput) {
	in.memory = w.memExceeded.Load()
	in.disk = w.diskExceeded.Load()
	in.processes = w.procsExceeded.Load()
	in.treeCPU = w.cpu()
	in.busy = w.busy.Load()
	in.busyOver = time.Duration(w.busyOver.Load())
}
