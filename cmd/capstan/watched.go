package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/runreport"
)

// registerAccept adds --accept-changed-definition to fs.
func registerAccept(fs *pflag.FlagSet, accept *bool) {
	fs.BoolVar(accept, acceptChangedFlag, false, "accept the changes shown of an agent folder or MCP server files inside the work dir since the last run recorded them")
}

// acceptChangedFlag is the flag that accepts a changed definition.
const acceptChangedFlag = "accept-changed-definition"

// checkWatched compares what of the run the model could have written (an
// agent folder inside the work dir, MCP server files inside it) with what
// the last run of the agent in that work dir recorded, and records it for
// the next run. A change is printed to w as a diff and refuses the run
// (DEFINITION_CHANGED, exit 2) unless accept is set; acceptCmd is the
// command that accepts it. With useDefinition false (a resume that
// continues with its recorded definition) only the server files count:
// the agent folder on disk is not used. reloaded says that the user asked
// for the folder's current files (resume --reload-definition), which
// accepts the definition's changes (they are shown) but not the servers'.
func checkWatched(w io.Writer, def *agentdir.Agent, workDir string, useDefinition, reloaded, accept bool, acceptCmd string) error {
	snap, ok := def.FS().(*agentdir.Snapshot)
	if !ok {
		return nil
	}
	now, err := agentdir.Watch(snap, workDir, def.Definition().Runner.MCPServers)
	if err != nil {
		return withExit(exitUsage, err)
	}
	if !useDefinition {
		now.Definition = nil
	}
	stateDir, err := journal.StateDir(os.Getenv)
	if err != nil {
		return withExit(exitUsage, err)
	}
	old, err := agentdir.LoadWatched(stateDir, now)
	if err != nil {
		return withExit(exitInternal, err)
	}
	if old == nil && now.Empty() {
		return nil
	}
	if old != nil {
		if changes := old.Compare(now); len(changes) > 0 {
			servers := slices.ContainsFunc(changes, func(c agentdir.WatchedChange) bool { return c.Server != "" })
			verb := "refused"
			switch {
			case accept:
				verb = "accepted with --" + acceptChangedFlag
			case reloaded && !servers:
				verb, accept = "accepted with --reload-definition", true
			}
			fmt.Fprintf(w, "capstan: files this run would use changed since the last run recorded them (%s):\n", verb)
			printWatchedChanges(w, changes)
			if !accept {
				return withExit(exitUsage, agentdir.ChangedError(now, changes, acceptCmd))
			}
		}
		if now.Definition == nil {
			now.Definition = old.Definition // kept for the next run that uses the folder
		}
	}
	if err := now.Save(stateDir); err != nil {
		return withExit(exitInternal, err)
	}
	return nil
}

// printWatchedChanges prints each change and its diff, terminal controls
// made visible (the files are the model's to write).
func printWatchedChanges(w io.Writer, changes []agentdir.WatchedChange) {
	for _, c := range changes {
		what := c.Path
		if c.Server != "" {
			what += " (MCP server " + c.Server + ")"
		}
		fmt.Fprintf(w, "  %-8s %s\n", c.Kind, runreport.VisibleControls(what))
		if c.Diff == "" {
			if c.Kind == agentdir.Modified {
				fmt.Fprintln(w, "           (binary or large file: compared by digest)")
			}
			continue
		}
		for _, line := range strings.SplitAfter(strings.TrimRight(c.Diff, "\n"), "\n") {
			fmt.Fprintf(w, "      %s", runreport.VisibleControls(line))
		}
		fmt.Fprintln(w)
	}
}

// acceptCommand is the command line that runs again with
// --accept-changed-definition: words are the arguments after the
// subcommand, as given.
func acceptCommand(sub string, words []string) string {
	return commandLine(sub, words) + " --" + acceptChangedFlag
}

// givenFlags are the flags set on fs as --name=value words (for a command
// to print).
func givenFlags(fs *pflag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == acceptChangedFlag {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	return out
}
