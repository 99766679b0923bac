package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm/modelspec"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/testfix"
)

func newFixCmd() *cobra.Command {
	var flags runFlags
	var checks []string
	var printAgent string
	cmd := &cobra.Command{
		Use:   `fix "TASK" [--check CMD]... [--model M] [--workdir W] [--print-agent DIR]`,
		Short: "Do a task in a repository (\"make the failing tests pass\") until its tests pass, verified, with no agent folder",
		Long: `Do TASK in the git repository --workdir (default: the current directory)
with a model, and complete only when the repository's tests pass, no test that
ran before was lost, the tests were not changed and the work is committed.

capstan reads the repository's ecosystem and picks the test command that
names every test, and the files the model may not change:

  go.mod                                  go test -count=1 -v ./...
  pyproject.toml, pytest.ini, setup.cfg…  python3 -m pytest -v (pytest configured or
                                          required), else python3 -m unittest discover -v
  package.json with vitest / jest         npx --no-install vitest run --reporter=verbose /
                                          npx --no-install jest --ci --verbose
  Cargo.toml                              cargo test --no-fail-fast

--check adds a command that must pass (exit 0); --check 'tests=COMMAND'
replaces the test command (and a repository without a project file needs
it). When a declared fix fails a check, the model gets the retry prompt for
that failure only: the failing tests and their output, the uncommitted files,
the diff of a changed test, the tests that no longer run.

The model's Bash commands and the checks run in the sandbox. The run is
journaled like any other (capstan show RUN). --print-agent DIR writes the
same agent as an agent folder instead of running it, to edit and run with
capstan run DIR.

Exit codes as for capstan run: 0 completed; 1 ran but did not complete;
2 usage or configuration error; 3 provider or internal error; 4 the model
declared that the task cannot be done as specified; 130 interrupted by
Ctrl-C (the run is resumable: capstan resume RUN).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return withExit(exitUsage, fmt.Errorf(`fix: want one TASK argument, got %d (quote the task: capstan fix "make the failing tests pass")`, len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFix(cmd, args[0], flags, checks, printAgent)
		},
	}
	flags.register(cmd.Flags())
	cmd.Flags().StringArrayVar(&checks, "check", nil, "a command that must pass (repeatable); NAME=COMMAND names it, tests=COMMAND replaces the test command")
	cmd.Flags().StringVar(&printAgent, "print-agent", "", "write the agent as an agent folder DIR (for capstan run DIR) instead of running it")
	return cmd
}

// runFix builds the fix agent for the work dir and runs it, or writes it
// as a folder with --print-agent.
func runFix(cmd *cobra.Command, task string, flags runFlags, checkArgs []string, printAgent string) error {
	stderr := cmd.ErrOrStderr()
	if err := flags.checkValues(); err != nil {
		return withExit(exitUsage, err)
	}
	if err := checkWorkDirExists(flags.workDir); err != nil {
		return withExit(exitUsage, err)
	}
	if strings.TrimSpace(task) == "" {
		e := agenterr.New(agenterr.CodeUsage, agenterr.LayerConfiguration, false, "fix: the task is empty")
		e.Hint = `say what to do, e.g.: capstan fix "make the failing tests pass"`
		return withExit(exitUsage, e)
	}
	opts := testfix.Options{Task: task}
	for i, a := range checkArgs {
		c, err := testfix.ParseCheck(a, i+1)
		if err != nil {
			return fixUsageError(err)
		}
		opts.Checks = append(opts.Checks, c)
	}
	eco, err := testfix.Detect(flags.workDir)
	switch {
	case err == nil:
		opts.Ecosystem = &eco
	case errors.Is(err, testfix.ErrNoEcosystem):
	default:
		if !hasTestsCheck(opts.Checks) {
			return fixUsageError(err)
		}
	}
	model := flags.model
	if model == "" {
		model = os.Getenv("CAPSTAN_MODEL")
	}
	if provider, file := modelspec.Parse(model); provider == "script" && file != "" {
		// A script model's file is read from where the user named it and
		// becomes one of the agent's files.
		b, err := os.ReadFile(file)
		if err != nil {
			e := agenterr.Wrap(err, agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false,
				"fix: --model %s: cannot read the script file", model)
			e.File = file
			e.Hint = "name an existing script file, relative to the current directory or absolute (see docs/script-provider.md)"
			return withExit(exitUsage, e)
		}
		model, opts.Script = "script:"+filepath.Base(file), b
	}
	opts.Model, flags.model = model, model
	if printAgent == "" {
		if err := checkCommitIdentity(cmd.Context(), flags.workDir); err != nil {
			return withExit(exitUsage, err)
		}
	}
	cfg, err := testfix.Config(opts)
	if err != nil {
		return fixUsageError(err)
	}
	if printAgent != "" {
		if err := testfix.WriteFolder(cfg, printAgent); err != nil {
			e := agenterr.Wrap(err, agenterr.CodeUsage, agenterr.LayerConfiguration, false, "fix: --print-agent %s", printAgent)
			e.Hint = "name a new directory: " + fixRerun(cmd, task)("--print-agent", "fix-agent")
			return withExit(exitUsage, e)
		}
		wd, err := filepath.Abs(flags.workDir)
		if err != nil {
			return fixUsageError(err)
		}
		fmt.Fprintf(stderr, "wrote the agent to %s\n\nnext:\n  capstan validate %s\n  capstan run %s --workdir %s\n",
			printAgent, shellQuote(printAgent), shellQuote(printAgent), shellQuote(wd))
		return nil
	}
	// The agent is kept as a folder in the state directory, so that the
	// run is journaled, shown and resumed like a run of any agent folder.
	stateDir, err := journal.StateDir(os.Getenv)
	if err != nil {
		return fixUsageError(err)
	}
	dir, err := testfix.StoreFolder(cfg, filepath.Join(stateDir, "agents"))
	if err != nil {
		return withExit(exitInternal, fmt.Errorf("fix: %w", err))
	}
	def, err := agent.LoadPinned(dir, model)
	if err != nil {
		return configError(stderr, err, dir, false)
	}
	if err := applyUserDefaults(&flags, def, fixRerun(cmd, task)); err != nil {
		return withExit(exitUsage, err)
	}
	if !flags.quiet {
		describeFix(stderr, opts)
	}
	return executeRun(cmd.Context(), cmd, def, flags, nil, nil, nil)
}

// fixRerun returns the command that runs this capstan fix again with
// more flags (for a hint that asks for one).
func fixRerun(cmd *cobra.Command, task string) func(extra ...string) string {
	return func(extra ...string) string {
		parts := []string{"capstan", "fix", shellQuote(task)}
		cmd.Flags().Visit(func(f *pflag.Flag) {
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				for _, v := range sv.GetSlice() {
					parts = append(parts, "--"+f.Name, shellQuote(v))
				}
				return
			}
			parts = append(parts, "--"+f.Name+"="+shellQuote(f.Value.String()))
		})
		for _, a := range extra {
			parts = append(parts, shellQuote(a))
		}
		return strings.Join(parts, " ")
	}
}

func hasTestsCheck(checks []testfix.Check) bool {
	for _, c := range checks {
		if c.Name == testfix.TestsCheck {
			return true
		}
	}
	return false
}

// describeFix prints what the fix run checks, before it starts.
func describeFix(w interface{ Write([]byte) (int, error) }, o testfix.Options) {
	if e := o.Ecosystem; e != nil {
		fmt.Fprintf(w, "capstan fix: %s project (%s), tests run by %s\n", e.Language, e.Evidence, e.Runner)
		if len(e.Protect) > 0 {
			fmt.Fprintf(w, "  protected: %s\n", strings.Join(e.Protect, " "))
		}
	}
	tests := ""
	if o.Ecosystem != nil {
		tests = o.Ecosystem.TestCommand
	}
	for _, c := range o.Checks {
		if c.Name == testfix.TestsCheck {
			tests = c.Command
		}
	}
	if tests != "" {
		fmt.Fprintf(w, "  tests-pass: %s\n", tests)
	}
	for _, c := range o.Checks {
		if c.Name != testfix.TestsCheck {
			fmt.Fprintf(w, "  %s: %s\n", c.Name, c.Command)
		}
	}
	fmt.Fprintf(w, "  git-clean: git status --porcelain\n")
}

// fixUsageError is err, a problem of the fix command's flags, work dir or
// state directory found before anything runs, as a usage error (exit 2)
// with a code: err's own, else CONFIG_INVALID.
func fixUsageError(err error) error {
	switch e := agenterr.From(err); {
	case e == nil:
		err = agenterr.Wrap(err, agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false, "fix")
	case error(e) == err:
		e.Message = "fix: " + e.Message // the code stays first, as in every other error
	default:
		err = fmt.Errorf("fix: %w", err)
	}
	return withExit(exitUsage, err)
}

// checkCommitIdentity refuses, before anything runs, a work dir where
// git does not know who commits (no user.name and user.email in the
// repository, the user's configuration or GIT_AUTHOR_NAME, …): the fix
// agent completes only when its fix is committed, which the model's git
// commit could then never do.
func checkCommitIdentity(ctx context.Context, workDir string) error {
	dir, err := filepath.Abs(workDir)
	if err != nil {
		return fmt.Errorf("fix: %w", err)
	}
	git, err := proc.NewGit(os.Environ(), dir)
	if err != nil {
		return nil // the agent's own check reports a missing or unsafe git
	}
	if ident, local := git.CommitIdentity(ctx, dir, os.Environ()); local || ident != nil {
		return nil
	}
	e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
		"fix: git does not know who you are (user.name and user.email are not set), and capstan fix completes only when the fix is committed")
	e.Hint = "set them (once, for every repository) with: git config --global user.name 'Your Name' && git config --global user.email 'you@example.com'"
	return e
}
