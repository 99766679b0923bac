//go:build !linux

package sandbox

import (
	"context"
	"runtime"

	"github.com/capstan-dev/capstan/proc"
)

// Init is a no-op on systems other than Linux.
func Init() { proc.InitSupervisor() }

// Probe reports that the sandbox needs Linux.
func Probe(ctx context.Context) Capabilities {
	return Capabilities{
		Reason: "the sandbox needs Linux namespaces and Landlock; this is " + runtime.GOOS,
		Hint:   "run capstan on Linux to execute skill scripts",
	}
}

// Run refuses: there is no sandbox on this system.
func (r *Runner) Run(ctx context.Context, spec Spec) (Result, error) {
	return Result{}, r.caps.Unavailable()
}

// ProcessBound reports that there is no sandbox on this system.
func ProcessBound() (how string, kernel bool) {
	return "no sandbox on " + runtime.GOOS, false
}

// MemoryBound reports that there is no sandbox on this system.
func MemoryBound() (how string, cgroup bool) {
	return "no sandbox on " + runtime.GOOS, false
}
