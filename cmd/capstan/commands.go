package main

import "github.com/spf13/cobra"

// subcommands lists capstan's top-level commands. Each lives in its own
// cmd_<name>.go file.
func subcommands() []*cobra.Command {
	return []*cobra.Command{
		newRunCmd(),
		newResumeCmd(),
		newValidateCmd(),
		newInitCmd(),
		newRunsCmd(),
		newShowCmd(),
		newSkillsCmd(),
		newPipelineCmd(pipelineDeps{}),
	}
}
