//go:build linux

package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// ProtectReport says what ProtectSelf did.
type ProtectReport struct {
	// Wiped lists the variables whose values were wiped from the initial
	// environment block.
	Wiped []string
	// NonDumpable is true when PR_SET_DUMPABLE 0 took effect.
	NonDumpable bool
	// PtraceDropped is true when CAP_SYS_PTRACE is out of the bounding set
	// (always true for a process that never had it).
	PtraceDropped bool
	// CloseOnExec is true when every descriptor above 2 is close-on-exec.
	CloseOnExec bool
}

// ProtectSelf hardens the calling process against its children; see the
// package comment. secret decides which variables are wiped. Each step is
// independent: a failure is reported in the error and the other steps
// still run.
func ProtectSelf(secret func(name, value string) bool) (ProtectReport, error) {
	var rep ProtectReport
	var errs []string
	wiped, err := wipeEnvironBlock(secret)
	rep.Wiped = wiped
	if err != nil {
		errs = append(errs, "environment block: "+err.Error())
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		errs = append(errs, "PR_SET_DUMPABLE: "+err.Error())
	} else {
		rep.NonDumpable = true
	}
	if err := dropBoundingPtrace(); err != nil {
		errs = append(errs, "CAP_SYS_PTRACE: "+err.Error())
	} else {
		rep.PtraceDropped = true
	}
	if err := closeOnExecAbove2(); err != nil {
		errs = append(errs, "close-on-exec: "+err.Error())
	} else {
		rep.CloseOnExec = true
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("proc: %s", strings.Join(errs, "; "))
	}
	return rep, nil
}

// wipeEnvironBlock overwrites, in the process's own memory, the value of
// each secret entry of the environment block the kernel set up at exec
// (the range /proc/self/stat calls env_start..env_end, which is what
// /proc/<pid>/environ reads). The runtime's copy behind os.Getenv is a
// separate allocation and stays intact.
func wipeEnvironBlock(secret func(name, value string) bool) ([]string, error) {
	start, end, err := environRange()
	if err != nil {
		return nil, err
	}
	if end <= start {
		return nil, nil
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, int64(start)); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	var wiped []string
	changed := false
	for off := 0; off < len(block); {
		n := bytes.IndexByte(block[off:], 0)
		if n < 0 {
			n = len(block) - off
		}
		entry := block[off : off+n]
		if k, v, ok := bytes.Cut(entry, []byte("=")); ok && secret(string(k), string(v)) {
			clear(v)
			wiped = append(wiped, string(k))
			changed = true
		}
		off += n + 1
	}
	if !changed {
		return nil, nil
	}
	if _, err := mem.WriteAt(block, int64(start)); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	return wiped, nil
}

// environRange reads env_start and env_end (fields 50 and 51) from
// /proc/self/stat.
func environRange() (uint64, uint64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces; the first field after ")" is field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("unexpected /proc/self/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	const envStart = 50 - 3
	if len(f) <= envStart+1 {
		return 0, 0, fmt.Errorf("/proc/self/stat has no env_start (kernel < 3.5)")
	}
	s, err1 := strconv.ParseUint(f[envStart], 10, 64)
	e, err2 := strconv.ParseUint(f[envStart+1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bad env_start/env_end in /proc/self/stat")
	}
	return s, e, nil
}

// dropBoundingPtrace removes CAP_SYS_PTRACE from the bounding set, so no
// program this process executes gains it, even as root; without it, the
// non-dumpable flag keeps a root child out of /proc/<pid>/mem too. A
// non-root process cannot change the set and needs not: its children get
// no capabilities from exec (file capabilities aside).
//
// The bounding set belongs to each thread, and Go starts a child from
// whichever thread runs the goroutine, so the drop is done on every thread
// of the process (psx: AllThreadsSyscall without cgo, signals with it).
func dropBoundingPtrace() error {
	var err error
	if _, _, errno := psx.Syscall3(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, unix.CAP_SYS_PTRACE, 0); errno != 0 {
		err = errno
	}
	if err == nil || os.Geteuid() != 0 {
		return nil
	}
	if in, qerr := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_SYS_PTRACE, 0, 0, 0); qerr == nil && in == 0 {
		return nil
	}
	return err
}

// closeOnExecAbove2 marks every descriptor above 2 close-on-exec, so that
// descriptors inherited from the parent (a shell's 7>file) never reach a
// child process. Descriptors Go opens are close-on-exec already.
func closeOnExecAbove2() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	// Kernels before 5.11: walk /proc/self/fd.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}
