package sandbox

import (
	"context"
	"path/filepath"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// CommandRunner is a tool.CommandRunner that runs the Bash tool's commands
// in the sandbox: network cut, writes confined to the command's working
// directory (the agent's work dir) plus a private HOME/TMPDIR, rlimits
// applied, every process gone when Run returns. Plug it into the built-in
// tools for runner.boundaries.sandbox.
type CommandRunner struct {
	// Runner is the sandbox to run in.
	Runner *Runner
	// Limits are the rlimits of every command (zero fields: defaults,
	// except CPUSeconds, which follows the timeout).
	Limits Limits
	// ReadOnly lists extra absolute paths commands may read (the system
	// directories and the work dir are always readable).
	ReadOnly []string
}

var _ tool.CommandRunner = (*CommandRunner)(nil)

// defaultCommandTimeout bounds a command whose spec has no timeout.
const defaultCommandTimeout = 10 * time.Minute

// Run runs spec.Command with bash -c in the sandbox. The environment is
// spec.Env as given, except HOME and TMPDIR, which point to a private
// temporary directory. A command that cannot start (sandbox unavailable,
// bad directory) is an error; exit codes, signals and timeouts are in the
// result.
func (c *CommandRunner) Run(ctx context.Context, spec tool.CommandSpec) (tool.CommandResult, error) {
	if c.Runner == nil {
		return tool.CommandResult{}, agenterr.New(agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "CommandRunner has no Runner")
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil {
		return tool.CommandResult{}, err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return tool.CommandResult{}, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSandbox, true, "working directory %q", spec.Dir)
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = defaultCommandTimeout
	}
	limits := c.Limits
	if limits.CPUSeconds <= 0 {
		limits.CPUSeconds = int(timeout/time.Second) + 1
	}
	maxOut := spec.MaxOutput
	if maxOut <= 0 {
		maxOut = 1 << 20
	}
	res, err := c.Runner.Run(ctx, Spec{
		Argv:           []string{"bash", "-c", spec.Command},
		Dir:            dir,
		Writable:       []string{dir},
		ReadOnly:       c.ReadOnly,
		Env:            spec.Env,
		ReplaceEnv:     true,
		Timeout:        timeout,
		Limits:         limits,
		MaxStdout:      maxOut,
		CombinedOutput: true,
	})
	if err != nil {
		return tool.CommandResult{}, err
	}
	if ctx.Err() != nil {
		return tool.CommandResult{}, ctx.Err()
	}
	out := tool.CommandResult{
		Output:     string(res.Stdout),
		ExitCode:   res.ExitCode,
		Signal:     res.Signal,
		TimedOut:   res.Status == StatusTimeout,
		Truncated:  res.StdoutTruncated,
		TotalBytes: res.OutputBytes,
		Duration:   res.Duration,
	}
	if res.Status == StatusTimeout || res.Status == StatusOutputLimit {
		out.ExitCode = -1
		if out.Signal == "" {
			out.Signal = "SIGKILL"
		}
	}
	if res.Status == StatusSandboxError || res.Status == StatusOutputLimit || res.Status == StatusCPULimit ||
		res.Status == StatusFileTooLarge || res.Status == StatusMemoryLimit {
		// The Bash tool shows Output to the model; say what the sandbox did.
		out.Output += "\n[sandbox: " + res.Reason + "]"
	}
	return out, nil
}
