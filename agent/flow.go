package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"

	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/verdict"
)

// Completion reasons the verdict stage adds to the loop's.
const (
	ReasonValidationExhausted = verdict.ReasonValidationExhausted // onFailure attempts used up
	ReasonStepLoopLimit       = verdict.ReasonStepLoopLimit       // STEP_LOOP_LIMIT
	ReasonCannotComplete      = verdict.ReasonCannotComplete      // the model declared the task cannot be done
)

// flow is the agent's Flow. Each iteration it resolves the current
// step's prompt (or the pending retry prompt); afterwards the verdict stage
// decides what the iteration means (format, step check, completion,
// verification), and the flow keeps the retry prompt it chose for the next
// iteration.
type flow struct {
	a       *Agent
	system  string
	machine *verdict.Machine
	checker *verdict.Checker
	verdict *verdict.Stage // made by stage, at the first verdict
	// guards and outputGuards are the verdict stage's, built with the
	// agent (a broken guard fails Build).
	guards       []verdict.Guard
	outputGuards []verdict.OutputGuard
	// pending is the retry prompt for the next iteration ("" = step prompt).
	pending *event.PendingPrompt
	// state is the step state the last iteration's end carries
	// (stepState).
	state event.StepStateEvent
	// sessions are the sessions of steps' own models, by model spec (the
	// run's model keeps its session in the loop's RuntimeContext).
	sessions map[string]string
	// cannotComplete is the model's declaration that ended the run.
	cannotComplete *event.CannotComplete
	// testChange is the request to change protected files that stopped
	// the run for a human.
	testChange *event.TestChangeRequest
	// closureVerdict is the closure step's verdict of a run completed by
	// closing.
	closureVerdict string
	// closureHandoff are the handoff values (structuredGate.handoffFields)
	// of the closing step's final answer, keyed by each path's last segment.
	closureHandoff map[string]any
	// retrying is the retry prompt of the current iteration (nil when it
	// runs the step's prompt).
	retrying *event.PendingPrompt
}

func newFlow(a *Agent) (*flow, error) {
	m := a.rt.machine
	var err error
	f := &flow{a: a, machine: m}
	f.checker = verdict.NewChecker(verdict.CheckerConfig{
		Judge: &verdict.BridgeJudge{Bridge: a.bridge},
		// A prompt check's "prompt" is a file under the prompts base when
		// one exists there, otherwise the criterion text itself.
		ResolvePrompt: func(ctx context.Context, ref string) (string, error) {
			if _, ok := a.prompts.Exists(agentdir.PromptRef{Path: ref}); !ok {
				return ref, nil
			}
			res, err := a.prompts.Resolve(ctx, agentdir.PromptRef{Path: ref}, a.vars)
			return res.Text, err
		},
	})
	if f.guards, err = a.guards(); err != nil {
		return nil, err
	}
	f.outputGuards = a.outputGuards()
	return f, nil
}

// stage returns the verdict stage, made at the first verdict: an agent
// parked in its first model call holds none.
func (f *flow) stage() (*verdict.Stage, error) {
	if f.verdict != nil {
		return f.verdict, nil
	}
	a, reg := f.a, f.a.reg
	v, err := verdict.New(verdict.Config{
		Guards:       f.guards,
		OutputGuards: f.outputGuards,
		Machine:      f.machine,
		Checker:      f.checker,
		Handler:      a.rt.completion,
		Verifier:     a.rt.verifier,
		Validators:   a.spec.Runner.Completion.Validators,
		Format:       verdict.NewFormatValidator(verdict.FormatConfig{Extract: schema.ExtractJSON, Problems: schema.Problems}),
		Schemas:      a.schemas,
		Retries: verdict.NewRetryHandler(verdict.RetryConfig{C1: reg.C1, Patterns: reg.CompletionPatterns,
			Templates: retryTemplates{a.prompts}}),
		Events:          a.emit,
		CompletionType:  a.spec.Runner.Completion.Type,
		ValidationSteps: reg.ValidationSteps,
		TestChanges:     a.testChangeHandler(),
	})
	if err != nil {
		return nil, err
	}
	f.verdict = v
	return v, nil
}

func registryFile(d *agentdir.Definition) string {
	if d.Runner.Prompts.Registry != "" {
		return d.Runner.Prompts.Registry
	}
	return agentdir.DefaultRegistryFile
}

// start routes through an entry gateway and resolves the system prompt.
func (f *flow) start(ctx context.Context) error {
	if f.a.opts.Resume == nil {
		if _, err := f.machine.RouteGateways(ctx, f.checker, verdict.CheckInput{}, 0); err != nil {
			return err
		}
	}
	if f.a.spec.Runner.SystemPromptPath != "" {
		res, err := f.a.prompts.ResolveSystem(ctx, f.variables(0, nil))
		if err != nil {
			return err
		}
		f.warn(res.Warnings)
		f.system = res.Text
	}
	if s := f.a.skillsPrompt; s != "" {
		if f.system != "" {
			f.system += "\n\n"
		}
		f.system += s
	}
	return nil
}

// variables are the {uv-x} values of an iteration: the agent's parameters
// plus the runtime channel (iteration, completed_iterations, max_iterations,
// remaining, completion_keyword, step_id, agent_name, workdir,
// previous_summary). max_iterations is the smallest of the iteration
// budget, an iterationBudget completion's count and the loop's hard limit;
// remaining counts the iterations left including this one. Parameters win
// on a name clash.
func (f *flow) variables(n int, rc *RuntimeContext) map[string]string {
	d := f.a.spec
	v := make(map[string]string, len(f.a.vars)+7)
	v["iteration"] = strconv.Itoa(n)
	max := d.Runner.Budgets.MaxIterations // Config.MaxIterations applied
	if max <= 0 || max > HardLimit {
		max = HardLimit
	}
	if c := d.Runner.Completion; c.Type == verdict.TypeIterationBudget && c.MaxIterations > 0 && c.MaxIterations < max {
		max = c.MaxIterations
	}
	v["max_iterations"] = strconv.Itoa(max)
	done := 0
	if n > 1 {
		done = n - 1
	}
	v["completed_iterations"] = strconv.Itoa(done)
	left := max - done
	if left < 0 {
		left = 0
	}
	v["remaining"] = strconv.Itoa(left)
	v["completion_keyword"] = d.Runner.Completion.Keyword
	v["step_id"] = f.currentStep()
	v["agent_name"] = d.Name
	v["workdir"] = f.a.workDir
	if rc != nil && len(rc.Summaries) > 0 {
		v["previous_summary"] = verdict.FormatIterationSummary(&rc.Summaries[len(rc.Summaries)-1])
	} else {
		v["previous_summary"] = ""
	}
	for k, val := range f.a.vars {
		v[k] = val
	}
	return v
}

func (f *flow) warn(ws []string) {
	for _, w := range ws {
		f.a.emit.Emit(event.Warning(w))
	}
}

func (f *flow) currentStep() string {
	id, _ := f.machine.Current()
	return id
}

// Next implements Flow.
func (f *flow) Next(ctx context.Context, rc *RuntimeContext) (Turn, error) {
	id, st := f.machine.Current()
	if err := f.a.enterStep(id); err != nil {
		return Turn{}, err
	}
	opts, err := f.queryOptions(st)
	if err != nil {
		return Turn{}, err
	}
	turn := Turn{StepID: id, Options: opts}
	// A subprocess step runs its command instead of a model.
	if st.Runner != nil {
		b, err := f.a.newSubprocess(ctx, id, st)
		if err != nil {
			return Turn{}, err
		}
		f.pending = nil // a retry prompt means nothing to a command: it runs again as it is
		turn.Bridge, turn.Model, turn.Cost = b, SubprocessTool, func(event.Usage) float64 { return 0 }
		turn.Prompt, turn.Source = b.display(), SubprocessTool
		return turn, nil
	}
	// A step with a model of its own talks to that model, in its own session.
	if b, err := f.a.stepBridge(ctx, st.Model); err != nil {
		return Turn{}, err
	} else if b != nil {
		turn.Bridge, turn.SessionID, turn.Cost, turn.Model = b, f.sessions[st.Model], f.a.stepCosts[st.Model], st.Model
	}
	f.retrying = f.pending
	if p := f.pending; p != nil {
		f.pending = nil
		turn.Prompt, turn.Source = p.Text, p.Source
		return turn, nil
	}
	vars := f.variables(rc.Iteration, rc)
	// Inputs from earlier steps' outputs; a parameter of the same name wins.
	inputs, err := f.machine.Inputs(id)
	if err != nil {
		return Turn{}, err
	}
	for k, val := range inputs {
		if _, isParam := f.a.vars[k]; !isParam {
			vars[k] = val
		}
	}
	res, err := f.a.prompts.Resolve(ctx, f.closureRef(st), vars)
	if err != nil {
		return Turn{}, err
	}
	f.warn(res.Warnings)
	turn.Prompt, turn.Source = res.Text, f.rel(res.Path)
	turn.Options.Instructions = true // context compaction keeps the step's prompt
	return turn, nil
}

func (f *flow) queryOptions(st agentdir.Step) (llm.QueryOptions, error) {
	b := f.a.spec.Runner.Boundaries
	o := llm.QueryOptions{SystemPrompt: f.system, AllowedTools: b.AllowedTools, DisallowedTools: b.DisallowedTools,
		PermissionMode: b.PermissionMode, MaxTurns: b.MaxTurns, Boundary: boundaryRule(st, f.a.spec.Runner.Integrations.GitHub)}
	// The read-only GitHub tool comes with the integration, whatever
	// allowedTools lists (as the model cannot change GitHub with it).
	if len(o.AllowedTools) > 0 && f.a.spec.Runner.Integrations.GitHub.On() {
		o.AllowedTools = append(slices.Clone(o.AllowedTools), github.ReadToolName)
	}
	if ref := st.OutputSchemaRef; ref != nil {
		c, err := f.a.schemas.get(*ref)
		if err != nil {
			return o, err
		}
		o.OutputSchema, o.OutputName = c.raw, ref.Schema
	}
	return o, nil
}

func (f *flow) rel(p string) string { return f.a.prompts.Rel(p) }

// After implements Flow: the verdict stage decides what the
// iteration means, and the flow schedules its retry prompt.
func (f *flow) After(ctx context.Context, rc *RuntimeContext, s *event.IterationSummary) (o Outcome, err error) {
	defer func() { o.StepState = f.stepState() }()
	_, st := f.machine.Current()
	if st.Model != "" && st.Model != f.a.model {
		f.setSession(st.Model, s.SessionID)
	}
	stage, err := f.stage()
	if err != nil {
		return Outcome{}, err
	}
	v, err := stage.Decide(ctx, verdict.Input{Iteration: rc.Iteration, Summary: s, Summaries: rc.Summaries})
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Reason: v.Reason}
	switch v.Action {
	case verdict.Complete:
		out.Complete = true
		f.closureVerdict = v.ClosureVerdict
		f.closureHandoff = closureHandoff(st, s)
		if err := subprocessFailure(f.a.runID, s.StepID, st, s); err != nil {
			out = Outcome{Stop: true, Reason: err.Error(), Err: err}
			break
		}
		// Before COMPLETED: the test validators once more, in a clean
		// environment.
		failed, err := f.a.cleanRun(ctx, v.Validation)
		if err != nil {
			return Outcome{}, err
		}
		if failed != nil {
			out = Outcome{Stop: true, Reason: failed.Error(), Err: failed, CompletionReason: ReasonCleanRunDiffers}
		}
	case verdict.Stop:
		out.Stop, out.Err, out.CompletionReason = true, v.Err, v.CompletionReason
		f.cannotComplete = v.CannotComplete
	case verdict.Retry:
		r := v.Retry
		f.pending = &event.PendingPrompt{Text: r.Text, Source: v.PromptSource(), Kind: r.Kind, Validator: r.Validator,
			Pattern: r.Pattern, Attempt: r.Attempt, Max: r.Max}
	}
	return out, nil
}

// noReplyForRetry ends a run whose scripted model ran out of replies
// while a retry prompt was waiting for one as the verdict's failure: the
// model declared completion, verification (or the output format) failed,
// and no further attempt can be made. The script's error stays in the
// chain (errors.Is agenterr.ErrScriptExhausted). Any other ending is
// returned as it is: a real provider's failure stays a provider failure,
// to be resumed.
func (f *flow) noReplyForRetry(lr *LoopResult) *LoopResult {
	r := f.retrying
	if lr.Success || r == nil || r.Kind == "" || r.Kind == "test-change" || !errors.Is(lr.Err, agenterr.ErrScriptExhausted) {
		return lr
	}
	what := fmt.Sprintf("completion check %q failed (pattern %q)", r.Validator, r.Pattern)
	code := agenterr.CodeValidationExhausted
	if r.Kind == "format" {
		what, code = "the output did not match the step's schema", agenterr.CodeSchemaValidation
	}
	e := agenterr.Wrap(lr.Err, code, agenterr.LayerCompletion, false,
		"%s at attempt %d of %d, and the scripted model has no reply to the retry prompt", what, r.Attempt, r.Max)
	e.Hint = "the model's completion was not verified; add script turns that do the work, or run a real model with --model"
	out := *lr
	out.CompletionReason, out.Reason, out.Err = ReasonValidationExhausted, e.Message, e
	return &out
}

// stepState is the step machine's state and the pending retry prompt
// after an iteration, as its iteration.end event carries them.
// It is the flow's own value, overwritten by the next iteration, after
// the loop has journaled this one's end.
func (f *flow) stepState() *event.StepStateEvent {
	f.state = event.StepStateEvent{State: f.machine.Snapshot(), Pending: f.pending}
	return &f.state
}

// setSession records the session of a step's own model (the map is made
// by the first step that has one).
func (f *flow) setSession(model, sessionID string) {
	if f.sessions == nil {
		f.sessions = map[string]string{}
	}
	f.sessions[model] = sessionID
}

// closureHandoff reads the handoff values of the step that completed the
// run from its final answer: the values its structuredGate.handoffFields
// name, keyed by each path's last segment. nil when the step has no gate,
// no handoff fields or no structured answer.
func closureHandoff(st agentdir.Step, s *event.IterationSummary) map[string]any {
	if st.StructuredGate == nil || len(st.StructuredGate.HandoffFields) == 0 || s == nil || len(s.StructuredOutput) == 0 {
		return nil
	}
	in, err := verdict.InterpretIntent(st.StepID, st.StructuredGate, s.StructuredOutput)
	if err != nil {
		return nil
	}
	return in.Handoff
}
