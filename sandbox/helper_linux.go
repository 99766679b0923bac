//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/capstan-dev/capstan/proc"
)

// The helper is this same binary started as
// "/proc/self/exe __capstan_sandbox__ <stage>" with helperEnv=1. Stage one
// gets the status pipe on fd 3 and the spec pipe on fd 4; it hands the spec
// pipe to stage two, where it is fd 3.
const (
	helperArg   = "__capstan_sandbox__"
	helperEnv   = "CAPSTAN_SANDBOX_HELPER"
	probeAnswer = "capstan-sandbox-ok"
	// setupExit is the exit code of a helper whose setup failed; its stderr
	// then starts with setupMarker.
	setupExit   = 125
	setupMarker = "SANDBOX_SETUP_ERROR: "
	// ownProcEnv tells stage two that stage one mounted the sandbox's own
	// /proc (mountOwnProc).
	ownProcEnv = "CAPSTAN_SANDBOX_OWN_PROC"
	// cacheLayerEnv gives stage one the run's cacheLayer (JSON) to put in
	// place before stage two starts.
	cacheLayerEnv = "CAPSTAN_SANDBOX_CACHE_LAYER"
)

// helperSpec is what the parent tells the helper, as JSON in argv.
type helperSpec struct {
	Argv        []string `json:"argv"`
	Env         []string `json:"env"`
	Dir         string   `json:"dir"`
	ReadOnly    []string `json:"ro"`
	Writable    []string `json:"rw"`
	Limits      Limits   `json:"limits"`
	LandlockABI int      `json:"landlock_abi"`
	Network     bool     `json:"network,omitempty"`
	// ProxyPort, when set, is the one TCP port the program may connect
	// to: the allow-list relay of stage one.
	ProxyPort int `json:"proxy_port,omitempty"`
	// NoAddressSpaceLimit leaves RLIMIT_AS off: a memory cgroup bounds
	// the run.
	NoAddressSpaceLimit bool `json:"no_as_limit,omitempty"`
	// OwnProc makes /proc readable: stage one mounted there a proc file
	// system of the sandbox's own PID namespace. Stage two sets it from
	// stage one's word (ownProcEnv), never from the spec.
	OwnProc bool `json:"-"`
}

// helperStatus is what stage one reports on fd 3 about stage two.
type helperStatus struct {
	ExitCode int   `json:"exit_code"`
	Signal   int   `json:"signal"`
	CPUNanos int64 `json:"cpu_ns"`
	Started  bool  `json:"started"`
}

// Init must be called first thing in main (and in TestMain) of every
// program that uses a Runner. In a normal process it returns at once; in a
// sandbox helper (the same binary re-executed by a Runner) it runs the
// helper and exits, never returning.
func Init() {
	proc.InitSupervisor() // the supervisor of unsandboxed commands, same binary
	if len(os.Args) < 3 || os.Args[1] != helperArg || os.Getenv(helperEnv) != "1" {
		return
	}
	switch os.Args[2] {
	case "probe":
		fmt.Println(probeAnswer)
		os.Exit(0)
	case "init":
		os.Exit(stageOne())
	case "exec":
		os.Exit(stageTwo())
	}
	fmt.Fprintf(os.Stderr, "%sunknown helper stage %q\n", setupMarker, os.Args[2])
	os.Exit(setupExit)
}

func setupFail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, setupMarker+format+"\n", args...)
	return setupExit
}

// stageOne runs as PID 1 of the sandbox's PID namespace (when namespaces are
// in use). It starts stage two, waits for it, and reports how it ended on
// fd 3. Its own exit tears the namespace down.
func stageOne() int {
	status := os.NewFile(3, "status")
	spec := os.NewFile(4, "spec")
	if status == nil || spec == nil {
		return setupFail("stage one: no status or spec pipe")
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	// The parent moves this process into the run's pids cgroup before it
	// writes the spec: stage two is forked only once the spec (or the end
	// of the pipe) is there, so no process of the run starts outside it.
	if os.Getenv(relayEnv) == "1" {
		if err := startRelay(); err != nil {
			return setupFail("stage one: network allow-list: %v", err)
		}
	}
	if err := waitReadable(4); err != nil {
		return setupFail("stage one: wait for the spec: %v", err)
	}
	cmd := exec.Command("/proc/self/exe", helperArg, "exec")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{spec}
	cmd.Env = []string{helperEnv + "=1"}
	if mountOwnProc() == nil {
		cmd.Env = append(cmd.Env, ownProcEnv+"=1")
	}
	if v := os.Getenv(cacheLayerEnv); v != "" {
		var layer cacheLayer
		if err := json.Unmarshal([]byte(v), &layer); err != nil {
			return setupFail("stage one: the build cache's copy: %v", err)
		}
		if err := layer.place(); err != nil {
			return setupFail("stage one: %v", err)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var st helperStatus
	if err := cmd.Start(); err != nil {
		return setupFail("stage one: start: %v", err)
	}
	spec.Close()
	st.Started = true
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return setupFail("stage one: wait: %v", err)
	}
	ps := cmd.ProcessState
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			st.Signal = int(ws.Signal())
			st.ExitCode = -1
		} else {
			st.ExitCode = ws.ExitStatus()
		}
	}
	st.CPUNanos = int64(ps.UserTime() + ps.SystemTime())
	b, _ := json.Marshal(st)
	if _, err := status.Write(b); err != nil {
		return setupFail("stage one: report: %v", err)
	}
	status.Close()
	return 0
}

// mountOwnProc mounts, on /proc, a proc file system of the sandbox's own
// PID namespace, so that programs can read what they ask about themselves
// (/proc/self/stat behind Node's process.memoryUsage(), which vitest's
// and jest's workers call after every test file and hang without;
// /proc/self/fd, /proc/cpuinfo, /proc/meminfo). It lists only the
// sandbox's processes; this process (PID 1 there) is outside the
// program's Landlock domain, so its memory and environment stay closed
// to the program. It runs only as PID 1 of a new PID namespace (which
// comes with a mount namespace of its own), never on the host's /proc.
// Where the kernel refuses the mount (a container whose /proc is
// partly masked), /proc stays unreadable, as the host's /proc must.
func mountOwnProc() error {
	if os.Getpid() != 1 {
		return errors.New("not in a PID namespace of its own")
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

// place puts the layer in place for the run: an overlay file system on
// Merged (Lower read-only below, the run's writes going to Upper) where
// this process has a private mount namespace and the kernel mounts one
// there, so that a run copies nothing; otherwise Lower copied into Merged.
// Either way no write through Merged reaches Lower.
func (l *cacheLayer) place() error {
	if os.Getpid() == 1 && !strings.ContainsAny(l.Lower+l.Upper+l.Work, ",:\\") &&
		unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") == nil {
		opts := "lowerdir=" + l.Lower + ",upperdir=" + l.Upper + ",workdir=" + l.Work
		// userxattr: the overlay's own attributes in the user.* namespace,
		// which a user namespace may set (trusted.* it may not).
		for _, o := range []string{opts + ",userxattr", opts} {
			if unix.Mount("overlay", l.Merged, "overlay", unix.MS_NOSUID|unix.MS_NODEV, o) == nil {
				return nil
			}
		}
	}
	return l.copyInto()
}

// waitReadable blocks until fd has data or its writer closed it.
func waitReadable(fd int) error {
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if err != unix.EINTR {
			return err
		}
	}
}

// stageTwo confines itself (Landlock, no_new_privs, rlimits), changes to the
// working directory and replaces itself with the target program.
func stageTwo() int {
	runtime.LockOSThread()
	specFile := os.NewFile(3, "spec")
	if specFile == nil {
		return setupFail("stage two: no spec pipe")
	}
	specJSON, err := io.ReadAll(specFile)
	specFile.Close()
	if err != nil {
		return setupFail("stage two: read spec: %v", err)
	}
	var hs helperSpec
	if err := json.Unmarshal(specJSON, &hs); err != nil {
		return setupFail("stage two: bad spec: %v", err)
	}
	if len(hs.Argv) == 0 {
		return setupFail("stage two: empty argv")
	}
	hs.OwnProc = os.Getenv(ownProcEnv) == "1"
	if err := closeInheritedFDs(); err != nil {
		return setupFail("close inherited descriptors: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return setupFail("prctl(no_new_privs): %v", err)
	}
	if hs.LandlockABI > 0 {
		if err := restrictLandlock(hs); err != nil {
			return setupFail("landlock: %v", err)
		}
	}
	if err := os.Chdir(hs.Dir); err != nil {
		return setupFail("chdir %s: %v", hs.Dir, err)
	}
	if err := dropCapabilities(); err != nil {
		return setupFail("drop capabilities: %v", err)
	}
	filter := socketFilter()
	// Everything execve needs is built before the limits go on: once
	// RLIMIT_AS is set, a process whose address space is already larger
	// (a race-enabled binary reserves terabytes of shadow memory) cannot
	// map a single new page, so nothing may allocate between setLimits and
	// execve. syscall.Exec allocates its C strings, hence the raw call.
	path, err := syscall.BytePtrFromString(hs.Argv[0])
	if err != nil {
		return setupFail("exec %s: %v", hs.Argv[0], err)
	}
	argv, err := syscall.SlicePtrFromStrings(hs.Argv)
	if err != nil {
		return setupFail("exec %s: argv: %v", hs.Argv[0], err)
	}
	envv, err := syscall.SlicePtrFromStrings(hs.Env)
	if err != nil {
		return setupFail("exec %s: env: %v", hs.Argv[0], err)
	}
	// The failure report is formatted now too: after the limits, even fmt
	// could not allocate.
	failPrefix := []byte(setupMarker + "exec " + hs.Argv[0] + ": ")
	debug.SetGCPercent(-1)
	if err := installFilter(filter); err != nil {
		return setupFail("seccomp: %v", err)
	}
	if err := setLimits(hs.Limits, !hs.NoAddressSpaceLimit); err != nil {
		return setupFail("rlimits: %v", err)
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE,
		uintptr(unsafe.Pointer(path)),
		uintptr(unsafe.Pointer(&argv[0])),
		uintptr(unsafe.Pointer(&envv[0])))
	rawWrite(2, failPrefix)
	rawWrite(2, errnoText(errno))
	rawWrite(2, newline)
	return setupExit
}

var newline = []byte("\n")

// errnoTexts holds the messages of the errors execve reports, converted
// once at start-up so that reporting one allocates nothing.
var errnoTexts = func() map[syscall.Errno][]byte {
	m := map[syscall.Errno][]byte{}
	for _, e := range []syscall.Errno{syscall.E2BIG, syscall.EACCES, syscall.EAGAIN, syscall.EFAULT, syscall.EINVAL,
		syscall.EIO, syscall.EISDIR, syscall.ELIBBAD, syscall.ELOOP, syscall.EMFILE, syscall.ENAMETOOLONG,
		syscall.ENFILE, syscall.ENOENT, syscall.ENOEXEC, syscall.ENOMEM, syscall.ENOTDIR, syscall.EPERM, syscall.ETXTBSY} {
		m[e] = []byte(e.Error())
	}
	return m
}()

var unknownErrno = []byte("execve failed")

// errnoText is errno's message without allocating.
func errnoText(errno syscall.Errno) []byte {
	if b, ok := errnoTexts[errno]; ok {
		return b
	}
	return unknownErrno
}

// rawWrite writes b to fd with the bare system call (no allocation).
func rawWrite(fd int, b []byte) {
	if len(b) > 0 {
		_, _, _ = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	}
}

// setLimits sets the run's rlimits; RLIMIT_AS only when addressSpace.
func setLimits(l Limits, addressSpace bool) error {
	const mb = 1 << 20
	set := func(res int, cur, max uint64) error {
		// syscall.Setrlimit, not unix.Setrlimit, keeps the runtime's own
		// record of the NOFILE limit in step with the one set here.
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: cur, Max: max}); err != nil {
			return fmt.Errorf("setrlimit(%d): %w", res, err)
		}
		return nil
	}
	cpu := uint64(l.CPUSeconds)
	for _, r := range []struct {
		res      int
		cur, max uint64
	}{
		// max = cur+1: SIGXCPU first (diagnosable), SIGKILL a second later.
		{unix.RLIMIT_CPU, cpu, cpu + 1},
		{unix.RLIMIT_FSIZE, uint64(l.FileSizeMB) * mb, uint64(l.FileSizeMB) * mb},
		{unix.RLIMIT_NPROC, uint64(l.Processes), uint64(l.Processes)},
		{unix.RLIMIT_NOFILE, uint64(l.OpenFiles), uint64(l.OpenFiles)},
		{unix.RLIMIT_CORE, 0, 0},
		{unix.RLIMIT_AS, uint64(l.AddressSpaceMB) * mb, uint64(l.AddressSpaceMB) * mb},
	} {
		if r.res == unix.RLIMIT_AS && !addressSpace {
			continue
		}
		if err := set(r.res, r.cur, r.max); err != nil {
			return err
		}
	}
	return nil
}
