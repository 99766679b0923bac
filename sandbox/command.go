package sandbox

import (
	"context"
	"path/filepath"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
)

// CommandSpec is one shell command of the built-in Bash tool.
type CommandSpec struct {
	Command   string        // run with bash -c
	Dir       string        // working directory; the only writable directory
	Env       []string      // extra KEY=VALUE entries
	Timeout   time.Duration // wall-clock limit (default 2 minutes)
	MaxOutput int           // cap on kept stdout (and on stderr), default 1 MiB
}

// CommandResult is the outcome of a CommandSpec.
type CommandResult struct {
	Stdout    string
	Stderr    string
	ExitCode  int
	TimedOut  bool
	Truncated bool
	// Status and Reason classify the end of the run (see Status).
	Status Status
	Reason string
}

// CommandRunner runs Bash tool commands in the sandbox: network cut, writes
// confined to Dir, rlimits applied. It has the shape of the Bash tool's
// command-runner interface so that runner.boundaries.sandbox can plug it in.
type CommandRunner struct {
	// Runner is the sandbox to run in.
	Runner *Runner
	// Limits are the rlimits of every command (zero fields: defaults,
	// except CPUSeconds, which follows the timeout).
	Limits Limits
	// ReadOnly lists extra paths commands may read.
	ReadOnly []string
}

// Run runs spec.Command with bash -c in the sandbox.
func (c *CommandRunner) Run(ctx context.Context, spec CommandSpec) (CommandResult, error) {
	if c.Runner == nil {
		return CommandResult{}, agenterr.New(agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "CommandRunner has no Runner")
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil {
		return CommandResult{}, err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return CommandResult{}, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSandbox, true, "working directory %q", spec.Dir)
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	limits := c.Limits
	if limits.CPUSeconds <= 0 {
		limits.CPUSeconds = int(timeout/time.Second) + 1
	}
	max := spec.MaxOutput
	if max <= 0 {
		max = 1 << 20
	}
	res, err := c.Runner.Run(ctx, Spec{
		Argv:      []string{"bash", "-c", spec.Command},
		Dir:       dir,
		Writable:  []string{dir},
		ReadOnly:  c.ReadOnly,
		Env:       spec.Env,
		Timeout:   timeout,
		Limits:    limits,
		MaxStdout: max,
		MaxStderr: max,
	})
	if err != nil {
		return CommandResult{}, err
	}
	return CommandResult{
		Stdout:    string(res.Stdout),
		Stderr:    res.Stderr,
		ExitCode:  res.ExitCode,
		TimedOut:  res.Status == StatusTimeout,
		Truncated: res.StdoutTruncated,
		Status:    res.Status,
		Reason:    res.Reason,
	}, nil
}
