//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
)

// helperProcess is one start of the sandbox helper for Run: its command,
// the pipes that carry the spec in and the helper's status out, the relay
// of a network allow-list, and the cgroups that bound its process tree.
type helperProcess struct {
	cmd              *exec.Cmd
	statusR, statusW *os.File
	specR, specW     *os.File
	statusCh         chan []byte // what the helper wrote on the status pipe
	rel              *relay      // nil without an allow-list
	cg               *pidsCgroup // nil when none could be made
	mcg              *memoryCgroup
	started          time.Time
	pid              atomic.Int64
	killRequested    atomic.Bool
}

// newHelperProcess prepares the helper's command — its environment (the
// build cache's overlay, the relay), namespaces, stdin and pipes — without
// starting it. On success the caller closes it.
func newHelperProcess(ctx context.Context, spec Spec, namespaces, network bool, allow allowList) (*helperProcess, error) {
	cmd := exec.CommandContext(ctx, "/proc/self/exe", helperArg, "init")
	cmd.Env = []string{helperEnv + "=1"}
	if spec.cacheLayer != nil {
		b, err := json.Marshal(spec.cacheLayer)
		if err != nil {
			return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "the build cache's copy")
		}
		cmd.Env = append(cmd.Env, cacheLayerEnv+"="+string(b))
	}
	cmd.SysProcAttr = procAttr(namespaces, network)
	cmd.Stdin = bytes.NewReader(spec.Stdin)
	if spec.StdinStream != nil {
		cmd.Stdin = spec.StdinStream
	}
	h := &helperProcess{cmd: cmd}
	var err error
	if h.statusR, h.statusW, err = os.Pipe(); err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "status pipe")
	}
	// The spec travels on a pipe, not in argv, so that its size is bound
	// only by the target's own execve limits (checked in prepare).
	if h.specR, h.specW, err = os.Pipe(); err != nil {
		h.statusW.Close()
		h.statusR.Close()
		return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "spec pipe")
	}
	cmd.ExtraFiles = []*os.File{h.statusW, h.specR}
	if allow != nil {
		if h.rel, err = newRelay(allow); err != nil {
			h.statusW.Close()
			h.specR.Close()
			h.specW.Close()
			h.statusR.Close()
			return nil, agenterr.Wrap(err, agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "network allow-list")
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, h.rel.child)
		cmd.Env = append(cmd.Env, relayEnv+"=1")
	}
	cmd.Cancel = func() error { h.killGroup(); return nil }
	cmd.WaitDelay = 2 * time.Second
	return h, nil
}

// close closes capstan's ends of the pipes and the relay.
func (h *helperProcess) close() {
	if h.rel != nil {
		h.rel.close()
	}
	h.specW.Close()
	h.statusR.Close()
}

// killGroup kills the helper's process group; asked before the helper's
// pid is known, start kills it as soon as it is.
func (h *helperProcess) killGroup() {
	h.killRequested.Store(true)
	if pid := int(h.pid.Load()); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// pidNow is the started helper's pid.
func (h *helperProcess) pidNow() int { return int(h.pid.Load()) }

// runOutput is what Run keeps of a program's stdout and stderr.
type runOutput struct {
	stdout, stderr *cappedBuffer
	// combined holds both streams when Spec.CombinedOutput is set.
	combined *middleBuffer
}

// captureOutput points the helper's stdout and stderr at buffers capped at
// maxOut and maxErr bytes (or at the caller's writers); a program that
// prints past the stdout cap is killed.
func (h *helperProcess) captureOutput(spec Spec, maxOut, maxErr int) *runOutput {
	o := &runOutput{stdout: &cappedBuffer{max: maxOut, onOverflow: h.killGroup}, stderr: &cappedBuffer{max: maxErr}}
	cmd := h.cmd
	if spec.CombinedOutput {
		o.combined = &middleBuffer{max: maxOut, ceiling: combinedCeiling, onOverflow: h.killGroup}
		cmd.Stdout, cmd.Stderr = o.combined, o.combined
		return o
	}
	cmd.Stdout, cmd.Stderr = o.stdout, o.stderr
	if spec.Stdout != nil {
		cmd.Stdout = spec.Stdout
	}
	if spec.Stderr != nil {
		// Its head is kept here too: the helper's setup errors and the
		// shell's limit messages on it classify the run.
		cmd.Stderr = io.MultiWriter(spec.Stderr, o.stderr)
	}
	return o
}

// fill puts the kept output into res. It returns whether stdout went past
// its cap, and that cap (the combined ceiling for combined output).
func (o *runOutput) fill(res *Result, maxOut int) (overflow bool, limit int) {
	res.Stdout, res.StdoutTruncated = o.stdout.buf.Bytes(), o.stdout.overflow
	if o.combined != nil {
		res.Stdout = []byte(o.combined.String())
		res.StdoutTruncated = o.combined.dropped > 0
		res.OutputBytes = o.combined.total
		o.stdout.overflow = o.combined.total > o.combined.ceiling
		maxOut = combinedCeiling
	} else {
		res.OutputBytes = int64(o.stdout.buf.Len())
	}
	res.Stderr, res.StderrLines = summarizeLines(o.stderr.buf.String(), MaxStderrLines)
	if o.stderr.overflow {
		res.Stderr += "\n[stderr truncated]"
	}
	return o.stdout.overflow, maxOut
}

// start starts the helper with its whole tree in a pids cgroup when one
// can be made — the kernel then refuses the fork past the limit whatever
// the uid — and in a memory cgroup when one can be made: the kernel then
// bounds the tree's memory, and the address-space rlimit, which
// toolchains that reserve much (the Go race detector, V8) cannot live
// with, is left off unless the caller set one.
func (h *helperProcess) start(limits Limits) error {
	h.cg, _ = newPidsCgroup(limits.Processes + helperTasks)
	h.mcg, _ = newMemoryCgroup(int64(limits.MemoryMB)<<20, h.cg)
	h.started = time.Now()
	err := startHelper(h.cmd)
	h.specR.Close()
	if h.rel != nil {
		h.rel.child.Close()
	}
	if err != nil {
		h.removeCgroups()
		h.statusW.Close()
		reason, hint := explainStartError(err)
		e := agenterr.Wrap(err, agenterr.CodeSandboxUnavailable, agenterr.LayerSandbox, false, "%s", reason)
		e.Hint = hint
		return e
	}
	pid := h.cmd.Process.Pid
	h.pid.Store(int64(pid))
	if h.killRequested.Load() { // overflowed before the pid was known
		h.killGroup()
	}
	h.statusW.Close()
	// The helper starts nothing before the spec arrives, so joining it
	// here, before the spec is written, leaves no fork outside the cgroup.
	if h.cg != nil {
		if err := h.cg.join(pid); err != nil {
			h.cg.remove()
			h.cg = nil
		}
	}
	if h.mcg != nil {
		if err := h.mcg.join(pid); err != nil {
			h.mcg.remove()
			h.mcg = nil
		}
	}
	return nil
}

// abort kills a started helper that will get no spec, and cleans up.
func (h *helperProcess) abort() {
	h.killGroup()
	_ = h.cmd.Wait()
	h.removeCgroups()
}

// wait sends the helper its spec and waits for the program to end, then
// stops the watchdog, kills what is left of the tree and removes the
// cgroups. It returns the wait error.
func (h *helperProcess) wait(specJSON []byte, wd *watchdog) error {
	go func() {
		// A helper that dies before reading closes the pipe; the write then
		// fails with EPIPE and the exit status tells the story.
		_, _ = h.specW.Write(specJSON)
		h.specW.Close()
	}()
	h.statusCh = make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(h.statusR); h.statusCh <- b }()
	waitErr := h.cmd.Wait()
	wd.stop()
	// The group may hold orphans when there is no PID namespace.
	_ = syscall.Kill(-h.pidNow(), syscall.SIGKILL)
	h.removeCgroups()
	return waitErr
}

// status is what the helper reported on its status pipe; ok is false when
// it reported no started program.
func (h *helperProcess) status() (st helperStatus, ok bool) {
	ok = json.Unmarshal(<-h.statusCh, &st) == nil && st.Started
	return st, ok
}

// removeCgroups removes the run's cgroups.
func (h *helperProcess) removeCgroups() {
	if h.cg != nil {
		h.cg.remove()
	}
	if h.mcg != nil {
		h.mcg.remove()
	}
}
