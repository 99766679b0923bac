package sandbox

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/config"
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

// confinePATH drops PATH entries the sandbox cannot read (a pyenv shim
// directory in the caller's home would shadow the system interpreter and
// then fail with "Permission denied"); an empty result becomes the sandbox
// PATH.
func confinePATH(env, readable []string) []string {
	out := make([]string, 0, len(env))
	seen := false
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k != "PATH" {
			out = append(out, kv)
			continue
		}
		seen = true
		var keep []string
		for _, d := range filepath.SplitList(v) {
			if filepath.IsAbs(d) && under(filepath.Clean(d), readable) {
				keep = append(keep, d)
			}
		}
		if len(keep) == 0 {
			out = append(out, "PATH="+sandboxPATH)
		} else {
			out = append(out, "PATH="+strings.Join(keep, string(filepath.ListSeparator)))
		}
	}
	if !seen {
		out = append(out, "PATH="+sandboxPATH)
	}
	return out
}

// Run runs spec.Command with bash -c in the sandbox. The environment is
// spec.Env as given, except HOME and TMPDIR, which point to a private
// temporary directory, and PATH, from which directories the sandbox cannot
// read are dropped. A command that cannot start (sandbox unavailable,
// bad directory) is an error; exit codes, signals and timeouts are in the
// result.
func (c *CommandRunner) Run(ctx context.Context, spec tool.CommandSpec) (tool.CommandResult, error) {
	out, _, err := c.run(ctx, []string{"bash", "-c", spec.Command}, spec, true)
	return out, err
}

// RunArgv runs argv (no shell) in the sandbox like Run, but keeps stdout
// (the result's Output) apart from stderr (returned summarized, as
// Result.Stderr). Subprocess steps run their command with it.
func (c *CommandRunner) RunArgv(ctx context.Context, argv []string, spec tool.CommandSpec) (tool.CommandResult, string, error) {
	return c.run(ctx, argv, spec, false)
}

func (c *CommandRunner) run(ctx context.Context, argv []string, spec tool.CommandSpec, combined bool) (tool.CommandResult, string, error) {
	if c.Runner == nil {
		return tool.CommandResult{}, "", agenterr.New(agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "CommandRunner has no Runner")
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil {
		return tool.CommandResult{}, "", err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return tool.CommandResult{}, "", agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSandbox, true, "working directory %q", spec.Dir)
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
	readable := append(append([]string{dir}, c.Runner.cfg.SystemPaths...), c.ReadOnly...)
	res, err := c.Runner.Run(ctx, Spec{
		Argv:           argv,
		Dir:            dir,
		Writable:       []string{dir},
		ReadOnly:       c.ReadOnly,
		Env:            confinePATH(spec.Env, readable),
		ReplaceEnv:     true,
		Timeout:        timeout,
		Limits:         limits,
		MaxStdout:      maxOut,
		CombinedOutput: combined,
	})
	if err != nil {
		return tool.CommandResult{}, "", err
	}
	if ctx.Err() != nil {
		return tool.CommandResult{}, "", ctx.Err()
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
	stderr := res.Stderr
	if res.Status == StatusSandboxError || res.Status == StatusOutputLimit || res.Status == StatusCPULimit ||
		res.Status == StatusFileTooLarge || res.Status == StatusMemoryLimit || res.Status == StatusProcessLimit {
		// The Bash tool shows Output to the model; say what the sandbox did
		// (with separate streams, on stderr: stdout stays the program's).
		if combined {
			out.Output += "\n[sandbox: " + res.Reason + "]"
		} else {
			stderr += "\n[sandbox: " + res.Reason + "]"
		}
	}
	return out, stderr, nil
}

// NewCommandRunner returns the Bash runner for an agent's
// runner.boundaries.sandbox: nil (run unsandboxed, the default) when sb is
// nil or not enabled. When sandboxing is enabled but the machine cannot do
// it, it fails with SANDBOX_UNAVAILABLE — at build time, not at the first
// command — unless sb.AllowUnsandboxed opts out.
func NewCommandRunner(ctx context.Context, sb *config.Sandbox) (*CommandRunner, error) {
	if sb == nil || !sb.Enabled {
		return nil, nil
	}
	r := New(ctx, Config{Network: sb.Network, AllowUnsandboxed: sb.AllowUnsandboxed})
	if err := r.Capabilities().Unavailable(); err != nil && !sb.AllowUnsandboxed {
		if e := agenterr.From(err); e != nil {
			e.Pointer = "/runner/boundaries/sandbox"
			e.Hint += "; or set runner.boundaries.sandbox.allowUnsandboxed (explicit opt-out)"
		}
		return nil, err
	}
	return &CommandRunner{Runner: r}, nil
}
