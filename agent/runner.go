package agent

import (
	"bytes"
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/trace"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/verify"
)

// DirRunner runs the agent in a folder to completion and returns its
// structured result. It implements pipeline.AgentRunner, so a pipeline
// stage can be a whole capstan agent.
type DirRunner struct {
	// WorkDir is where the agents act and journal ("" = current directory).
	WorkDir string
	// Model overrides each agent's runner.model when set.
	Model string
	// Events, when set, receives a pointer to each agent run's journal.
	Events event.Emitter
	// PipelineRun, when set, is the id of the pipeline run whose stages
	// these agents are: each agent run records it (Config.PipelineRun).
	PipelineRun string
	// TracerProvider, when set, traces each agent run (BuildOptions.TracerProvider),
	// as a child of the span in RunAgent's ctx.
	TracerProvider trace.TracerProvider
	// NoSandbox runs each agent's commands unsandboxed
	// (BuildOptions.NoSandbox; capstan pipeline run --no-sandbox).
	NoSandbox bool
	// BeforeUnsandboxed, when set, is called before an agent whose
	// commands run unsandboxed (NoSandbox, or the agent opts out) is
	// built; its error stops that agent before anything of it runs
	// (capstan pipeline run's KEY_IN_ANCESTOR check).
	BeforeUnsandboxed func() error
}

// RunAgent loads, validates, builds and runs the agent in dir with params,
// and returns the structured output of its last iteration that had one.
// A run that does not complete is an error carrying its result's code; a
// completed run without structured output is a STAGE-style error too, since
// the caller asked for a structured result.
func (r DirRunner) RunAgent(ctx context.Context, dir string, params map[string]string) (json.RawMessage, error) {
	def, err := LoadPinned(dir, r.Model)
	if err != nil {
		return nil, err
	}
	if r.BeforeUnsandboxed != nil && (r.NoSandbox || !def.Definition().Runner.Boundaries.Sandbox.On()) {
		if err := r.BeforeUnsandboxed(); err != nil {
			return nil, err
		}
	}
	a, err := Build(ctx, def, BuildOptions{WorkDir: r.WorkDir, Model: r.Model, Params: params, TracerProvider: r.TracerProvider,
		PipelineRun: r.PipelineRun, NoSandbox: r.NoSandbox})
	if err != nil {
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		a.Stop()
		return nil, err
	}
	a.Run(ctx)
	res := a.Stop()
	if r.Events != nil {
		r.Events.Emit(event.AgentRunEvent{Dir: dir, Result: res})
	}
	if !res.Success {
		code, recoverable, msg := agenterr.CodeCompletion, false, res.Reason
		if res.Error != nil {
			code, recoverable, msg = res.Error.Code, res.Error.Recoverable, res.Error.Message
		}
		e := agenterr.New(code, agenterr.LayerLifecycle, recoverable, "agent %s did not complete (%s): %s", res.Agent, res.CompletionReason, msg)
		e.Hint = "see capstan show " + res.RunID + " --workdir " + verify.ShellQuote(a.workDir)
		return nil, e
	}
	for i := len(a.rc.Summaries) - 1; i >= 0; i-- {
		if out := bytes.TrimSpace(a.rc.Summaries[i].StructuredOutput); len(out) > 0 {
			return json.RawMessage(out), nil
		}
	}
	e := agenterr.New(agenterr.CodeCompletion, agenterr.LayerLifecycle, false, "agent %s completed without structured output", res.Agent)
	e.Hint = "give the agent's final step an outputSchemaRef so it answers with JSON"
	return nil, e
}
