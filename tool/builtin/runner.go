package builtin

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/tool"
)

// drainGrace is how long output is still read after the command and its
// process group are gone, for a descendant that left the group and keeps
// the output pipe open.
const drainGrace = 500 * time.Millisecond

// ExecRunner is the default tool.CommandRunner: it runs the command with
// "bash -c" (or "sh -c" when bash is not installed) in a new process group,
// with no stdin, stdout and stderr combined. When the program called
// sandbox.Init (or proc.InitSupervisor) in main, the command runs under a
// supervisor that is its child subreaper: when the command returns, times
// out or ctx is canceled, every process it started is killed, even one that
// left the process group with setsid. Without Init, the process group is
// killed, which a setsid descendant escapes. It does not sandbox.
type ExecRunner struct{}

// Shell returns the shell ExecRunner uses: bash when found in PATH, else sh.
func Shell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	if p, err := exec.LookPath("sh"); err == nil {
		return p
	}
	return "/bin/sh"
}

// stopGrace is how long a supervisor may take to kill the command's tree
// after Stop before its process group is killed outright.
const stopGrace = 2 * time.Second

// Run implements tool.CommandRunner. A nil spec.Env is an empty
// environment, never the caller's.
func (ExecRunner) Run(ctx context.Context, spec tool.CommandSpec) (tool.CommandResult, error) {
	max := spec.MaxOutput
	if max <= 0 {
		max = DefaultMaxOutputBytes
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return tool.CommandResult{}, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerTool, true, "cannot create output pipe")
	}
	defer pr.Close()
	cmd, sup, err := shellCommand(spec)
	if err != nil {
		pw.Close()
		return tool.CommandResult{}, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerTool, true, "cannot prepare command")
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if sup != nil {
		err = sup.Start()
	} else {
		err = cmd.Start()
	}
	pw.Close()
	if err != nil {
		return tool.CommandResult{}, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerTool, true, "cannot start command")
	}
	pgid := cmd.Process.Pid

	out := newHeadTail(max)
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, pr)
		close(copied)
	}()
	res := tool.CommandResult{}
	var runErr error
	res.TimedOut, runErr = waitCommand(ctx, cmd, sup, spec.Timeout)
	// Background processes the command left behind share its group.
	killGroup(pgid)
	select {
	case <-copied:
	case <-time.After(drainGrace):
		// A descendant escaped the group (setsid) and holds the pipe.
		_ = pr.SetReadDeadline(time.Now())
		<-copied
	}
	res.Duration = time.Since(start)
	res.Output, res.Truncated, res.TotalBytes = out.result()
	exitStatus(&res, cmd, sup)
	return res, runErr
}

// waitCommand waits for the started command to end, for at most timeout
// (0: no limit) and while ctx lasts; it stops the command and everything
// it started when either ends first (timedOut, or a CANCELED error).
func waitCommand(ctx context.Context, cmd *exec.Cmd, sup *proc.Supervised, timeout time.Duration) (timedOut bool, err error) {
	pgid := cmd.Process.Pid
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	// stop ends the command and everything it started: the supervisor
	// kills the tree itself; the group kill is the fallback.
	stop := func() {
		if sup != nil {
			sup.Stop()
			select {
			case <-waited:
				return
			case <-time.After(stopGrace):
			}
		}
		killGroup(pgid)
		<-waited
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-waited:
	case <-expired:
		stop()
		return true, nil
	case <-ctx.Done():
		stop()
		return false, agenterr.Wrap(ctx.Err(), agenterr.CodeCanceled, agenterr.LayerTool, false, "command canceled")
	}
	return false, nil
}

// shellCommand is spec's command line run by the shell in spec's
// directory and environment (an empty one when spec has none): under the
// process supervisor where it is available (it kills the whole tree),
// else in a process group of its own.
func shellCommand(spec tool.CommandSpec) (*exec.Cmd, *proc.Supervised, error) {
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	if proc.SupervisorAvailable() {
		sup, err := proc.Supervise(proc.SupervisedSpec{Argv: []string{Shell(), "-c", spec.Command}, Env: env, Dir: spec.Dir})
		if err != nil {
			return nil, nil, err
		}
		return sup.Cmd, sup, nil
	}
	cmd := exec.Command(Shell(), "-c", spec.Command)
	cmd.Dir = spec.Dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil, nil
}

// exitStatus sets res's exit code and signal from the ended command: the
// supervisor's report of the command when there is one (the supervisor's
// own exit says nothing about it), else the process state.
func exitStatus(res *tool.CommandResult, cmd *exec.Cmd, sup *proc.Supervised) {
	res.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
	}
	if sup == nil {
		return
	}
	if st := sup.Status(); st.Started {
		res.ExitCode = st.ExitCode
		res.Signal = ""
		if st.Signal != 0 {
			res.Signal = syscall.Signal(st.Signal).String()
		}
	} else if st.Error != "" {
		res.Output += "\n[" + st.Error + "]"
	}
}

func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// headTail keeps the first and last halves of a stream that may exceed max
// bytes.
type headTail struct {
	max   int
	split bool // head is final; later bytes go to tail
	head  []byte
	tail  []byte
	total int64
}

func newHeadTail(max int) *headTail {
	return &headTail{max: max}
}

func (h *headTail) Write(p []byte) (int, error) {
	n := len(p)
	h.total += int64(n)
	half := h.max / 2
	if !h.split {
		// Until more than max bytes arrive everything fits in head.
		take := min(h.max-len(h.head), len(p))
		h.head = append(h.head, p[:take]...)
		p = p[take:]
		if len(p) == 0 {
			return n, nil
		}
		// Overflow: keep the first half in head, move the rest to tail.
		h.split = true
		h.tail = append(h.tail, h.head[half:]...)
		h.head = h.head[:half]
	}
	h.tail = append(h.tail, p...)
	if keep := h.max - half; len(h.tail) > 2*keep {
		h.tail = append(h.tail[:0], h.tail[len(h.tail)-keep:]...)
	}
	return n, nil
}

// result returns the kept output, whether bytes were dropped, and the total.
func (h *headTail) result() (string, bool, int64) {
	if h.total <= int64(h.max) {
		return string(h.head) + string(h.tail), false, h.total
	}
	keep := h.max - h.max/2
	tail := h.tail
	if len(tail) > keep {
		tail = tail[len(tail)-keep:]
	}
	head := trimPartialRune(string(h.head))
	ts := string(tail)
	i := 0
	for i < len(ts) && i < 4 && !isRuneStartByte(ts[i]) {
		i++
	}
	omitted := h.total - int64(len(head)) - int64(len(ts)-i)
	return head + fmt.Sprintf("\n[... %d bytes of output omitted ...]\n", omitted) + ts[i:], true, h.total
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of s.
func trimPartialRune(s string) string {
	for j := 1; j <= utf8.UTFMax && j <= len(s); j++ {
		if p := len(s) - j; utf8.RuneStart(s[p]) {
			if utf8.FullRuneInString(s[p:]) {
				return s
			}
			return s[:p]
		}
	}
	return s
}

func isRuneStartByte(b byte) bool { return b&0xC0 != 0x80 }
