// The Temporal variant of the footprint floor: the floor CLI (built from
// ../floorcli/main.go through the benchmark's -overlay) plus a Temporal
// client and worker that register one trivial workflow and activity, and
// start the workflow when a server is named. It is what a capstan binary
// that links the Temporal SDK is measured against.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const taskQueue = "floor"

func greet(_ context.Context, name string) (string, error) { return "hello " + name, nil }

func greetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out string
	err := workflow.ExecuteActivity(ctx, greet, name).Get(ctx, &out)
	return out, err
}

func init() {
	var hostPort string
	cmd := &cobra.Command{Use: "temporal", Short: "Register a workflow on a Temporal worker; run it when --host-port is set", RunE: func(cmd *cobra.Command, _ []string) error {
		c, err := client.NewLazyClient(client.Options{HostPort: hostPort})
		if err != nil {
			return err
		}
		defer c.Close()
		w := worker.New(c, taskQueue, worker.Options{})
		w.RegisterWorkflow(greetWorkflow)
		w.RegisterActivity(greet)
		if hostPort == "" {
			fmt.Println("registered greetWorkflow")
			return nil
		}
		if err := w.Start(); err != nil {
			return err
		}
		defer w.Stop()
		run, err := c.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{TaskQueue: taskQueue}, greetWorkflow, "floor")
		if err != nil {
			return err
		}
		var out string
		if err := run.Get(cmd.Context(), &out); err != nil {
			return err
		}
		fmt.Println(out)
		return nil
	}}
	cmd.Flags().StringVar(&hostPort, "host-port", "", "Temporal frontend address (empty: register only)")
	extraCommands = append(extraCommands, cmd)
}
