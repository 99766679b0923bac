//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/capstan-dev/capstan/agenterr"
)

const nsFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID |
	syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

// probed is the answer of the first probe of this process that found
// namespaces available: what the machine allows does not change while a
// process runs, and every agent built in one process (an embedder's, a
// test binary's) would otherwise start a helper to ask again.
var probed struct {
	sync.Mutex
	caps *Capabilities
}

// Probe finds out what the machine allows: it starts this binary as a probe
// helper in new namespaces (so [Init] must have been wired into main) and
// reads the Landlock ABI version. It never fails; the answer says why
// something is unavailable and what to change. A positive answer is kept
// for the rest of the process; a negative one is asked again.
func Probe(ctx context.Context) Capabilities {
	var c Capabilities
	if v, err := ll.LandlockGetABIVersion(); err == nil && v > 0 {
		c.LandlockABI = v
	}
	if os.Getenv(helperEnv) != "" {
		c.Reason = "already inside a sandbox helper"
		c.Hint = "call sandbox.Init() first thing in main and TestMain"
		return c
	}
	probed.Lock()
	defer probed.Unlock()
	if probed.caps != nil {
		return *probed.caps
	}
	defer func() {
		if c.Namespaces {
			kept := c
			probed.caps = &kept
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe", helperArg, "probe")
	cmd.Env = []string{helperEnv + "=1"}
	cmd.SysProcAttr = procAttr(true, false)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := startHelper(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	out := stdout.Bytes()
	switch {
	case err != nil && cmd.Process == nil:
		c.Reason, c.Hint = explainStartError(err)
	case err != nil || strings.TrimSpace(string(out)) != probeAnswer:
		c.Reason = fmt.Sprintf("the sandbox helper did not answer (%v)", err)
		c.Hint = "call sandbox.Init() first thing in main (and in TestMain for tests)"
	default:
		c.Namespaces = true
	}
	return c
}

// startHelper starts a helper in its namespaces. The parent writes the
// child's uid_map and gid_map, files the kernel gives to root when the
// process is not dumpable — and capstan makes itself so (proc.ProtectSelf)
// to keep its memory and environment from other processes of its user. A
// non-root caller would then be refused (EACCES) and could not sandbox at
// all, so it is dumpable while the child is created and its maps written:
// cmd.Start returns once the child has executed the helper, which is
// dumpable on its own. Starts are serialised, so the process is dumpable
// only for that moment; a sandboxed program cannot see it (PID namespace).
func startHelper(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.Cloneflags&syscall.CLONE_NEWUSER == 0 || os.Geteuid() == 0 {
		return cmd.Start()
	}
	dumpableMu.Lock()
	defer dumpableMu.Unlock()
	was, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil || was == 1 {
		return cmd.Start()
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		return cmd.Start()
	}
	defer unix.Prctl(unix.PR_SET_DUMPABLE, uintptr(was), 0, 0, 0)
	return cmd.Start()
}

// dumpableMu serialises startHelper's dumpable window: the flag belongs to
// the whole process.
var dumpableMu sync.Mutex

// explainStartError maps the errno of a failed clone to a reason and a hint.
// A disabled user namespace shows up as the misleading ENOSPC.
func explainStartError(err error) (reason, hint string) {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "user namespaces are disabled or exhausted (ENOSPC from clone)",
			"raise user.max_user_namespaces (sysctl -w user.max_user_namespaces=15000)"
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return "creating user namespaces is not permitted (" + err.Error() + ")",
			"set kernel.unprivileged_userns_clone=1 (Debian) or kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu >= 23.10), allow unshare/clone in the container's seccomp profile"
	case errors.Is(err, syscall.EINVAL):
		return "the kernel does not support the required namespaces (" + err.Error() + ")",
			"use a kernel built with CONFIG_USER_NS, CONFIG_NET_NS and CONFIG_PID_NS"
	}
	return "cannot start the sandbox helper: " + err.Error(), "check that /proc is mounted and the binary is executable"
}

// procAttr builds the clone attributes of a helper. The program keeps the
// caller's uid, mapped to itself in the user namespace: a root caller's
// program is uid 0 there, so it owns the root-owned files it may write,
// and stage two drops every capability before exec, so that ownership is
// all it has (RLIMIT_NPROC applies: it is counted per user namespace).
func procAttr(namespaces bool, network bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if !namespaces {
		return a
	}
	a.Cloneflags = nsFlags
	if network {
		a.Cloneflags &^= syscall.CLONE_NEWNET
	}
	uid, gid := os.Geteuid(), os.Getegid()
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	return a
}

// Run runs spec in the sandbox and waits for it. A program that fails,
// times out or breaks a limit yields a Result with the matching Status; the
// error is non-nil only when nothing could be run (bad spec, sandbox
// unavailable without AllowUnsandboxed).
func (r *Runner) Run(ctx context.Context, spec Spec) (Result, error) {
	sandboxed := r.caps.Sandboxes()
	if !sandboxed && !r.cfg.AllowUnsandboxed {
		return Result{}, r.caps.Unavailable()
	}
	hs, err := r.prepare(spec)
	if err != nil {
		return Result{}, err
	}
	allow, err := r.allowNetwork(&hs, sandboxed)
	if err != nil {
		return Result{}, err
	}
	limits := hs.Limits // as the caller set them, for the verdict
	timeout, maxOut, maxErr := runBounds(spec, limits)
	if !sandboxed && r.caps.LandlockABI == 0 {
		hs.LandlockABI = 0
	}
	tmp, err := privateHome(&hs)
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)
	writeLimit, writeBase := applyWriteLimit(&hs, spec.WriteLimitMB)

	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h, err := newHelperProcess(runCtx, spec, sandboxed, r.cfg.Network, allow)
	if err != nil {
		return Result{}, err
	}
	defer h.close()
	out := h.captureOutput(spec, maxOut, maxErr)
	if err := h.start(limits); err != nil {
		return Result{}, err
	}
	hs.NoAddressSpaceLimit = h.mcg != nil && spec.Limits.AddressSpaceMB <= 0
	specJSON, err := json.Marshal(hs)
	if err != nil {
		h.abort()
		return Result{}, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "encode helper spec")
	}
	// Without a cgroup, only the watchdog bounds a root caller's tree
	// (the kernel exempts uid 0 from RLIMIT_NPROC): it counts often.
	fastProcs := h.cg == nil && os.Geteuid() == 0
	wd := startWatchdog(h.pidNow(), limits.Processes, int64(limits.MemoryMB)<<20, writeLimit, hs.Writable, writeBase, h.killGroup, h.cg, h.mcg, fastProcs)
	waitErr := h.wait(specJSON, wd)
	if wd.diskExceeded.Load() {
		removeWrittenSince(hs.Writable, h.started)
	}
	res := Result{Duration: time.Since(h.started), Sandboxed: sandboxed,
		Isolation: isolation(sandboxed, hs.LandlockABI, r.cfg.Network, allow != nil)}
	overflow, maxOut := out.fill(&res, maxOut)
	st, haveStatus := h.status()
	in := classifyInput{
		timedOut:   runCtx.Err() != nil && ctx.Err() == nil,
		canceled:   ctx.Err() != nil,
		overflow:   overflow,
		haveStatus: haveStatus,
		status:     st,
		waitErr:    waitErr,
		limits:     limits,
		timeout:    timeout,
		maxStdout:  maxOut,
		stderr:     out.stderr.buf.String(),
		writeLimit: spec.WriteLimitMB,
	}
	wd.observed(&in)
	classify(&res, in)
	return res, nil
}

// allowNetwork sets up a network allow-list (Config.NetworkAllow, for a
// sandboxed run without full network): the program reaches the listed
// hosts through capstan's proxy, whose port and environment go into hs.
// It returns nil when the run has no allow-list.
func (r *Runner) allowNetwork(hs *helperSpec, sandboxed bool) (allowList, error) {
	if len(r.cfg.NetworkAllow) == 0 || r.cfg.Network || !sandboxed {
		return nil, nil
	}
	allow, err := newAllowList(r.cfg.NetworkAllow)
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSandbox, false, "network allow-list")
		e.Pointer = "/runner/boundaries/sandbox/network/allow"
		return nil, e
	}
	hs.ProxyPort = ProxyPort
	hs.Env = withProxyEnv(hs.Env)
	return allow, nil
}

// runBounds are a run's wall-clock timeout (by default its CPU limit and
// 5 s) and the bytes kept from stdout and stderr (by default 1 MiB and
// 256 KiB).
func runBounds(spec Spec, limits Limits) (timeout time.Duration, maxOut, maxErr int) {
	timeout = spec.Timeout
	if timeout <= 0 {
		timeout = time.Duration(limits.CPUSeconds)*time.Second + 5*time.Second
	}
	maxOut, maxErr = spec.MaxStdout, spec.MaxStderr
	if maxOut <= 0 {
		maxOut = 1 << 20
	}
	if maxErr <= 0 {
		maxErr = 256 << 10
	}
	return timeout, maxOut, maxErr
}

// privateHome makes a private, writable HOME and TMPDIR for this run only
// and gives it to hs; the caller removes the directory it returns.
func privateHome(hs *helperSpec) (string, error) {
	tmp, err := os.MkdirTemp("", "capstan-sbx-")
	if err != nil {
		return "", agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the run's temporary directory")
	}
	if err := markOwned(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "mark the run's temporary directory")
	}
	hs.Writable = append(hs.Writable, tmp)
	hs.Env = append(hs.Env, "HOME="+tmp, "TMPDIR="+tmp)
	return tmp, nil
}

// applyWriteLimit bounds a single file at the run's write limit (when that
// is lower) and returns the limit in bytes and, when there is one, the
// bytes the writable directories hold now (what the watchdog counts from).
func applyWriteLimit(hs *helperSpec, writeLimitMB int) (limit, base int64) {
	limit = int64(writeLimitMB) << 20
	if writeLimitMB > 0 && writeLimitMB < hs.Limits.FileSizeMB {
		hs.Limits.FileSizeMB = writeLimitMB
	}
	if limit > 0 {
		base = dirsSize(hs.Writable)
	}
	return limit, base
}

// prepare validates spec and turns it into the helper's spec.
func (r *Runner) prepare(spec Spec) (helperSpec, error) {
	bad := func(format string, args ...any) error {
		return agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true, format, args...)
	}
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return helperSpec{}, bad("empty command")
	}
	if spec.CombinedOutput && (spec.Stdout != nil || spec.Stderr != nil) {
		return helperSpec{}, bad("CombinedOutput cannot be used with Stdout or Stderr writers")
	}
	if !filepath.IsAbs(spec.Dir) {
		return helperSpec{}, bad("working directory %q is not absolute", spec.Dir)
	}
	if fi, err := os.Stat(spec.Dir); err != nil || !fi.IsDir() {
		return helperSpec{}, bad("working directory %q does not exist", spec.Dir)
	}
	prog, err := lookProgram(spec.Argv[0])
	if err != nil {
		return helperSpec{}, err
	}
	argv := append([]string{prog}, spec.Argv[1:]...)
	hs := helperSpec{
		Argv:        argv,
		Dir:         spec.Dir,
		Limits:      spec.Limits.withDefaults(),
		LandlockABI: r.caps.LandlockABI,
		Network:     r.cfg.Network,
	}
	hs.ReadOnly = append(hs.ReadOnly, r.cfg.SystemPaths...)
	hs.ReadOnly = append(hs.ReadOnly, spec.Dir)
	if !under(prog, r.cfg.SystemPaths) {
		hs.ReadOnly = append(hs.ReadOnly, prog)
	}
	for _, p := range spec.ReadOnly {
		if !filepath.IsAbs(p) {
			return helperSpec{}, bad("read-only path %q is not absolute", p)
		}
		hs.ReadOnly = append(hs.ReadOnly, p)
	}
	for _, w := range spec.Writable {
		if !filepath.IsAbs(w) {
			return helperSpec{}, bad("writable directory %q is not absolute", w)
		}
		fi, err := os.Lstat(w)
		if err != nil || !fi.IsDir() {
			return helperSpec{}, bad("writable directory %q must be an existing directory, not a symlink", w)
		}
		hs.Writable = append(hs.Writable, w)
	}
	env := []string{"PATH=" + sandboxPATH, "LANG=C.UTF-8"}
	if spec.ReplaceEnv {
		env = nil
	}
	for _, kv := range spec.Env {
		if k, _, _ := strings.Cut(kv, "="); k == "HOME" || k == "TMPDIR" {
			continue // always the run's private directory
		}
		if !strings.Contains(kv, "=") {
			return helperSpec{}, bad("environment entry %q is not KEY=VALUE", kv)
		}
		env = append(env, kv)
	}
	hs.Env = env
	if err := checkExecSize(hs.Argv, env); err != nil {
		return helperSpec{}, err
	}
	return hs, nil
}

// withProxyEnv replaces every proxy variable of env with the allow-list
// proxy's.
func withProxyEnv(env []string) []string {
	proxy := proxyEnv()
	names := map[string]bool{}
	for _, kv := range proxy {
		k, _, _ := strings.Cut(kv, "=")
		names[k] = true
	}
	out := make([]string, 0, len(env)+len(proxy))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !names[k] {
			out = append(out, kv)
		}
	}
	return append(out, proxy...)
}

// maxArgStrlen is the kernel's limit on one argv or environment string
// (MAX_ARG_STRLEN, 32 pages), terminating NUL included.
const maxArgStrlen = 32 * 4096

// checkExecSize refuses, before anything starts, a command that execve
// would reject with E2BIG: one string over MAX_ARG_STRLEN, or argv and
// environment together over a quarter of the stack limit (the kernel's
// rule; the HOME and TMPDIR entries added later are allowed for).
func checkExecSize(argv, env []string) error {
	const slack = 1024
	total := slack
	for i, a := range argv {
		if len(a)+1 > maxArgStrlen {
			return agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true,
				"argument %d is %d bytes; the kernel's limit for one argument is %d — write the text to a file and pass its path", i, len(a), maxArgStrlen-1)
		}
		total += len(a) + 1 + 8
	}
	for _, kv := range env {
		if len(kv)+1 > maxArgStrlen {
			k, _, _ := strings.Cut(kv, "=")
			return agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true,
				"environment variable %s is %d bytes; the kernel's limit for one entry is %d — write the value to a file and pass its path", k, len(kv), maxArgStrlen-1)
		}
		total += len(kv) + 1 + 8
	}
	if limit := execTotalLimit(); total > limit {
		return agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true,
			"arguments and environment total %d bytes, over the %d the kernel accepts — pass large data in a file", total, limit)
	}
	return nil
}

// execTotalLimit is the kernel's cap on argv plus environment: a quarter of
// the stack limit, at least 128 KiB, at most three quarters of the default
// 8 MiB stack when the stack is unlimited.
func execTotalLimit() int {
	var rl syscall.Rlimit
	stack := uint64(8 << 20)
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &rl); err == nil {
		stack = rl.Cur
	}
	limit := stack / 4
	if max := uint64(6 << 20); limit > max {
		limit = max
	}
	if limit < maxArgStrlen {
		limit = maxArgStrlen
	}
	return int(limit)
}

// lookProgram resolves a program name in the sandbox PATH, or checks an
// absolute path.
func lookProgram(name string) (string, error) {
	if filepath.IsAbs(name) {
		if fi, err := os.Stat(name); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true, "program %q is not an executable file", name)
		}
		return name, nil
	}
	if strings.ContainsRune(name, '/') {
		return "", agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true, "program %q must be a bare name or an absolute path", name)
	}
	for _, dir := range filepath.SplitList(sandboxPATH) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSandbox, true, "program %q not found in the sandbox PATH %s", name, sandboxPATH)
	e.Hint = "install it in a system directory; the sandbox does not search the caller's PATH"
	return "", e
}

func isolation(sandboxed bool, abi int, network, allowList bool) []string {
	var iso []string
	if sandboxed {
		iso = append(iso, "userns")
		if !network {
			iso = append(iso, "netns")
		}
		if allowList {
			iso = append(iso, "net_allow_list")
		}
		iso = append(iso, "pidns", "mountns", "ipcns", "utsns")
	}
	if abi > 0 {
		iso = append(iso, fmt.Sprintf("landlock:v%d", abi))
	}
	iso = append(iso, "rlimits", "no_new_privs", "no_capabilities", "close_on_exec")
	if socketFilter() != nil {
		iso = append(iso, "seccomp:inet_sockets_only")
	}
	return iso
}

type classifyInput struct {
	timedOut, canceled, overflow, haveStatus bool
	status                                   helperStatus
	waitErr                                  error
	limits                                   Limits
	timeout                                  time.Duration
	maxStdout                                int
	stderr                                   string
	// memory and disk are set when the watchdog killed the tree.
	memory, disk, processes bool
	// treeCPU is the CPU time the tree had used when last sampled; busy
	// the per-mille share of busyOver its processes were on or waiting
	// for a CPU.
	treeCPU, busyOver time.Duration
	busy              int64
	writeLimit        int
}

func classify(res *Result, in classifyInput) {
	st := in.status
	if in.haveStatus {
		res.ExitCode = st.ExitCode
		res.CPUTime = time.Duration(st.CPUNanos)
		if st.Signal != 0 {
			res.Signal = unix.SignalName(syscall.Signal(st.Signal))
		}
	} else {
		res.ExitCode = -1
		res.CPUTime = in.treeCPU
	}
	cpuLimit := time.Duration(in.limits.CPUSeconds) * time.Second
	switch {
	case in.overflow:
		res.Status = StatusOutputLimit
		res.Reason = fmt.Sprintf("stdout exceeded %d bytes; the process tree was killed and the output truncated", in.maxStdout)
	case in.memory:
		res.Status = StatusMemoryLimit
		res.Reason = fmt.Sprintf("the process tree used more than %d MiB of memory; it was killed", in.limits.MemoryMB)
	case in.processes:
		res.Status = StatusProcessLimit
		res.Reason = fmt.Sprintf("the process tree grew past %d processes; it was killed", in.limits.Processes)
	case in.disk:
		res.Status = StatusDiskLimit
		res.Reason = fmt.Sprintf("writes exceeded the %d MiB budget; the process tree was killed and the files it wrote were removed", in.writeLimit)
	case in.timedOut && cpuLimit <= in.timeout && (in.treeCPU >= cpuLimit*9/10 || (in.busy >= 900 && in.busyOver >= in.timeout/2)):
		// The CPU limit is not above the wall limit (skill scripts: both
		// are script_timeout_s). A program that computed the whole time —
		// on a CPU or waiting for one on a busy machine — is stopped by
		// the clock at or before RLIMIT_CPU; it ran out of CPU, not of
		// things to wait for.
		res.Status = StatusCPULimit
		res.Reason = fmt.Sprintf("CPU time limit of %ds reached: the process tree computed for the whole %s wall-clock limit; it was killed", in.limits.CPUSeconds, in.timeout)
	case in.timedOut:
		res.Status = StatusTimeout
		res.Reason = fmt.Sprintf("wall-clock limit of %s reached; the process tree was killed", in.timeout)
	case in.canceled:
		res.Status = StatusKilled
		res.Reason = "the run was canceled; the process tree was killed"
	case !in.haveStatus && strings.Contains(in.stderr, setupMarker):
		res.Status = StatusSandboxError
		res.Reason = "the sandbox could not be set up: " + firstLine(in.stderr[strings.Index(in.stderr, setupMarker)+len(setupMarker):])
	case !in.haveStatus:
		res.Status = StatusKilled
		res.Reason = fmt.Sprintf("the sandbox helper ended without a report (%v)", in.waitErr)
	case st.ExitCode == setupExit && strings.Contains(in.stderr, setupMarker):
		res.Status = StatusSandboxError
		res.Reason = "the sandbox could not be set up: " + firstLine(in.stderr[strings.Index(in.stderr, setupMarker)+len(setupMarker):])
	case st.Signal == int(syscall.SIGXCPU) || (st.Signal == int(syscall.SIGKILL) && res.CPUTime >= cpuLimit) ||
		(st.ExitCode == 128+int(syscall.SIGXCPU) && strings.Contains(in.stderr, "CPU time limit exceeded")):
		res.Status = StatusCPULimit
		res.Reason = fmt.Sprintf("CPU time limit of %ds reached (SIGXCPU/SIGKILL)", in.limits.CPUSeconds)
	case st.Signal == int(syscall.SIGXFSZ) ||
		(st.ExitCode == 128+int(syscall.SIGXFSZ) && strings.Contains(in.stderr, "File size limit exceeded")):
		// The second form is a shell reporting that its child got SIGXFSZ.
		res.Status = StatusFileTooLarge
		res.Reason = fmt.Sprintf("file size limit of %d MiB reached (SIGXFSZ)", in.limits.FileSizeMB)
	case st.Signal != 0:
		res.Status = StatusKilled
		res.Reason = "killed by " + res.Signal
	case st.ExitCode == 0:
		res.Status = StatusOK
	case looksOutOfMemory(in.stderr):
		res.Status = StatusMemoryLimit
		res.Reason = fmt.Sprintf("exit code %d after an allocation was refused (address-space limit %d MiB)", st.ExitCode, in.limits.AddressSpaceMB)
	default:
		res.Status = StatusExit
		res.Reason = fmt.Sprintf("exit code %d", st.ExitCode)
	}
}

func looksOutOfMemory(stderr string) bool {
	for _, m := range []string{"MemoryError", "Cannot allocate memory", "out of memory", "Out of memory", "bad_alloc", "heap out of memory", "Allocation failed"} {
		if strings.Contains(stderr, m) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
