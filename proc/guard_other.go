//go:build !linux

package proc

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
)

// ProtectReport says what ProtectSelf did.
type ProtectReport struct {
	Wiped                                   []string
	NonDumpable, PtraceDropped, CloseOnExec bool
}

// ProtectSelf does nothing on systems other than Linux.
func ProtectSelf(secret func(name, value string) bool) (ProtectReport, error) {
	return ProtectReport{}, nil
}

// InitSupervisor does nothing on systems other than Linux.
func InitSupervisor() {}

// SupervisorAvailable is false: the supervisor needs Linux.
func SupervisorAvailable() bool { return false }

// SupervisedSpec is a program to run under the supervisor.
type SupervisedSpec struct {
	Argv []string
	Env  []string
	Dir  string
}

// SupervisedStatus is how the supervised program ended.
type SupervisedStatus struct {
	Started  bool
	ExitCode int
	Signal   int
	Error    string
}

// Supervised is a command prepared by Supervise.
type Supervised struct{ Cmd *exec.Cmd }

// Supervise is unavailable on systems other than Linux.
func Supervise(spec SupervisedSpec) (*Supervised, error) {
	return nil, errors.New("proc: the supervisor needs Linux")
}

// Start is unavailable on systems other than Linux.
func (s *Supervised) Start() error { return os.ErrInvalid }

// Stop does nothing on systems other than Linux.
func (s *Supervised) Stop() {}

// Status is empty on systems other than Linux.
func (s *Supervised) Status() SupervisedStatus { return SupervisedStatus{} }

// AdoptOrphans does nothing on systems other than Linux.
func AdoptOrphans() error { return nil }

// KillChildren does nothing on systems other than Linux.
func KillChildren() {}

// Ancestor is a process above this one whose environment holds a
// variable AncestorsHolding looks for.
type Ancestor struct {
	PID     int
	Command string
	Vars    []string
}

func (a Ancestor) String() string { return "process " + strconv.Itoa(a.PID) + " (" + a.Command + ")" }

// AncestorsHolding finds nothing on systems other than Linux: they have
// no /proc/<pid>/environ to read.
func AncestorsHolding(names, values []string) []Ancestor { return nil }
