package tool

import (
	"context"
	"time"
)

// CommandSpec is one shell command to run for the Bash tool.
type CommandSpec struct {
	// Command is a shell command line, run with "bash -c" (or "sh -c").
	Command string
	// Dir is the working directory (the agent's work dir).
	Dir string
	// Env is the complete environment of the command, "KEY=value" entries.
	// The Bash tool has already removed secrets from it; runners pass it
	// as is.
	Env []string
	// Timeout bounds the command's run time; 0 means no bound other than
	// ctx. When it expires the command's whole process group is killed.
	Timeout time.Duration
	// MaxOutput caps the combined output kept, in bytes; 0 means the
	// runner's default. Output beyond it is dropped from the middle and the
	// result is marked Truncated.
	MaxOutput int
}

// CommandResult is the outcome of a command that was started.
type CommandResult struct {
	// Output is stdout and stderr combined, in the order written, capped at
	// CommandSpec.MaxOutput (a note marks the omitted middle).
	Output string
	// ExitCode is the exit status; -1 when the command was killed by a
	// signal (including on timeout).
	ExitCode int
	// Signal names the signal that ended the command, when one did.
	Signal string
	// TimedOut is true when CommandSpec.Timeout expired and the process
	// group was killed.
	TimedOut bool
	// Truncated is true when output was dropped.
	Truncated bool
	// TotalBytes is the size of the output before truncation.
	TotalBytes int64
	// Duration is the wall time of the command.
	Duration time.Duration
}

// CommandRunner runs shell commands for the Bash tool. The default runner
// (package tool/builtin) runs them directly in a new process group; a
// sandboxing runner (package sandbox) confines them first. Both kill the
// whole process group on timeout or when ctx is canceled, and leave no
// background process running after Run returns.
//
// Run returns an error only when the command could not be started or ctx
// was canceled; a non-zero exit status or a timeout is reported in the
// result.
type CommandRunner interface {
	Run(ctx context.Context, spec CommandSpec) (CommandResult, error)
}
