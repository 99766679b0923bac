package main

import (
	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/agent"
)

// subcommands lists capstan's top-level commands. Each lives in its own
// cmd_<name>.go file.
func subcommands() []*cobra.Command {
	return []*cobra.Command{
		newRunCmd(),
		newFixCmd(),
		newResumeCmd(),
		newApproveCmd(),
		newRejectCmd(),
		newValidateCmd(),
		newInitCmd(),
		newRunsCmd(),
		newShowCmd(),
		newSkillsCmd(),
		newPipelineCmd(pipelineDeps{Runner: agent.DirRunner{}}),
		newReportCmd(),
		newDoctorCmd(),
		newMCPCmd(),
		newVersionCmd(),
		newWorkerCmd(),
		newSubmitCmd(),
		newCancelCmd(),
		newWorkflowCmd(),
	}
}
