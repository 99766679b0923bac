package sandbox

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/proc"
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
	// except CPUSeconds, which follows the timeout, and Processes, 256).
	Limits Limits
	// ReadOnly lists extra absolute paths commands may read (the system
	// directories and the work dir are always readable).
	ReadOnly []string
	// Cache, when set, is the build cache the commands share (see Cache):
	// writable until it is sealed, copied for each command after. Only
	// command validators get one; the Bash tool's commands never reach
	// it.
	Cache *Cache
}

var _ tool.CommandRunner = (*CommandRunner)(nil)

// commandProcesses is the default process limit of a command (threads
// count): a build tool runs a compiler per core, each with a thread per
// core (go build with GOMAXPROCS=16 needs about 100).
const commandProcesses = 256

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

// confineToolchainDirs drops the toolchain variables (proc.Toolchains)
// that name a directory the sandbox cannot use — a VIRTUAL_ENV or GOROOT
// it cannot read, a GOCACHE or CARGO_HOME it cannot write (only the work
// dir is writable) — and the entries of a PYTHONPATH or NODE_PATH it
// cannot read: the toolchain then falls back to its own default (under the
// private HOME) instead of failing.
func confineToolchainDirs(env, readable, writable []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		tv, ok := proc.LookupToolchainVar(k)
		switch {
		case !ok || tv.Kind == proc.VarSetting:
			out = append(out, kv)
		case tv.Kind == proc.VarDir:
			if filepath.IsAbs(v) && under(filepath.Clean(v), readable) {
				out = append(out, kv)
			}
		case tv.Kind == proc.VarCacheDir:
			if filepath.IsAbs(v) && under(filepath.Clean(v), writable) {
				out = append(out, kv)
			}
		case tv.Kind == proc.VarDirList:
			var keep []string
			for _, d := range filepath.SplitList(v) {
				if filepath.IsAbs(d) && under(filepath.Clean(d), readable) {
					keep = append(keep, d)
				}
			}
			if len(keep) > 0 {
				out = append(out, k+"="+strings.Join(keep, string(filepath.ListSeparator)))
			}
		}
	}
	return out
}

// goModCache is the Go module cache the user's go commands read (env's
// GOMODCACHE, else the go env file's, else the first GOPATH entry's
// pkg/mod, else ~/go/pkg/mod), when it exists outside the work dir: the
// sandbox lets commands read it, never write it, so a module's tests
// build from the dependencies already downloaded (the sandbox has no
// network to download them) and nothing the model runs can change the
// sources the user's own builds use. "" when there is none.
func goModCache(env []string, workDir string) string {
	get := func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v
			}
		}
		return ""
	}
	file := goEnvFile(get("GOENV"))
	dir := get("GOMODCACHE")
	if dir == "" {
		dir = file["GOMODCACHE"]
	}
	if dir == "" {
		gopath := get("GOPATH")
		if gopath == "" {
			gopath = file["GOPATH"]
		}
		if first, _, _ := strings.Cut(gopath, string(filepath.ListSeparator)); first != "" {
			dir = filepath.Join(first, "pkg", "mod")
		} else if home := get("HOME"); home != "" {
			dir = filepath.Join(home, "go", "pkg", "mod")
		}
	}
	if !filepath.IsAbs(dir) {
		return ""
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	if wd, err := filepath.EvalSymlinks(workDir); err != nil || under(real, []string{wd}) {
		return ""
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return ""
	}
	return real
}

// goEnvFile reads the KEY=VALUE lines of the go env file at path (the
// copy pinned at the run's start that GOENV names; nil when unset or
// unreadable).
func goEnvFile(path string) map[string]string {
	if path == "" || path == "off" || !filepath.IsAbs(path) {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			out[k] = v
		}
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

// RunStreams runs argv (no shell) in the sandbox like RunArgv, but writes
// its standard output and standard error to stdout and stderr as they come
// (the writers decide what to keep; printing much does not end the run).
// The result's Output is empty. A limit the sandbox enforced other than the
// timeout is reported on stderr ("[sandbox: …]"). Command validators run
// with it.
func (c *CommandRunner) RunStreams(ctx context.Context, argv []string, spec tool.CommandSpec, stdout, stderr io.Writer) (tool.CommandResult, error) {
	s, cleanup, err := c.spec(ctx, argv, spec)
	if err != nil {
		return tool.CommandResult{}, err
	}
	defer cleanup()
	s.Stdout, s.Stderr = stdout, stderr
	res, err := c.Runner.Run(ctx, s)
	if err != nil {
		return tool.CommandResult{}, err
	}
	if ctx.Err() != nil {
		return tool.CommandResult{}, ctx.Err()
	}
	out := commandResult(res)
	if note := limitNote(res); note != "" {
		_, _ = io.WriteString(stderr, "\n"+note)
	}
	return out, nil
}

// spec is the sandbox Spec of argv run for a command spec: the working
// directory (symbolic links resolved) is the only writable directory
// besides the cache (c.Cache, made here when it is lazy and this is its
// first command), the environment is spec.Env with PATH
// confined, and the CPU limit follows the timeout unless c.Limits sets
// one. cleanup, to call after the run, removes what spec made for it.
func (c *CommandRunner) spec(ctx context.Context, argv []string, spec tool.CommandSpec) (s Spec, cleanup func(), err error) {
	if c.Runner == nil {
		return Spec{}, nil, agenterr.New(agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "CommandRunner has no Runner")
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil {
		return Spec{}, nil, err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return Spec{}, nil, agenterr.Wrap(err, agenterr.CodeToolInput, agenterr.LayerSandbox, true, "working directory %q", spec.Dir)
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = defaultCommandTimeout
	}
	limits := c.Limits
	if limits.CPUSeconds <= 0 {
		limits.CPUSeconds = int(timeout/time.Second) + 1
	}
	if limits.Processes <= 0 {
		limits.Processes = commandProcesses
	}
	maxOut := spec.MaxOutput
	if maxOut <= 0 {
		maxOut = 1 << 20
	}
	readOnly := slices.Clone(c.ReadOnly)
	modCache := goModCache(spec.Env, dir)
	if modCache != "" {
		readOnly = append(readOnly, modCache)
	}
	readable := append(append([]string{dir}, c.Runner.cfg.SystemPaths...), readOnly...)
	env := confineToolchainDirs(confinePATH(spec.Env, readable), readable, []string{dir})
	if modCache != "" {
		env = append(env, "GOMODCACHE="+modCache)
	}
	s = Spec{
		Argv:       argv,
		Dir:        dir,
		Writable:   []string{dir},
		ReadOnly:   readOnly,
		Env:        env,
		ReplaceEnv: true,
		Timeout:    timeout,
		Limits:     limits,
		MaxStdout:  maxOut,
	}
	cleanup = func() {}
	if c.Cache != nil {
		if cleanup, err = c.Cache.apply(ctx, &s); err != nil {
			return Spec{}, nil, err
		}
	}
	return s, cleanup, nil
}

func (c *CommandRunner) run(ctx context.Context, argv []string, spec tool.CommandSpec, combined bool) (tool.CommandResult, string, error) {
	s, cleanup, err := c.spec(ctx, argv, spec)
	if err != nil {
		return tool.CommandResult{}, "", err
	}
	defer cleanup()
	s.CombinedOutput = combined
	res, err := c.Runner.Run(ctx, s)
	if err != nil {
		return tool.CommandResult{}, "", err
	}
	if ctx.Err() != nil {
		return tool.CommandResult{}, "", ctx.Err()
	}
	out := commandResult(res)
	stderr := res.Stderr
	if note := limitNote(res); note != "" {
		// The Bash tool shows Output to the model; say what the sandbox did
		// (with separate streams, on stderr: stdout stays the program's).
		if combined {
			out.Output += "\n" + note
		} else {
			stderr += "\n" + note
		}
	}
	return out, stderr, nil
}

// commandResult is a sandbox Result as a tool.CommandResult: a run the
// sandbox killed (timeout, output limit) has exit code -1 and a signal.
func commandResult(res Result) tool.CommandResult {
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
	return out
}

// limitNote says which limit other than the timeout ended a run
// ("[sandbox: …]"), "" when none did.
func limitNote(res Result) string {
	switch res.Status {
	case StatusSandboxError, StatusOutputLimit, StatusCPULimit, StatusFileTooLarge, StatusMemoryLimit, StatusProcessLimit, StatusDiskLimit:
		return "[sandbox: " + res.Reason + "]"
	}
	return ""
}

// validatorLimits are the resource limits of command validators in the
// sandbox: a test suite compiles, links and runs programs, which the
// limits of one Bash command are too tight for (the Go compiler alone
// reserves more than 1 GiB of address space). The files, network and
// environment a validator reaches are the Bash tool's; only these bounds
// are larger. CPUSeconds follows the validator's timeout.
var validatorLimits = Limits{MemoryMB: 4096, Processes: 512, FileSizeMB: 1024, OpenFiles: 4096}

// ValidatorLimits are the resource limits of command validators in the
// sandbox: a test suite compiles, links and runs programs, which the
// limits of one Bash command are too tight for (the Go compiler alone
// reserves more than 1 GiB of address space). The files, network and
// environment a validator reaches are the Bash tool's; only these bounds
// are larger. CPUSeconds follows the validator's timeout.
// It returns a copy: changing it changes nothing else.
func ValidatorLimits() Limits {
	return validatorLimits
}

// WithLimits returns a CommandRunner that runs in the same sandbox, with
// the same readable paths and cache, under limits.
func (c *CommandRunner) WithLimits(limits Limits) *CommandRunner {
	cp := *c
	cp.Limits = limits
	return &cp
}

// WithCache returns a CommandRunner that runs in the same sandbox, with
// the same readable paths and limits, sharing cache (nil: none).
func (c *CommandRunner) WithCache(cache *Cache) *CommandRunner {
	cp := *c
	cp.Cache = cache
	return &cp
}

// OptOutHint says how an agent opts out of the sandbox in agent.json.
const OptOutHint = `or run unsandboxed on purpose: set "runner": {"boundaries": {"sandbox": {"enabled": false}}} in agent.json, or pass --no-sandbox to capstan run`

// NewCommandRunner returns the sandbox runner for an agent's
// runner.boundaries.sandbox: nil (run unsandboxed) only when sb opts out
// with "enabled": false — an agent that says nothing is sandboxed. When the
// machine cannot sandbox it fails with SANDBOX_UNAVAILABLE, naming what is
// missing and how to opt out — at build time, not at the first command —
// unless sb.AllowUnsandboxed opts out of that check.
func NewCommandRunner(ctx context.Context, sb *agentdir.Sandbox) (*CommandRunner, error) {
	if !sb.On() {
		return nil, nil
	}
	var cfg Config
	if sb != nil {
		cfg = Config{Network: sb.Open(), NetworkAllow: sb.AllowList(), AllowUnsandboxed: sb.AllowUnsandboxed}
	}
	if _, err := newAllowList(cfg.NetworkAllow); err != nil {
		e := agenterr.Wrap(err, agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false, "runner.boundaries.sandbox.network.allow")
		e.Pointer = "/runner/boundaries/sandbox/network/allow"
		e.Hint = "write each entry as host:port, e.g. api.example.com:443 or 127.0.0.1:8080"
		return nil, e
	}
	r := New(ctx, cfg)
	if err := r.Capabilities().Unavailable(); err != nil && !cfg.AllowUnsandboxed {
		if e := agenterr.From(err); e != nil {
			e.Pointer = "/runner/boundaries/sandbox"
			e.Hint += "; " + OptOutHint
		}
		return nil, err
	}
	return &CommandRunner{Runner: r}, nil
}
