package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/proc"

	"github.com/capstan-dev/capstan/tool"
)

// noWriteEnv are the variables a validator's command gets, unless its
// environment sets them, that keep test tools from writing caches into
// the work dir: Python's __pycache__ bytecode and pytest's .pytest_cache.
// Without them the first verification of a repository with no
// .gitignore finds files that capstan's own test run created, and
// git-clean fails for what the model never did.
//
// Nor does Python read the work dir's __pycache__: PYTHONPYCACHEPREFIX
// names a folder that cannot exist (a build cache, when the command has
// one, names its own instead). Python trusts a cached .pyc whose recorded
// source size and modification time match, so a model could compile a
// fix, put the broken source back with its old time stamp and have the
// tests run the fix from a git-ignored __pycache__ while git shows the
// source unchanged.
func noWriteEnv() []string {
	return []string{"PYTHONDONTWRITEBYTECODE=1", "PYTEST_ADDOPTS=-p no:cacheprovider", "PYTHONPYCACHEPREFIX=" + noBytecodeDir}
}

// noBytecodeDir is a path below a device, where no folder can be made or
// read.
const noBytecodeDir = "/dev/null/capstan-no-bytecode"

// withoutWorkTreeWrites is env with noWriteEnv added where env does not
// set the variable.
func withoutWorkTreeWrites(env []string) []string {
	for _, kv := range noWriteEnv() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			env = append(env, kv)
		}
	}
	return env
}

// withPathOutside drops from env's PATH the relative entries and those
// inside dir (the work dir): a program the command names (pytest, jest) is
// found outside what the model can write, never as a wrapper it put in a
// work-dir folder the user's PATH lists (./node_modules/.bin, bin/). A
// command that starts a program by its path (./node_modules/.bin/jest)
// still runs it; the runner defaults of the protected files cover those.
// dropped are the entries left out.
func withPathOutside(env []string, dir string) (_ []string, dropped []string) {
	if dir == "" {
		return env, nil
	}
	for i, kv := range env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			kept := proc.PathOutside(path, dir)
			env[i] = "PATH=" + kept
			keep := filepath.SplitList(kept)
			for _, d := range filepath.SplitList(path) {
				if d != "" && !slices.Contains(keep, d) {
					dropped = append(dropped, d)
				}
			}
		}
	}
	return env, dropped
}

// CommandSpec is one shell command to run for a validator.
type CommandSpec struct {
	Command   string
	Dir       string
	Timeout   time.Duration
	OutputCap int
	// Env is the allow-list on top of the minimal base environment (see
	// proc.ForCommands); commands never get capstan's whole environment.
	Env []string
	// Sandbox, when set, runs the command confined; nil runs it with the
	// user's rights.
	Sandbox CommandSandbox
	// Git, when set, reads the repository configuration of Dir whose
	// programs the command's git is kept from running; the fixed pins of
	// proc.GitConfigEnv apply either way.
	Git *proc.Git
	// Report, when set, receives the whole standard output as it comes
	// (the output cap does not apply to it), and a command that runs
	// pytest is asked for its JUnit XML report there (PYTEST_ADDOPTS).
	Report io.Writer
}

// CommandSandbox runs a command confined. *sandbox.CommandRunner
// implements it: built from the agent's runner.boundaries.sandbox, it
// gives a command what the Bash tool gets (the work dir writable, the
// system directories readable, nothing else; the run's network setting;
// every process ended when it returns).
type CommandSandbox interface {
	// RunStreams runs argv in spec.Dir with spec.Env, writing its standard
	// output and error to stdout and stderr as they come. A timeout is a
	// result (TimedOut); an error means nothing could be run or ctx ended.
	RunStreams(ctx context.Context, argv []string, spec tool.CommandSpec, stdout, stderr io.Writer) (tool.CommandResult, error)
}

// RunCommand runs spec.Command with sh -c in spec.Dir — in spec.Sandbox
// when one is set, else in its own process group — keeping at most
// OutputCap bytes of each stream: its first and its last half, joined by
// a line that says how many bytes were left out between them. At the timeout every process it started
// is killed and TimedOut is set; that is a result, not an error. Errors
// are a command that could not start (a sandbox that cannot be set up
// included: a command never falls back to running unconfined) or a
// canceled ctx.
func RunCommand(ctx context.Context, spec CommandSpec) (event.ValidatorOutput, error) {
	if spec.Timeout <= 0 {
		spec.Timeout = DefaultValidatorTimeout
	}
	if spec.OutputCap <= 0 {
		spec.OutputCap = DefaultOutputCap
	}
	secrets := proc.SecretValues(os.Environ())
	stdout, stderr := newCapture(spec.OutputCap, secrets), newCapture(spec.OutputCap, secrets)
	// The command's git runs nothing the repository's configuration
	// names (a model-written core.fsmonitor or filter in .git/config);
	// the pins come after the allow-list, so it cannot unset them.
	env := append(withoutWorkTreeWrites(proc.ForCommands(os.Environ(), spec.Env)), proc.GitConfigEnv(ctx, spec.Git, spec.Dir)...)
	env, droppedPath := withPathOutside(env, spec.Dir)
	var stdoutW io.Writer = stdout
	if spec.Report != nil {
		stdoutW = io.MultiWriter(stdout, spec.Report)
		if runsPytest(spec.Command) {
			env = withPytestReport(env)
		}
	}
	start := time.Now()
	run := runUnconfined
	if spec.Sandbox != nil {
		run = runConfined
	}
	exitCode, timedOut, err := run(ctx, spec, env, stdoutW, stderr)
	out := event.ValidatorOutput{
		Stdout:     stdout.String(),
		Stderr:     stderr.String(),
		Truncated:  stdout.truncated() || stderr.truncated(),
		DurationMs: time.Since(start).Milliseconds(),
		ExitCode:   exitCode,
	}
	if ctx.Err() != nil {
		return out, agenterr.Wrap(ctx.Err(), agenterr.CodeCanceled, agenterr.LayerCompletion, false, "validator command canceled")
	}
	if err != nil {
		return out, err
	}
	if timedOut {
		out.TimedOut = true
		out.Stderr += fmt.Sprintf("\n[capstan: command killed after timeout of %s]", spec.Timeout)
	}
	if exitCode == 127 && len(droppedPath) > 0 {
		// sh's "not found": perhaps the program is only in a work-dir
		// folder of the PATH.
		out.Stderr += fmt.Sprintf("\n[capstan: validators do not search the PATH entries inside the work dir or relative ones (%s): "+
			"start a program there by its path, e.g. ./node_modules/.bin/jest or .venv/bin/pytest]", strings.Join(droppedPath, ", "))
	}
	return out, nil
}

// runUnconfined runs the command as the user under the
// supervisor, which kills everything the command started — also what left
// its process group, and also when capstan itself is killed — at the
// timeout, on cancel and when the command ends; in a process without the
// supervisor (proc.InitSupervisor not called), in a new process group killed
// at the timeout.
func runUnconfined(ctx context.Context, spec CommandSpec, env []string, stdout, stderr io.Writer) (exitCode int, timedOut bool, err error) {
	if !proc.SupervisorAvailable() {
		return runInProcessGroup(ctx, spec, env, stdout, stderr)
	}
	sup, err := proc.Supervise(proc.SupervisedSpec{Argv: []string{"sh", "-c", spec.Command}, Env: env, Dir: spec.Dir})
	if err != nil {
		return 0, false, err
	}
	sup.Cmd.Stdout, sup.Cmd.Stderr = stdout, stderr
	sup.Cmd.WaitDelay = 2 * time.Second
	if err := sup.Start(); err != nil {
		return 0, false, err
	}
	waited := make(chan struct{})
	go func() {
		_ = sup.Cmd.Wait()
		close(waited)
	}()
	stop := func() {
		sup.Stop()
		select {
		case <-waited:
		case <-time.After(2 * time.Second):
			_ = killProcessGroup(sup.Cmd)
			<-waited
		}
	}
	timer := time.NewTimer(spec.Timeout)
	defer timer.Stop()
	select {
	case <-waited:
	case <-timer.C:
		timedOut = true
		stop()
	case <-ctx.Done():
		stop()
	}
	st := sup.Status()
	switch {
	case !st.Started && st.Error != "":
		return -1, timedOut, errors.New(st.Error)
	case st.Signal != 0:
		return -1, timedOut, nil
	}
	return st.ExitCode, timedOut, nil
}

// runInProcessGroup runs the command as the user, in a new process group
// killed at the timeout.
func runInProcessGroup(ctx context.Context, spec CommandSpec, env []string, stdout, stderr io.Writer) (exitCode int, timedOut bool, err error) {
	tctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, "sh", "-c", spec.Command)
	cmd.Dir = spec.Dir
	cmd.Env = env
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return killProcessGroup(cmd) }
	cmd.WaitDelay = 2 * time.Second
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	if cmd.ProcessState != nil {
		exitCode = cmd.ProcessState.ExitCode()
	}
	if tctx.Err() != nil && ctx.Err() == nil {
		return exitCode, true, nil
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && !errors.Is(err, exec.ErrWaitDelay) {
		return exitCode, false, err
	}
	return exitCode, false, nil
}

// runConfined runs the command in spec.Sandbox.
func runConfined(ctx context.Context, spec CommandSpec, env []string, stdout, stderr io.Writer) (exitCode int, timedOut bool, err error) {
	res, err := spec.Sandbox.RunStreams(ctx, []string{"sh", "-c", spec.Command},
		tool.CommandSpec{Dir: spec.Dir, Env: env, Timeout: spec.Timeout}, stdout, stderr)
	if err != nil {
		return -1, false, err
	}
	return res.ExitCode, res.TimedOut, nil
}
