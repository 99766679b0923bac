package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/capstan-dev/capstan/completion"
	"github.com/capstan-dev/capstan/iteration"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/loop"
	"github.com/capstan-dev/capstan/prompt"
)

// flow is the agent's loop.Flow: it resolves each iteration's prompt from
// the current step and decides what a finished iteration means.
type flow struct {
	a      *Agent
	system string
	step   string
}

func newFlow(a *Agent) (*flow, error) {
	return &flow{a: a, step: a.def.Registry().EntryStep}, nil
}

// start resolves the system prompt.
func (f *flow) start(ctx context.Context) error {
	if f.a.def.Definition().Runner.SystemPromptPath == "" {
		return nil
	}
	res, err := f.a.prompts.ResolveSystem(ctx, f.variables(0))
	if err != nil {
		return err
	}
	f.warn(res.Warnings)
	f.system = res.Text
	return nil
}

func (f *flow) close() {}

// variables are the {uv-x} values of an iteration: the agent's parameters
// plus the runtime channel (iteration, max_iterations, completion_keyword,
// step_id, agent_name, workdir). Parameters win on a name clash.
func (f *flow) variables(n int) map[string]string {
	d := f.a.def.Definition()
	v := make(map[string]string, len(f.a.vars)+6)
	v["iteration"] = strconv.Itoa(n)
	max := d.Runner.Budgets.MaxIterations
	if f.a.opts.MaxIterations > 0 {
		max = f.a.opts.MaxIterations
	}
	if max <= 0 || max > loop.HardLimit {
		max = loop.HardLimit
	}
	v["max_iterations"] = strconv.Itoa(max)
	v["completion_keyword"] = d.Runner.Completion.Keyword
	v["step_id"] = f.step
	v["agent_name"] = d.Name
	v["workdir"] = f.a.workDir
	for k, val := range f.a.vars {
		v[k] = val
	}
	return v
}

func (f *flow) warn(ws []string) {
	for _, w := range ws {
		f.a.events.Emit(journal.Warning, map[string]string{"message": w})
	}
}

func (f *flow) queryOptions() llm.QueryOptions {
	b := f.a.def.Definition().Runner.Boundaries
	return llm.QueryOptions{
		SystemPrompt:   f.system,
		AllowedTools:   b.AllowedTools,
		PermissionMode: b.PermissionMode,
		MaxTurns:       b.MaxTurns,
	}
}

// Next implements loop.Flow.
func (f *flow) Next(ctx context.Context, rc *loop.RuntimeContext) (loop.Turn, error) {
	st, ok := f.a.def.Registry().Steps[f.step]
	if !ok {
		return loop.Turn{}, fmt.Errorf("agent: current step %q is not in the registry", f.step)
	}
	res, err := f.a.prompts.Resolve(ctx, prompt.Ref{C2: st.C2, C3: st.C3, Edition: st.Edition, Adaptation: st.Adaptation, Fallback: st.Fallback}, f.variables(rc.Iteration))
	if err != nil {
		return loop.Turn{}, err
	}
	f.warn(res.Warnings)
	return loop.Turn{StepID: f.step, Prompt: res.Text, Source: f.rel(res.Path), Options: f.queryOptions()}, nil
}

func (f *flow) rel(p string) string {
	if r, err := filepath.Rel(f.a.def.Dir(), p); err == nil {
		return r
	}
	return p
}

// After implements loop.Flow: the completion handler decides.
func (f *flow) After(ctx context.Context, rc *loop.RuntimeContext, s *iteration.Summary) (loop.Outcome, error) {
	r, err := f.a.completion.Check(ctx, completion.Context{Iteration: rc.Iteration, Summary: s, Summaries: rc.Summaries})
	if err != nil {
		return loop.Outcome{}, err
	}
	f.a.events.Emit(journal.CompletionCheck, r)
	if r.Complete {
		return loop.Outcome{Complete: true, Reason: r.Reason}, nil
	}
	return loop.Outcome{Reason: r.Reason}, nil
}

func (f *flow) currentStep() string { return f.step }

// completionReason refines the loop's completion reason ("" keeps it).
func (f *flow) completionReason(*loop.Result) string { return "" }
