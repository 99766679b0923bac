package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/completion"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/iteration"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/loop"
	"github.com/capstan-dev/capstan/prompt"
	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/step"
)

// Completion reasons the flow adds to the loop's.
const (
	ReasonValidationExhausted = "validation_exhausted" // onFailure retries used up
	ReasonStepLoopLimit       = "step_loop_limit"      // STEP_LOOP_LIMIT
)

// flow is the agent's loop.Flow. Each iteration it resolves the current
// step's prompt (or the pending retry prompt), and afterwards it checks the
// response's format, evaluates the step check and transition, asks the
// completion handler, and — when the model declared completion — verifies
// it against the world, sending only the failure pattern's retry prompt
// when the world disagrees (seed 004).
type flow struct {
	a         *Agent
	system    string
	machine   *step.Machine
	checker   *step.Checker
	retries   *completion.RetryHandler
	format    *completion.FormatValidator
	budgets   map[string]*completion.RetryBudget // per step: completion attempts
	fmtBudget map[string]*completion.RetryBudget // per step: format attempts
	// pending is the retry prompt for the next iteration ("" = step prompt).
	pending *pendingPrompt
	// sessions are the sessions of steps' own models, by model spec (the
	// run's model keeps its session in the loop's RuntimeContext).
	sessions map[string]string
}

// pendingPrompt is a retry prompt waiting for the next iteration.
type pendingPrompt struct {
	Text   string `json:"text"`
	Source string `json:"source"`
}

// RetryPromptEvent is the payload of a retry.prompt journal event; the type
// lives in completion so that journal consumers below the agent layer
// (tracing) can match it without a JSON round trip.
type RetryPromptEvent = completion.RetryPromptEvent

// StepStateEvent is the payload of a step.state journal event: the step
// machine's state after an iteration, for resume.
type StepStateEvent struct {
	State   step.State     `json:"state"`
	Pending *pendingPrompt `json:"pending,omitempty"`
}

// StepState is the journal type of StepStateEvent.
const StepState = "step.state"

func newFlow(a *Agent) (*flow, error) {
	reg := a.reg
	m, err := step.NewMachine(*reg, step.Options{AgentName: a.spec.Name, RunID: a.runID, Emitter: a.emit,
		File: registryFile(a.spec)})
	if err != nil {
		return nil, err
	}
	f := &flow{a: a, machine: m, budgets: map[string]*completion.RetryBudget{},
		fmtBudget: map[string]*completion.RetryBudget{}, sessions: map[string]string{}}
	f.checker = step.NewChecker(step.CheckerConfig{
		Judge: &step.BridgeJudge{Bridge: a.bridge},
		// A prompt check's "prompt" is a file under the prompts base when
		// one exists there, otherwise the criterion text itself.
		ResolvePrompt: func(ctx context.Context, ref string) (string, error) {
			if _, ok := a.prompts.Exists(prompt.Ref{Path: ref}); !ok {
				return ref, nil
			}
			res, err := a.prompts.Resolve(ctx, prompt.Ref{Path: ref}, a.vars)
			return res.Text, err
		},
	})
	f.retries = completion.NewRetryHandler(completion.RetryConfig{C1: reg.C1, Patterns: reg.CompletionPatterns,
		Templates: retryTemplates{a.prompts}})
	f.format = completion.NewFormatValidator(completion.FormatConfig{Extract: schema.ExtractJSON, Problems: schema.Problems})
	return f, nil
}

func registryFile(d *config.Definition) string {
	if d.Runner.Prompts.Registry != "" {
		return d.Runner.Prompts.Registry
	}
	return config.DefaultRegistryFile
}

// start routes through an entry gateway and resolves the system prompt.
func (f *flow) start(ctx context.Context) error {
	if f.a.opts.Resume == nil {
		if _, err := f.machine.RouteGateways(ctx, f.checker, step.CheckInput{}, 0); err != nil {
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
// plus the runtime channel (iteration, max_iterations, completion_keyword,
// step_id, agent_name, workdir, previous_summary). Parameters win on a name
// clash.
func (f *flow) variables(n int, rc *loop.RuntimeContext) map[string]string {
	d := f.a.spec
	v := make(map[string]string, len(f.a.vars)+7)
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
	v["step_id"] = f.currentStep()
	v["agent_name"] = d.Name
	v["workdir"] = f.a.workDir
	if rc != nil && len(rc.Summaries) > 0 {
		v["previous_summary"] = completion.FormatIterationSummary(&rc.Summaries[len(rc.Summaries)-1])
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
		f.a.emit.Emit(journal.Warning, map[string]string{"message": w})
	}
}

func (f *flow) currentStep() string {
	id, _ := f.machine.Current()
	return id
}

// Next implements loop.Flow.
func (f *flow) Next(ctx context.Context, rc *loop.RuntimeContext) (loop.Turn, error) {
	id, st := f.machine.Current()
	opts, err := f.queryOptions(st)
	if err != nil {
		return loop.Turn{}, err
	}
	turn := loop.Turn{StepID: id, Options: opts}
	// A step with a model of its own talks to that model, in its own session.
	if b, err := f.a.stepBridge(ctx, st.Model); err != nil {
		return loop.Turn{}, err
	} else if b != nil {
		turn.Bridge, turn.SessionID, turn.Cost, turn.Model = b, f.sessions[st.Model], f.a.stepCosts[st.Model], st.Model
	}
	if p := f.pending; p != nil {
		f.pending = nil
		turn.Prompt, turn.Source = p.Text, p.Source
		return turn, nil
	}
	res, err := f.a.prompts.Resolve(ctx, prompt.Ref{C2: st.C2, C3: st.C3, Edition: st.Edition, Adaptation: st.Adaptation, Fallback: st.Fallback},
		f.variables(rc.Iteration, rc))
	if err != nil {
		return loop.Turn{}, err
	}
	f.warn(res.Warnings)
	turn.Prompt, turn.Source = res.Text, f.rel(res.Path)
	turn.Options.Instructions = true // context compaction keeps the step's prompt
	return turn, nil
}

func (f *flow) queryOptions(st config.Step) (llm.QueryOptions, error) {
	b := f.a.spec.Runner.Boundaries
	o := llm.QueryOptions{SystemPrompt: f.system, AllowedTools: b.AllowedTools, DisallowedTools: b.DisallowedTools,
		PermissionMode: b.PermissionMode, MaxTurns: b.MaxTurns}
	if ref := st.OutputSchemaRef; ref != nil {
		c, err := f.a.schemas.get(*ref)
		if err != nil {
			return o, err
		}
		o.OutputSchema, o.OutputName = c.raw, ref.Schema
	}
	return o, nil
}

func (f *flow) rel(p string) string {
	if r, err := filepath.Rel(f.a.def.Dir(), p); err == nil {
		return r
	}
	return p
}

// After implements loop.Flow.
func (f *flow) After(ctx context.Context, rc *loop.RuntimeContext, s *iteration.Summary) (loop.Outcome, error) {
	defer f.journalState()
	id, st := f.machine.Current()
	if st.Model != "" && st.Model != f.a.model {
		f.sessions[st.Model] = s.SessionID
	}

	// 1. Format (seed 004 FormatValidator): the output must have the step's
	// schema before anything reads it.
	if ref := st.OutputSchemaRef; ref != nil {
		if out, handled, err := f.checkFormat(ctx, id, st, *ref, s); handled || err != nil {
			return out, err
		}
	}

	// 2. Step check → transition → gateways → completion handler, in the
	// keyword priority order of seed 000.
	before := f.machine.Snapshot()
	ev, err := f.machine.Evaluate(ctx, f.checker, step.InputFromSummary(s), step.Outcome{Iteration: rc.Iteration},
		f.a.completion, completion.Context{Iteration: rc.Iteration, Summary: s, Summaries: rc.Summaries})
	if err != nil {
		return f.stepError(err)
	}
	f.a.emit.Emit(journal.CompletionCheck, ev.Completion)
	if f.machine.Aborted() {
		err := f.machine.AbortError()
		return loop.Outcome{Stop: true, Err: err, Reason: err.Error(), CompletionReason: loop.ReasonAborted}, nil
	}

	// 3. Verification (seed 004): a declared completion counts only when
	// the world agrees.
	declared := ev.Completion.Complete || ev.Completion.Declared || ev.StepComplete()
	vr := ev.Completion.Validation
	if declared && vr == nil && len(st.CompletionConditions) > 0 {
		res, err := f.a.verifier.Validate(ctx, st.CompletionConditions)
		if err != nil {
			return loop.Outcome{}, err
		}
		vr = &res
	}
	if vr != nil && !vr.Valid {
		// Not completion: undo the step's completing transition and send the
		// retry prompt for this failure pattern.
		if err := f.machine.Restore(before); err != nil {
			return loop.Outcome{}, err
		}
		return f.retryCompletion(ctx, id, st, s, *vr)
	}
	if vr != nil {
		f.budget(id, st).Reset()
	}
	switch {
	case ev.Completion.Complete && vr != nil && ev.Completion.Validation == nil:
		return loop.Outcome{Complete: true, Reason: fmt.Sprintf("completion declared and verified by %s (step %s)", strings.Join(vr.Checked, ", "), id)}, nil
	case ev.Completion.Complete:
		return loop.Outcome{Complete: true, Reason: ev.Completion.Reason}, nil
	case f.machine.Completed():
		return loop.Outcome{Stop: true, CompletionReason: loop.ReasonAborted,
			Reason: fmt.Sprintf("the step flow completed at %q but runner.completion (%s) is not satisfied; use completion type stepFlow to finish with the step flow", id, f.a.spec.Runner.Completion.Type)}, nil
	}
	return loop.Outcome{Reason: describeMoves(ev)}, nil
}

// checkFormat validates structured output; handled is true when a format
// retry was scheduled or the run must stop.
func (f *flow) checkFormat(ctx context.Context, id string, st config.Step, ref config.SchemaRef, s *iteration.Summary) (loop.Outcome, bool, error) {
	c, err := f.a.schemas.get(ref)
	if err != nil {
		return loop.Outcome{}, true, err
	}
	r := f.format.Validate(s, c.validator)
	if r.Valid {
		f.fmtBudgetFor(id, st).Reset()
		if r.Recovered && r.Extracted != nil {
			// The JSON came from prose: hand it on as the structured output.
			if raw, err := json.Marshal(r.Extracted); err == nil {
				s.StructuredOutput = raw
			}
		}
		return loop.Outcome{}, false, nil
	}
	b := f.fmtBudgetFor(id, st)
	d, err := b.Next(completion.ValidationResult{Validator: "format", Pattern: "format-invalid"})
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeSchemaValidation, agenterr.LayerCompletion, false,
			"step %q: the model's output still does not match schema %s#%s", id, ref.File, ref.Schema)
		return loop.Outcome{Stop: true, Err: e, Reason: e.Error(), CompletionReason: ReasonValidationExhausted}, true, nil
	}
	text := completion.FormatRetryPrompt(r, c.raw)
	f.pending = &pendingPrompt{Text: text, Source: "format-retry:" + ref.File + "#" + ref.Schema}
	f.a.emit.Emit(journal.RetryPrompt, RetryPromptEvent{Kind: "format", Step: id, Source: f.pending.Source,
		Attempt: d.Attempt, Max: d.MaxAttempts, Text: text, Warnings: []string{r.Error}})
	return loop.Outcome{Reason: "output format invalid: " + r.Error + "; format retry scheduled"}, true, nil
}

// retryCompletion applies onFailure after a failed verification.
func (f *flow) retryCompletion(ctx context.Context, id string, st config.Step, s *iteration.Summary, vr completion.ValidationResult) (loop.Outcome, error) {
	d, err := f.budget(id, st).Next(vr)
	if err != nil {
		reason := ReasonValidationExhausted
		if errors.Is(err, agenterr.ErrValidationAborted) {
			reason = loop.ReasonAborted
		}
		return loop.Outcome{Stop: true, Err: err, Reason: err.Error(), CompletionReason: reason}, nil
	}
	if d.Action == completion.ActionSkip {
		return loop.Outcome{Complete: true, Reason: fmt.Sprintf("completion declared; %s failed (%s) but onFailure is skip", vr.Validator, vr.Pattern)}, nil
	}
	rp, err := f.retries.BuildRetryPrompt(ctx, st, vr)
	if err != nil {
		return loop.Outcome{}, err
	}
	text := rp.Text
	if note := declarationNote(s); note != "" {
		text += "\n\n" + note
	}
	f.pending = &pendingPrompt{Text: text, Source: "retry:" + vr.Pattern + " (" + rp.Source + ")"}
	f.a.emit.Emit(journal.RetryPrompt, RetryPromptEvent{Kind: "completion", Step: id, Pattern: vr.Pattern, Validator: vr.Validator,
		Params: vr.Params, Source: rp.Source, Attempt: d.Attempt, Max: d.MaxAttempts, Text: text, Warnings: rp.Warnings})
	return loop.Outcome{Reason: fmt.Sprintf("completion declared but %s failed: pattern %s; retry %d/%d", vr.Validator, vr.Pattern, d.Attempt, d.MaxAttempts-1)}, nil
}

func (f *flow) budget(id string, st config.Step) *completion.RetryBudget {
	return budgetFor(f.budgets, id, st)
}

func (f *flow) fmtBudgetFor(id string, st config.Step) *completion.RetryBudget {
	return budgetFor(f.fmtBudget, id, st)
}

func budgetFor(m map[string]*completion.RetryBudget, id string, st config.Step) *completion.RetryBudget {
	if b, ok := m[id]; ok {
		return b
	}
	b, err := completion.NewRetryBudget(st.OnFailure)
	if err != nil { // validated at load; fall back to the default budget
		b, _ = completion.NewRetryBudget(nil)
	}
	m[id] = b
	return b
}

// stepError turns a step-machine error into the run's outcome.
func (f *flow) stepError(err error) (loop.Outcome, error) {
	if errors.Is(err, agenterr.ErrStepLoopLimit) {
		return loop.Outcome{Stop: true, Err: err, Reason: err.Error(), CompletionReason: ReasonStepLoopLimit}, nil
	}
	if e := agenterr.From(err); e != nil && e.Layer == agenterr.LayerStep {
		return loop.Outcome{Stop: true, Err: err, Reason: err.Error()}, nil
	}
	return loop.Outcome{}, err
}

func describeMoves(ev step.Evaluation) string {
	if len(ev.Moves) == 0 {
		return ""
	}
	last := ev.Moves[len(ev.Moves)-1]
	switch last.Kind {
	case step.MoveStay:
		return ev.Completion.Reason
	case step.MoveRetry:
		return fmt.Sprintf("step %s check failed (%s); retrying the step", last.From, ev.Check.Reason)
	}
	return fmt.Sprintf("step %s → %s (%s)", ev.Moves[0].From, last.To, last.Kind)
}

func (f *flow) journalState() {
	f.a.emit.Emit(StepState, StepStateEvent{State: f.machine.Snapshot(), Pending: f.pending})
}

// declarationNote is the part of seed 004's iteration summary a retry
// prompt carries: what the model reported and declared last iteration, so
// it sees the gap between its declaration and the world. The rest of the
// summary (what was done) is already in the session transcript.
func declarationNote(s *iteration.Summary) string {
	d := completion.FormatDeclaration(s)
	if d == "" {
		return ""
	}
	return fmt.Sprintf("### Previous Iteration Decision (iteration %d)\n%sThe completion check above did not confirm that declaration.\n", s.Iteration, d)
}
