//go:build linux

package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// The supervisor is this binary started as
// "/proc/self/exe __capstan_supervise__" with supervisorEnv=1, the spec on
// fd 3 and the status pipe on fd 4.
const (
	supervisorArg = "__capstan_supervise__"
	supervisorEnv = "CAPSTAN_SUPERVISOR"
)

var initialized atomic.Bool

// InitSupervisor must run first thing in main (sandbox.Init calls it). In a normal
// process it records that the supervisor is available and returns; in a
// supervisor (this binary re-executed by Supervise) it supervises and exits.
func InitSupervisor() {
	if len(os.Args) >= 2 && os.Args[1] == supervisorArg && os.Getenv(supervisorEnv) == "1" {
		os.Exit(supervise())
	}
	initialized.Store(true)
}

// SupervisorAvailable reports whether InitSupervisor ran in this process, so Supervise can
// re-execute the binary as the supervisor.
func SupervisorAvailable() bool { return initialized.Load() }

// SupervisedSpec is a program to run under the supervisor.
type SupervisedSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
}

// SupervisedStatus is how the supervised program ended.
type SupervisedStatus struct {
	Started  bool   `json:"started"`
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Supervised is a command prepared by Supervise.
type Supervised struct {
	// Cmd starts the supervisor. Set Stdin, Stdout and Stderr before
	// Start; leave Args, Env, ExtraFiles and SysProcAttr alone.
	Cmd    *exec.Cmd
	specW  *os.File
	statR  *os.File
	spec   []byte
	status chan SupervisedStatus
}

// Supervise prepares spec to run under a supervisor: a child subreaper that
// starts spec.Argv, and when it exits (or on Stop) kills every process it
// left behind, whatever its process group or session, before exiting
// itself. The supervisor and the program share one process group.
func Supervise(spec SupervisedSpec) (*Supervised, error) {
	if !SupervisorAvailable() {
		return nil, errors.New("proc: InitSupervisor was not called in main")
	}
	if len(spec.Argv) == 0 {
		return nil, errors.New("proc: empty command")
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, err
	}
	cmd := exec.Command("/proc/self/exe", supervisorArg)
	cmd.Env = []string{supervisorEnv + "=1"}
	cmd.ExtraFiles = []*os.File{specR, statW}
	// The supervisor gets SIGTERM when capstan dies, however it dies (a
	// SIGKILL included): it then kills the program and everything it
	// started, as on Stop. (SIGKILL would end the supervisor alone and
	// leave the program's processes running, re-parented to init.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	return &Supervised{Cmd: cmd, specW: specW, statR: statR, spec: b, status: make(chan SupervisedStatus, 1)}, nil
}

// Start starts the supervisor and hands it the spec.
func (s *Supervised) Start() error {
	err := s.Cmd.Start()
	for _, f := range s.Cmd.ExtraFiles {
		f.Close()
	}
	if err != nil {
		s.specW.Close()
		s.statR.Close()
		return err
	}
	go func() {
		_, _ = s.specW.Write(s.spec)
		s.specW.Close()
	}()
	go func() {
		b, _ := io.ReadAll(s.statR)
		s.statR.Close()
		var st SupervisedStatus
		if json.Unmarshal(b, &st) != nil {
			st = SupervisedStatus{Error: "the supervisor ended without a report"}
		}
		s.status <- st
	}()
	return nil
}

// Stop asks the supervisor to kill the program and everything it started
// now; it exits once they are gone.
func (s *Supervised) Stop() {
	if p := s.Cmd.Process; p != nil {
		_ = p.Signal(syscall.SIGTERM)
	}
}

// Status returns how the program ended; call it after Cmd.Wait.
func (s *Supervised) Status() SupervisedStatus { return <-s.status }

// supervise is the supervisor process.
func supervise() int {
	report := os.NewFile(4, "status")
	fail := func(format string, args ...any) int {
		b, _ := json.Marshal(SupervisedStatus{Error: fmt.Sprintf(format, args...)})
		if report != nil {
			_, _ = report.Write(b)
		}
		return 125
	}
	specFile := os.NewFile(3, "spec")
	if specFile == nil || report == nil {
		return fail("supervisor: no spec or status pipe")
	}
	syscall.CloseOnExec(4)
	raw, err := io.ReadAll(specFile)
	specFile.Close()
	if err != nil {
		return fail("supervisor: read spec: %v", err)
	}
	var spec SupervisedSpec
	if err := json.Unmarshal(raw, &spec); err != nil || len(spec.Argv) == 0 {
		return fail("supervisor: bad spec: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("supervisor: PR_SET_CHILD_SUBREAPER: %v", err)
	}
	_ = closeOnExecAbove2()
	_ = dropBoundingPtrace()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	prog := lookPath(spec.Argv[0], spec.Env)
	cmd := exec.Command(prog, spec.Argv[1:]...)
	cmd.Args = spec.Argv
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fail("cannot start %s: %v", spec.Argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-term:
		killChildren()
		<-done
	}
	st := SupervisedStatus{Started: true, ExitCode: cmd.ProcessState.ExitCode()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Signal = int(ws.Signal())
	}
	reapAll()
	b, _ := json.Marshal(st)
	if _, err := report.Write(b); err != nil {
		return 125
	}
	return 0
}

// reapAll kills and reaps every child until none is left. Orphans of the
// program's descendants are re-parented to this subreaper as their
// parents die, so the loop ends only when the whole tree is gone.
func reapAll() {
	for {
		var ws syscall.WaitStatus
		// No child at all, running or exited (the usual case of a command
		// that started none): nothing to kill, and the children lists of
		// every thread need not be read.
		if _, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); errors.Is(err, syscall.ECHILD) {
			return
		}
		killChildren()
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.ECHILD) {
			return
		}
	}
}

// killChildren sends SIGKILL to every child of this process.
func killChildren() {
	for _, pid := range ChildPIDs(os.Getpid()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// ChildPIDs lists the pids whose parent is pid: from the children files
// of its threads, or a scan of /proc on kernels without them.
func ChildPIDs(pid int) []int {
	base := "/proc/" + strconv.Itoa(pid) + "/task"
	if tasks, err := os.ReadDir(base); err == nil {
		var out []int
		found := false
		for _, t := range tasks {
			b, err := os.ReadFile(base + "/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			found = true
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
		if found {
			return out
		}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// lookPath finds prog in the PATH of env (the program's environment, not
// the supervisor's, which has none).
func lookPath(prog string, env []string) string {
	if strings.ContainsRune(prog, '/') {
		return prog
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return prog
}

// AdoptOrphans makes this process a child subreaper: a process its
// children leave behind (a validator's or an MCP server's background job,
// even one that called setsid) is re-parented to it instead of to init, so
// KillChildren can end it.
func AdoptOrphans() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// KillChildren kills and reaps every remaining child of this process,
// adopted orphans included, until none is left. Call it when the work is
// done, just before exiting.
func KillChildren() { reapAll() }
