package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/mcp"
)

func newMCPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Inspect the MCP servers an agent declares",
	}
	cmd.AddCommand(newMCPListCmd())
	return cmd
}

// mcpServerTools is one server of `capstan mcp list --json`.
type mcpServerTools struct {
	Server string      `json:"server"`
	Tools  []tool.Spec `json:"tools"`
}

func newMCPListCmd() *cobra.Command {
	var workDir string
	var asJSON, noSandbox bool
	cmd := &cobra.Command{
		Use:   "list DIR",
		Short: "Connect to each MCP server the agent in DIR declares and list the tools it offers",
		Long: `Connect to each MCP server declared in DIR's agent.json (runner.mcpServers)
the way a run does (stdio servers start in --workdir, in the sandbox unless
the agent or --no-sandbox opts out), and list the tools
each offers under the names the model sees (mcp__<server>__<tool>), with
their descriptions. Use these names in runner.boundaries.allowedTools.

Exit codes: 0 listed; 2 the agent definition is invalid; 3 a server could
not be started or reached.`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := agentdir.LoadAndValidate(args[0], agent.ValidateOptions())
			if err != nil {
				return configError(cmd.ErrOrStderr(), err, args[0], true)
			}
			servers := def.Definition().Runner.MCPServers
			if len(servers) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s declares no MCP servers (runner.mcpServers)\n", args[0])
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), []mcpServerTools{})
				}
				return nil
			}
			r := def.Definition().Runner
			sb := r.Boundaries.Sandbox
			if noSandbox {
				sb = &agentdir.Sandbox{Enabled: new(bool)}
			}
			box, err := sandbox.NewCommandRunner(cmd.Context(), sb)
			if err != nil {
				return withExit(exitUsage, inFolder(err, args[0]))
			}
			if box == nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "capstan: unsandboxed: the MCP servers run with your rights\n")
			}
			set, err := mcp.ConnectWith(cmd.Context(), servers, mcp.Options{WorkDir: workDir, Env: r.Boundaries.Env, Sandbox: box})
			if err != nil {
				return withExit(exitInternal, inFolder(err, args[0]))
			}
			defer set.Close()
			list := groupMCPTools(set)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			printMCPTools(cmd.OutOrStdout(), list)
			return nil
		},
	}
	cmd.Flags().StringVar(&workDir, "workdir", ".", "directory stdio servers start in (as in a run)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the servers and tools as JSON")
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "start stdio servers with your rights, outside the sandbox (as a run with --no-sandbox)")
	return cmd
}

// groupMCPTools sorts the set's tools under the server that offers them.
func groupMCPTools(set *mcp.Set) []mcpServerTools {
	var out []mcpServerTools
	tools := set.Tools()
	for _, server := range set.Servers() {
		prefix := strings.TrimSuffix(mcp.ToolName(server, "x"), "x")
		g := mcpServerTools{Server: server, Tools: []tool.Spec{}}
		for _, t := range tools {
			if strings.HasPrefix(t.Spec().Name, prefix) {
				g.Tools = append(g.Tools, t.Spec())
			}
		}
		out = append(out, g)
	}
	return out
}

func printMCPTools(w io.Writer, list []mcpServerTools) {
	for i, g := range list {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: %d tools\n", g.Server, len(g.Tools))
		for _, t := range g.Tools {
			desc := firstLine(strings.TrimSpace(t.Description), 100)
			fmt.Fprintf(w, "  %-40s %s\n", t.Name, desc)
		}
	}
}
