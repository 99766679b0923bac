// Command capstan runs autonomous LLM agents whose completion is verified,
// not declared. See the README for the agent file formats and commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/sandbox"
)

// Exit codes (DESIGN.md): 0 completed; 1 ran but did not complete; 2 usage or
// configuration error; 3 provider or internal error; 4 (run) the model
// declared that the task cannot be done as specified; 5 (run, resume) the
// run stopped for a human to approve or reject the model's request to
// change protected files (capstan approve / reject); 128 + the signal's
// number when Ctrl-C or SIGTERM interrupted the command (exitSignaled).
const (
	exitOK             = 0
	exitNotCompleted   = 1
	exitUsage          = 2
	exitInternal       = 3
	exitCannotComplete = 4
)

// withCode is err as printed: with the code of its exit (USAGE,
// INTERNAL) in front when it carries no code of its own, as --json names
// it.
func withCode(err error, exit int) string {
	if agenterr.From(err) != nil || (exit != exitUsage && exit != exitInternal) {
		return err.Error()
	}
	return fallbackCode(exit) + ": " + err.Error()
}

// exitError carries a process exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withExit wraps err so main exits with code; a nil err stays nil unless
// code is non-zero.
func withExit(code int, err error) error {
	if err == nil && code == exitOK {
		return nil
	}
	return &exitError{code: code, err: err}
}

func newRootCmd() *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:           "capstan",
		Short:         "Run LLM agents whose completion is verified, not declared",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noSubcommand,
		// --version prints what `capstan version` prints. (cobra's own
		// Version field renders through text/template, which would keep
		// every exported method of every type in the binary.)
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				currentVersion().print(cmd.OutOrStdout())
				return nil
			}
			return cmd.Help()
		},
	}
	root.Flags().BoolVar(&showVersion, "version", false, "print the version (as capstan version does)")
	root.AddCommand(subcommands()...)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return flagError(c.Flags(), err) })
	return root
}

func main() {
	// A sandboxed skill script or command re-executes this binary as the
	// sandbox helper; Init runs it and exits (it returns at once otherwise).
	sandbox.Init()
	os.Exit(runProcess(os.Args[1:]))
}

// runProcess runs the CLI as the capstan process: protected from the
// commands it starts, and leaving none of their processes behind — every
// process a command orphaned (validators, MCP servers, even after setsid)
// was adopted by capstan and is killed before it exits.
func runProcess(args []string) int {
	protectProcess()
	if err := proc.AdoptOrphans(); err != nil {
		fmt.Fprintln(os.Stderr, "capstan: warning: cannot adopt orphaned processes:", err)
	}
	code := runMain(args)
	proc.KillChildren()
	return code
}

// protectProcess keeps capstan's secrets and descriptors away from the
// commands it runs for the model: the environment block that
// /proc/<pid>/environ shows keeps only what those commands get by default
// (proc.KeptInOwnBlock) — every other value is wiped, a credential
// under a name no rule knows included (capstan keeps its own copy) —, the
// process becomes non-dumpable (its /proc/<pid>/mem closes to
// children of the same user), CAP_SYS_PTRACE leaves the bounding set, and
// inherited descriptors above 2 become close-on-exec.
func protectProcess() {
	if _, err := proc.ProtectSelf(wipedFromOwnBlock); err != nil {
		fmt.Fprintln(os.Stderr, "capstan: warning: process protection incomplete:", err)
	}
}

// wipedFromOwnBlock says which values protectProcess wipes from
// capstan's environment block: all but those it keeps.
func wipedFromOwnBlock(name, value string) bool { return !proc.KeptInOwnBlock(name, value) }

// runMain runs the CLI as a process does: the first Ctrl-C (SIGINT) or
// SIGTERM cancels the run, which stops cleanly with its journal intact
// (resumable), and the process exits as shells expect of an interrupted
// program: 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM)
// unless the command still succeeded. A second signal kills the process
// at once.
func runMain(args []string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	received := make(chan syscall.Signal, 1)
	go func() {
		s, ok := <-signals
		if !ok {
			return
		}
		signal.Stop(signals) // restore the default: the next signal terminates
		if sig, isSig := s.(syscall.Signal); isSig {
			received <- sig
		}
		cancel()
	}()
	code := execute(ctx, args)
	signal.Stop(signals)
	select {
	case sig := <-received:
		if code != exitOK {
			return exitSignaled(sig)
		}
	default:
	}
	return code
}

// exitSignaled is the exit code of a command a signal interrupted.
func exitSignaled(sig syscall.Signal) int { return 128 + int(sig) }

// execute runs the CLI with args and returns the process exit code. A
// command given --json that fails before printing its JSON prints the
// error as JSON on stdout (errorJSON).
func execute(ctx context.Context, args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	stdout := &watchedWriter{w: os.Stdout}
	root.SetOut(stdout)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitUsage
	var ee *exitError
	var pe *printedError
	switch {
	case errors.As(err, &ee):
		code, err = ee.code, ee.err
		if err != nil && !errors.As(err, &pe) {
			fmt.Fprintln(os.Stderr, "capstan:", withCode(err, code))
		}
	case cmd != nil && cmd != root:
		// cobra's own errors (unknown command, bad flag, wrong number of
		// arguments) are usage errors; the command's usage line says what
		// it takes, and its help every flag.
		e := agenterr.New(agenterr.CodeUsage, agenterr.LayerLifecycle, false, "%s (usage: %s)", err, cmd.UseLine())
		e.Hint = "see its arguments and flags with: " + cmd.CommandPath() + " --help"
		err = e
		fmt.Fprintln(os.Stderr, "capstan:", err)
	default:
		fmt.Fprintln(os.Stderr, "capstan:", withCode(err, code))
	}
	if !stdout.written && wantsJSON(cmd, args) {
		writeErrorJSON(os.Stdout, err, code)
	}
	return code
}
