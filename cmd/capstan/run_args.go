package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/hostcmd"
	"github.com/capstan-dev/capstan/internal/lazyre"
)

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
// cannot steer (hostcmd.Git): a git planted in the work dir is refused.
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
	git, err := hostcmd.NewGit(os.Environ(), abs)
	if err != nil && !hostcmd.IsNotFound(err) {
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
