package tool

import (
	"context"
	"io"
)

// ProgramSandbox confines a program that runs the model's tools on its
// own, as a model provider may start one (llm.Config.Sandbox: the claude
// CLI runs its own Bash, file and MCP tools): every process the program
// starts inherits the confinement. The agent's sandbox (package sandbox)
// implements it.
type ProgramSandbox interface {
	// StartProgram starts spec.Argv confined: it reads the system
	// directories, spec.Dir and spec.ReadOnly, writes spec.Dir and
	// spec.Writable only, and reaches the network only as the sandbox
	// allows plus the host:port pairs of spec.NetworkAllow.
	StartProgram(ctx context.Context, spec ProgramSpec) (Program, error)
}

// ProgramSpec is one confined program of a ProgramSandbox.
type ProgramSpec struct {
	// Argv is the program (an absolute path) and its arguments.
	Argv []string
	// Dir is the working directory: readable and writable.
	Dir string
	// Env is the program's whole environment (the sandbox sets HOME and
	// TMPDIR to a private directory of its own).
	Env []string
	// ReadOnly lists further absolute paths the program may read (its
	// install).
	ReadOnly []string
	// Writable lists further existing directories the program may write
	// (its own state).
	Writable []string
	// NetworkAllow lists host:port pairs the program may reach besides
	// what the sandbox allows every command (the model's endpoint).
	NetworkAllow []string
}

// Program is a program started by a ProgramSandbox, reached through its
// standard streams.
type Program interface {
	// Stdin is the program's standard input.
	Stdin() io.WriteCloser
	// Stdout is the program's standard output; it ends when the program
	// has ended.
	Stdout() io.Reader
	// Stderr is what the program wrote to standard error, once it ended.
	Stderr() string
	// Stop ends the program: at once when kill is set, else by closing
	// its input and killing it after a grace period.
	Stop(kill bool)
	// Wait waits for the program to end; a non-zero exit, a signal or a
	// limit the sandbox enforced is an error saying which.
	Wait() error
	// Describe names how the program is confined, for the journal
	// ("sandboxed: userns, netns, landlock:v7").
	Describe() string
}
