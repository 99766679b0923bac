package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/proc"
)

// agentDirArg finds DIR among raw args and returns it with the other
// args. Flags may come before DIR: capstan's own value flags take their
// value, and of the remaining words the first that is an agent folder (it
// holds agent.json) is DIR, so "run --name bob examples/hello" reads DIR
// as examples/hello. Without such a folder, the first word is DIR (and
// loading it reports what is wrong). Put DIR first when a parameter's
// value is itself an agent folder.
func agentDirArg(args []string) (string, []string) {
	without := func(i, n int) []string { return append(append([]string{}, args[:i]...), args[i+n:]...) }
	first := -1
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1], without(i, 2)
			}
			return "", args
		case isValueFlag(a):
			i++ // skip the flag's value
		case !strings.HasPrefix(a, "-"):
			if isAgentDir(a) {
				return a, without(i, 1)
			}
			if first < 0 {
				first = i
			}
		}
	}
	if first >= 0 {
		return args[first], without(first, 1)
	}
	return "", args
}

// runOwnFlags is the flag set of run as runFlags registers it, read by
// isValueFlag so that the words it skips are exactly run's own value
// flags.
var runOwnFlags = sync.OnceValue(func() *pflag.FlagSet {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var f runFlags
	f.registerRun(fs)
	registerAccept(fs, &f.acceptChanged)
	return fs
})

// runOwnFlag is run's own flag that the word a names (--name, or -x for
// a shorthand), nil when a is not one (an agent parameter, a value, or
// --name=value, whose value is in the word).
func runOwnFlag(a string) *pflag.Flag {
	if name, ok := strings.CutPrefix(a, "--"); ok {
		if name == "" || strings.Contains(name, "=") {
			return nil
		}
		return runOwnFlags().Lookup(name)
	}
	if len(a) == 2 && a[0] == '-' {
		return runOwnFlags().ShorthandLookup(a[1:])
	}
	return nil
}

// isValueFlag reports whether a is one of capstan's own flags of run that
// takes its value as the next argument.
func isValueFlag(a string) bool {
	f := runOwnFlag(a)
	return f != nil && f.NoOptDefVal == ""
}

// mistypedFlagBeforeDir reports a flag before dir that is neither one of
// run's own nor can be the agent's (dir is no agent folder, so the agent's
// parameters are not known) but is close to one of run's: "run --modle x"
// reads x as DIR, and the user meant --model.
func mistypedFlagBeforeDir(args []string, dir string) error {
	if isAgentDir(dir) {
		return nil
	}
	for _, a := range args {
		if a == dir || a == "--" {
			return nil
		}
		name, ok := strings.CutPrefix(a, "--")
		if !ok || runOwnFlag(a) != nil {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if near := nearestFlag(runOwnFlags(), name); near != "" {
			return fmt.Errorf("unknown flag: --%s; did you mean --%s? (and %q is no agent folder)", name, near, dir)
		}
	}
	return nil
}

// isAgentDir reports whether dir holds an agent definition.
func isAgentDir(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "agent.json"))
	return err == nil && !fi.IsDir()
}

// completeRunArgs completes `capstan run`: agent folders for DIR, then
// the agent's parameter flags (cobra completes the flags cmd declares).
func completeRunArgs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	dir, _ := agentDirArg(args)
	if len(args) > 0 && isValueFlag(args[len(args)-1]) {
		if args[len(args)-1] == "--workdir" {
			return nil, cobra.ShellCompDirectiveFilterDirs
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if !strings.HasPrefix(toComplete, "-") {
		if dir == "" {
			return nil, cobra.ShellCompDirectiveFilterDirs
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var flags runFlags
	flags.registerRun(fs)
	if dir != "" {
		if def, err := agentdir.LoadAndValidate(dir, agent.ValidateOptions()); err == nil {
			registerParamFlags(fs, def)
		}
	}
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		name := "--" + f.Name
		if cmd.Flags().Lookup(f.Name) == nil && strings.HasPrefix(name, toComplete) {
			out = append(out, name+"\t"+f.Usage)
		}
	})
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// gitCommand matches a command line that runs git.
var gitCommand = lazyre.New(`(^|[;&|(]\s*)git(\s|$)`)

// checkGitWorkDir refuses to run an agent whose validators run git in a
// work dir that is not inside a git work tree: git would fail there, and
// every verdict that reads it would be wrong. git is the one a PATH entry
// outside the work dir provides, run with the configuration the model
// cannot steer (proc.Git): a git planted in the work dir is refused.
func checkGitWorkDir(ctx context.Context, def *agentdir.Agent, workDir string) error {
	var names []string
	for name, v := range def.Registry().Validators {
		if v.Type == "command" && gitCommand().MatchString(strings.TrimSpace(v.Command)) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	abs, _ := filepath.Abs(workDir)
	git, err := proc.NewGit(os.Environ(), abs)
	if err != nil && !proc.IsProgramNotFound(err) {
		return err
	}
	if git != nil {
		out, err := git.Output(ctx, workDir, "rev-parse", "--is-inside-work-tree")
		if err == nil && strings.TrimSpace(string(out)) == "true" {
			return nil
		}
	}
	e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
		"work dir %s is not a git repository, but the agent's validator(s) %s run git there", abs, strings.Join(names, ", "))
	e.Hint = fmt.Sprintf("pass --workdir with a git repository, or make this one: git -C %s init", shellQuote(abs))
	if _, err := os.Stat(abs); err != nil {
		e.Hint = fmt.Sprintf("pass --workdir with a git repository, or make this one: git init %s", shellQuote(abs))
	}
	return e
}

// checkWorkDirExists refuses a work dir that is not an existing
// directory before anything runs: a usage error whose hint creates it.
func checkWorkDirExists(workDir string) error {
	abs, err := filepath.Abs(workDir)
	if err != nil {
		abs = workDir
	}
	st, err := os.Stat(abs)
	if err == nil && st.IsDir() {
		return nil
	}
	if err == nil {
		e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "work dir %s is not a directory", abs)
		e.Hint = "pass a directory with --workdir"
		return e
	}
	e := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "work dir %s does not exist", abs)
	e.Hint = fmt.Sprintf("create it first (mkdir -p %s) or pass an existing directory with --workdir", shellQuote(abs))
	return e
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// announceWorkDir says where the agent will act, before anything runs.
func announceWorkDir(w io.Writer, workDir string) {
	abs, err := filepath.Abs(workDir)
	if err != nil {
		abs = workDir
	}
	fmt.Fprintf(w, "work dir %s\n", abs)
}
