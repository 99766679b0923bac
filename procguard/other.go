//go:build !linux

package procguard

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
)

// Report says what Protect did.
type Report struct {
	Wiped                                   []string
	NonDumpable, PtraceDropped, CloseOnExec bool
}

// Protect does nothing on systems other than Linux.
func Protect(secret func(name, value string) bool) (Report, error) { return Report{}, nil }

// Init does nothing on systems other than Linux.
func Init() {}

// Available is false: the supervisor needs Linux.
func Available() bool { return false }

// Spec is a program to run under the supervisor.
type Spec struct {
	Argv []string
	Env  []string
	Dir  string
}

// Status is how the supervised program ended.
type Status struct {
	Started  bool
	ExitCode int
	Signal   int
	Error    string
}

// Supervised is a command prepared by Command.
type Supervised struct{ Cmd *exec.Cmd }

// Command is unavailable on systems other than Linux.
func Command(spec Spec) (*Supervised, error) {
	return nil, errors.New("procguard: the supervisor needs Linux")
}

// Start is unavailable on systems other than Linux.
func (s *Supervised) Start() error { return os.ErrInvalid }

// Stop does nothing on systems other than Linux.
func (s *Supervised) Stop() {}

// Status is empty on systems other than Linux.
func (s *Supervised) Status() Status { return Status{} }

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
