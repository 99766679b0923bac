// Package verdict decides, once per iteration, what a finished iteration
// means for the run: complete, retry with a targeted prompt, continue with
// the step's prompt, or stop with a reason and an error.
//
// The decision is made in one place, in one order:
//
//  0. the honest way out: a model that declares the task cannot be done as
//     specified (cannot_complete.go) stops the run (cannot_complete); a
//     model that asks to change a protected test (test_change.go) has its
//     request decided by the agent's policy;
//  1. format: a step with an outputSchemaRef must answer in that schema;
//  2. step check: the step's check is evaluated and its transition taken on
//     a fork of the step machine;
//  3. completion: the completion handler says whether the model declared or
//     reached completion (keyword, structured declaration, budget, step flow,
//     composite, external state, custom);
//  4. verification: whatever claims completion is checked against the world,
//     first by the guards (protected files unchanged), then by the run's
//     validators (runner.completion.validators, whatever the completion
//     type, plus the step's completionConditions, each validator at most
//     once), then by the output guards on what the validators printed (no
//     test lost against the run's start).
//
// In a flow routed by intent (steps with a structuredGate) only a closure
// step's closing claims completion, verified by its validation step; the
// completion handler's claims do not complete such a run, and the abort
// intent stops it like the honest way out (cannot_complete).
//
// Only when the verdict lets the iteration stand is the fork's step
// transition committed to the machine; a failed verification leaves the
// step where it was and sends the failure pattern's retry prompt. Nothing is
// ever rolled back. (A webhook escalation that the step check triggers is
// delivered while the fork is evaluated: a notification cannot wait for a
// verdict that may never commit it, and is journaled only if it commits.)
//
// The stage reads nothing but its Input and its configuration and reaches
// the world only through the guards, the Verifier (validators),
// the step check's Judge and the completion handler, so a caller can run the same
// decision anywhere the iteration's summary is available.
package verdict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/verify"
)

// Actions of a Verdict.
const (
	// Continue runs the next iteration with the (possibly new) current
	// step's prompt.
	Continue event.VerdictAction = "continue"
	// Retry runs the next iteration with Verdict.Retry's prompt.
	Retry event.VerdictAction = "retry"
	// Complete ends the run successfully.
	Complete event.VerdictAction = "complete"
	// Stop ends the run without completion.
	Stop event.VerdictAction = "stop"
)

// Completion reasons a verdict adds to the loop's.
const (
	ReasonValidationExhausted = "validation_exhausted" // onFailure attempts used up
	ReasonStepLoopLimit       = "step_loop_limit"      // STEP_LOOP_LIMIT
	ReasonAborted             = "aborted"              // onFailure abort, escalation abort, step flow ended
	// ReasonCannotComplete: the model declared that the task cannot be
	// done as specified (package honest).
	ReasonCannotComplete = "cannot_complete"
)

// Schemas resolves a step's outputSchemaRef to its raw schema (shown to the
// model in a format retry) and its compiled validator.
type Schemas interface {
	OutputSchema(ref agentdir.SchemaRef) (json.RawMessage, verify.SchemaValidator, error)
}

// Config configures a Stage.
type Config struct {
	// Machine is the run's step machine; the stage commits transitions to
	// it.
	Machine *Machine
	// Checker evaluates step checks.
	Checker *Checker
	// Handler is the run's completion handler.
	Handler CompletionHandler
	// Verifier runs validators.
	Verifier Verifier
	// Validators are runner.completion.validators: they verify every
	// completion, whatever the completion type.
	Validators []string
	// Format checks structured output against a step's schema.
	Format *FormatValidator
	// Schemas resolves outputSchemaRef (required when a step has one).
	Schemas Schemas
	// Retries builds the failure patterns' retry prompts.
	Retries *RetryHandler
	// Events receives completion.check, retry.prompt and the committed
	// step.transition and escalation events (nil = dropped).
	Events event.Emitter
	// CompletionType names runner.completion.type in messages.
	CompletionType string
	// Guards run before the validators whenever verification runs, and
	// fail it like a validator (the protected-files check). Unlike a
	// validator's failure, a guard's is never let stand by onFailure skip.
	Guards []Guard
	// ValidationSteps are the registry's validationSteps: the conditions,
	// onFailure and retry-prompt location of the closure steps they are
	// keyed by.
	ValidationSteps map[string]agentdir.ValidationStep
	// OutputGuards run after the validators passed, on what they printed
	// (no lost tests), and fail verification like a guard: never let
	// stand by onFailure skip.
	OutputGuards []OutputGuard
	// TestChanges decides the model's requests to change protected files
	// (REQUEST_TEST_CHANGE lines); nil when the agent accepts none: the
	// lines are then ignored and a changed protected file fails
	// verification as ever.
	TestChanges TestChangeHandler
}

// Guard is a check of the world that the model must not be able to get
// around: verification runs it first, whatever the step's conditions.
type Guard interface {
	// Name is the guard's name in completion.check's "verified".
	Name() string
	// Check reports a failing result (with a failure pattern and its
	// params) when the guarded state does not hold.
	Check(ctx context.Context) (event.ValidationResult, error)
}

// OutputGuard is a check of what the validators printed: verification
// runs it once every validator passed, on their runs.
type OutputGuard interface {
	// Name is the guard's name in completion.check's "verified".
	Name() string
	// CheckOutputs reports a failing result (with a failure pattern and
	// its params) when the runs break the guard's rule. A passing result
	// with no Validator means it had nothing to check in these runs (it is
	// then not listed in "verified").
	CheckOutputs(ctx context.Context, runs []event.ValidatorRun) (event.ValidationResult, error)
}

// Input is what the stage decides on: the finished iteration.
type Input struct {
	// Iteration is the 1-based number of the iteration.
	Iteration int
	// Summary is its summary. A format check that recovered JSON from prose
	// stores it in Summary.StructuredOutput.
	Summary *event.IterationSummary
	// Summaries are all summaries so far, Summary last.
	Summaries []event.IterationSummary
}

// Verdict is the stage's decision on one iteration.
type Verdict struct {
	Action event.VerdictAction `json:"action"`
	// Reason says why, in words (progress line, iteration.end, Result).
	Reason string `json:"reason,omitempty"`
	// CompletionReason is the run's reason token for Stop; "" lets the
	// loop derive it from Err.
	CompletionReason string `json:"completionReason,omitempty"`
	// Err is the error a Stop ends the run with (it keeps its chain).
	Err error `json:"-"`
	// Step is the step that ran in the iteration.
	Step string `json:"step"`
	// Retry is the prompt of the next iteration when Action is Retry.
	Retry *event.RetryPromptEvent `json:"retry,omitempty"`
	// Check and Moves are the step check and the transitions it caused
	// (committed unless Action is Retry).
	Check CheckResult      `json:"check"`
	Moves []event.StepMove `json:"moves,omitempty"`
	// Completion is the completion handler's result.
	Completion event.CompletionResult `json:"completion"`
	// Validation is the verification, when validators ran.
	Validation *event.ValidationResult `json:"validation,omitempty"`
	// CannotComplete is the model's declaration that the task cannot be
	// done as specified (Action is Stop).
	CannotComplete *event.CannotComplete `json:"cannotComplete,omitempty"`
	// ClosureVerdict is the "verdict" string of the closure step's answer
	// when its verified closing completed the run (e.g. "approved"), for a
	// caller that routes by it.
	ClosureVerdict string `json:"closureVerdict,omitempty"`
}

// PromptSource says where the next iteration's prompt comes from, for the
// journal's prompt.resolved and query.start events: "retry:<pattern>
// (<retry prompt file>)" or "format-retry:<schema>"; "" when the verdict
// is not a retry.
func (v Verdict) PromptSource() string {
	switch {
	case v.Retry == nil:
		return ""
	case v.Retry.Kind == "completion":
		return "retry:" + v.Retry.Pattern + " (" + v.Retry.Source + ")"
	}
	return v.Retry.Source
}

// Stage is the verdict stage of one run. It keeps the per-step attempt
// counts of onFailure and of format retries; it is not safe for concurrent
// use.
type Stage struct {
	cfg       Config
	attempts  map[string]*RetryBudget // per step: completion attempts
	fmtBudget map[string]*RetryBudget // per step: format attempts
	// intents counts, per step, consecutive answers without a readable
	// intent (routed steps).
	intents map[string]*RetryBudget
	buf     buffer
	fork    *Machine         // reused by every Decide
	check   event.CheckEvent // the completion.check payload, reused
	// lastPattern is, per step, the failure pattern of the last retry.
	lastPattern map[string]string
}

// New returns a Stage. Machine, Checker, Handler and Retries are required;
// Verifier is required when any validator is configured.
func New(cfg Config) (*Stage, error) {
	if cfg.Machine == nil || cfg.Checker == nil || cfg.Handler == nil || cfg.Retries == nil {
		return nil, agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerCompletion, false,
			"verdict stage needs a step machine, a step checker, a completion handler and a retry handler")
	}
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	if cfg.Format == nil {
		cfg.Format = NewFormatValidator(FormatConfig{})
	}
	// The budgets' maps are made at the first decision that uses them: a
	// run parked in its first model call holds the Stage without them.
	return &Stage{cfg: cfg}, nil
}

// Decide runs format check → step check → completion → verification on
// the finished iteration and returns the verdict. An error means the stage
// could not decide (a validator could not run, a prompt did not resolve);
// the loop ends the run with it.
func (s *Stage) Decide(ctx context.Context, in Input) (Verdict, error) {
	id, st := s.cfg.Machine.Current()
	v := Verdict{Step: id}

	// 0. The honest way out: a model that says the task cannot be done as
	// specified ends the run, before anything checks its output.
	if d, ok := FindCannotComplete(in.Summary); ok {
		return s.cannotComplete(v, d), nil
	}
	// A request to change a protected test goes to the agent's policy
	// (a human, or the hidden tests), before anything checks the output.
	if s.cfg.TestChanges != nil {
		if asks := FindTestChangeRequest(in.Summary); len(asks) > 0 {
			return s.testChange(ctx, v, in, asks)
		}
	}

	// 1. Format: the output must have the step's schema before anything
	// reads it.
	if ref := st.OutputSchemaRef; ref != nil {
		if done, err := s.format(id, st, *ref, in.Summary, &v); done || err != nil {
			return v, err
		}
	}

	// 2. Step check and transition, on a fork of the machine (s.fork).
	ev, done, err := s.checkStep(ctx, id, st, in, &v)
	if done || err != nil {
		return v, err
	}
	stepDone := ev.StepComplete()

	// 3. Completion: what does the model (or the budget, or the world)
	// claim?
	cr, err := s.cfg.Handler.Check(ctx, CompletionContext{Iteration: in.Iteration, Summary: in.Summary,
		Summaries: in.Summaries, StepComplete: stepDone})
	if err != nil {
		return v, err
	}
	v.Completion = cr

	// 4. Verification of whatever claims completion.
	c := s.claimOf(ev, cr)
	if done, err := s.verifyClaim(ctx, id, st, in, ev, c, &v); done || err != nil {
		return v, err
	}

	// 5. The iteration stands: its step moves, and the run completes,
	// stops or continues.
	s.commit(s.fork)
	s.conclude(id, in, ev, c, &v)
	s.emitCheck(v)
	return v, nil
}

// checkStep evaluates the iteration's step check and transition on a
// fork of the machine (s.fork), and records them in v. done is true when
// the step decides the verdict itself (v is then final): an intent that
// needs a retry or aborts, a step error, a flow that aborted.
func (s *Stage) checkStep(ctx context.Context, id string, st agentdir.Step, in Input, v *Verdict) (ev StepEvaluation, done bool, err error) {
	s.buf.reset()
	s.fork = s.cfg.Machine.Fork(s.fork, &s.buf)
	fork := s.fork
	ev, err = fork.Evaluate(ctx, s.cfg.Checker, InputFromSummary(in.Summary), StepOutcome{Iteration: in.Iteration})
	v.Check, v.Moves = ev.Check, ev.Moves
	if err != nil && errors.Is(err, agenterr.ErrStepIntent) && st.StructuredGate != nil {
		*v, err = s.intentRetry(id, st, err, *v)
		return ev, true, err
	}
	if err != nil {
		s.buf.flush(s.cfg.Events)
		*v, err = stepError(*v, err)
		return ev, true, err
	}
	if st.StructuredGate != nil {
		s.budget(&s.intents, id, st.OnFailure).Reset()
	}
	if ev.Intent != nil && ev.Intent.Intent == agentdir.IntentAbort {
		s.commit(fork)
		*v = s.cannotComplete(*v, event.CannotComplete{Iteration: in.Iteration, Reason: ev.Intent.Reason,
			Evidence: fmt.Sprintf("step %s emitted intent abort", id)})
		return ev, true, nil
	}
	if fork.Aborted() {
		s.commit(fork)
		err := fork.AbortError()
		v.Action, v.Err, v.Reason, v.CompletionReason = Stop, err, err.Error(), ReasonAborted
		s.emitCheck(*v)
		return ev, true, nil
	}
	return ev, false, nil
}

// claim is what an iteration claims, and so what gets verified.
type claim struct {
	// routed: the flow is routed by intent, where only a closure step's
	// closing claims completion.
	routed bool
	// claimed: the iteration claims completion (declared, complete, or
	// its step done); a failed verification then sends a retry.
	claimed bool
	// everyIteration: the completion handler verifies every iteration,
	// claimed or not.
	everyIteration bool
}

// claimOf is the claim of an iteration whose step evaluated to ev and
// whose completion check said cr.
func (s *Stage) claimOf(ev StepEvaluation, cr event.CompletionResult) claim {
	if ev.Intent != nil {
		return claim{routed: true, claimed: ev.StepComplete()}
	}
	c := claim{claimed: cr.Complete || cr.Declared || ev.StepComplete()}
	if e, ok := s.cfg.Handler.(EveryIterationVerifier); ok {
		c.everyIteration = e.VerifyEveryIteration()
	}
	return c
}

// verifyClaim runs the guards and the step's validators when the
// iteration claims completion (or every iteration is verified), and
// records the result in v. done is true when a failure decides the
// verdict (v is then final): a retry of a claim, or a continue when
// nothing was claimed.
func (s *Stage) verifyClaim(ctx context.Context, id string, st agentdir.Step, in Input, ev StepEvaluation, c claim, v *Verdict) (done bool, err error) {
	ver := (&agentdir.Registry{ValidationSteps: s.cfg.ValidationSteps}).VerificationOf(id, st)
	conds := s.conditions(ver.Conditions)
	if (len(conds) == 0 && len(s.cfg.Guards) == 0) || !(c.claimed || c.everyIteration) {
		return false, nil
	}
	vr, err := s.verify(ctx, conds)
	if err != nil {
		return true, err
	}
	v.Validation = &vr
	if vr.Valid {
		s.budget(&s.attempts, id, ver.OnFailure).Reset()
		return false, nil
	}
	if !c.claimed {
		// Verified on every iteration, nothing declared, not done:
		// nothing to retry.
		s.commit(s.fork)
		v.Action, v.Reason = Continue, describeMoves(ev, v.Completion)
		s.emitCheck(*v)
		return true, nil
	}
	said := v.Completion.Reason
	if c.routed {
		said = fmt.Sprintf("closure step %s emitted closing", id)
	}
	*v, err = s.retry(ctx, id, st, ver, said, in.Summary, vr, *v, s.fork)
	return true, err
}

// conclude sets the action of an iteration that stands: complete, stop
// (a flow that ended without satisfying its completion) or continue.
func (s *Stage) conclude(id string, in Input, ev StepEvaluation, c claim, v *Verdict) {
	cr, fork := v.Completion, s.fork
	verified := ""
	if v.Validation != nil {
		verified = "; verified by " + strings.Join(v.Validation.Checked, ", ")
	}
	switch {
	case c.routed && fork.Completed():
		v.Action, v.Reason = Complete, fmt.Sprintf("closure step %s emitted closing%s", id, verified)
		v.ClosureVerdict = closureVerdict(in.Summary)
	case c.routed && cr.Complete && !cr.Declared:
		err := agenterr.New(agenterr.CodeAborted, agenterr.LayerCompletion, false,
			"%s ended the run at step %q before a closure step emitted closing", s.handlerName(cr), id)
		err.Hint = "a flow routed by intent completes only when its closure step emits closing; hand off to the closure step before the budget ends"
		v.Action, v.Err, v.Reason, v.CompletionReason = Stop, err, err.Message, ReasonAborted
	case c.routed:
		v.Action, v.Reason = Continue, describeMoves(ev, cr)
		if cr.Complete || cr.Declared {
			v.Reason += "; the declared completion does not count: only a closure step's closing completes this flow"
		}
	case cr.Complete:
		v.Action, v.Reason = Complete, cr.Reason+verified
	case c.everyIteration && v.Validation != nil:
		v.Action, v.Reason = Complete, "completion conditions hold (not declared)"+verified
	case fork.Completed():
		err := agenterr.New(agenterr.CodeAborted, agenterr.LayerCompletion, false,
			"the step flow completed at %q but runner.completion (%s) is not satisfied", id, s.cfg.CompletionType)
		err.Hint = "use completion type stepFlow to finish with the step flow, or make the final step declare completion"
		v.Action, v.Err, v.Reason, v.CompletionReason = Stop, err, err.Message, ReasonAborted
	default:
		v.Action, v.Reason = Continue, describeMoves(ev, cr)
	}
}

// intentRetry answers a routed step's answer without a readable intent
// (failFast): the same step runs again with a prompt that names the
// problem and the schema, under the step's onFailure attempts; then the
// run stops with STEP_INTENT. The fork is dropped.
func (s *Stage) intentRetry(id string, st agentdir.Step, cause error, v Verdict) (Verdict, error) {
	s.buf.reset()
	d, err := s.budget(&s.intents, id, st.OnFailure).Next(event.ValidationResult{Validator: "intent", Pattern: "intent-missing"})
	if err != nil {
		v.Action, v.Err, v.Reason, v.CompletionReason = Stop, cause, cause.Error(), ReasonValidationExhausted
		s.emitCheck(v)
		return v, nil
	}
	var raw json.RawMessage
	if ref := st.OutputSchemaRef; ref != nil && s.cfg.Schemas != nil {
		raw, _, _ = s.cfg.Schemas.OutputSchema(*ref)
	}
	problem := cause.Error()
	if e := agenterr.From(cause); e != nil {
		problem = e.Message
		if e.Hint != "" {
			problem += "\n" + e.Hint
		}
	}
	text := FormatRetryPrompt(FormatResult{Error: problem}, raw)
	v.Retry = &event.RetryPromptEvent{Kind: "format", Step: id, Source: "intent-retry:" + id,
		Attempt: d.Attempt, Max: d.MaxAttempts, Text: text, Warnings: []string{problem}}
	v.Action = Retry
	v.Reason = fmt.Sprintf("no readable intent (%s); attempt %d of %d failed, format retry sent", problem, d.Attempt, d.MaxAttempts)
	s.emitCheck(v)
	s.cfg.Events.Emit(*v.Retry)
	return v, nil
}

// cannotComplete stops the run on the model's declaration.
func (s *Stage) cannotComplete(v Verdict, d event.CannotComplete) Verdict {
	reason := d.Reason
	if reason == "" {
		reason = "(the model gave no reason)"
	}
	err := agenterr.New(agenterr.CodeAborted, agenterr.LayerCompletion, false,
		"the model declared that the task cannot be done as specified: %s", reason)
	err.Hint = "read its evidence (Result.cannotComplete, capstan show); fix the task, its tests or its prompt, then run again"
	v.Action, v.Err, v.Reason, v.CompletionReason, v.CannotComplete = Stop, err, err.Message, ReasonCannotComplete, &d
	s.emitCheck(v)
	return v
}

// verify runs the guards, then the validators; the first failure ends it.
func (s *Stage) verify(ctx context.Context, conds []agentdir.CompletionCondition) (event.ValidationResult, error) {
	var checked []string
	for _, g := range s.cfg.Guards {
		vr, err := g.Check(ctx)
		if err != nil {
			return vr, err
		}
		checked = append(checked, g.Name())
		if !vr.Valid {
			vr.Checked = checked
			return vr, nil
		}
	}
	if len(conds) == 0 {
		return event.ValidationResult{Valid: true, Checked: checked}, nil
	}
	if s.cfg.Verifier == nil {
		return event.ValidationResult{}, agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerCompletion, false,
			"validators are configured but the verdict stage has no verifier")
	}
	vr, err := s.cfg.Verifier.Validate(ctx, conds)
	vr.Checked = append(checked, vr.Checked...)
	if err != nil || !vr.Valid {
		return vr, err
	}
	for _, g := range s.cfg.OutputGuards {
		r, err := g.CheckOutputs(ctx, vr.Runs)
		if err != nil {
			return r, err
		}
		if r.Validator != "" || !r.Valid {
			vr.Checked = append(vr.Checked, g.Name())
		}
		if !r.Valid {
			r.Checked, r.Runs = vr.Checked, vr.Runs
			return r, nil
		}
	}
	return vr, nil
}

// guarded reports whether a failed verification came from a guard.
func (s *Stage) guarded(vr event.ValidationResult) bool {
	for _, g := range s.cfg.Guards {
		if g.Name() == vr.Validator {
			return true
		}
	}
	for _, g := range s.cfg.OutputGuards {
		if g.Name() == vr.Validator {
			return true
		}
	}
	return false
}

// closureVerdict is the "verdict" string of a closure step's answer.
func closureVerdict(sum *event.IterationSummary) string {
	if sum == nil || len(sum.StructuredOutput) == 0 {
		return ""
	}
	var out struct {
		Verdict any `json:"verdict"`
	}
	if json.Unmarshal(sum.StructuredOutput, &out) != nil {
		return ""
	}
	if s, ok := out.Verdict.(string); ok {
		return s
	}
	return ""
}

// handlerName names the completion handler in messages.
func (s *Stage) handlerName(cr event.CompletionResult) string {
	if s.cfg.CompletionType != "" {
		return fmt.Sprintf("the %s completion (%s)", s.cfg.CompletionType, cr.Reason)
	}
	return "the completion handler (" + cr.Reason + ")"
}

// conditions are the step's conditions (its completionConditions or its
// validation step's validationConditions) followed by the run's
// validators, each validator once (the first naming it, with its params).
func (s *Stage) conditions(step []agentdir.CompletionCondition) []agentdir.CompletionCondition {
	if len(s.cfg.Validators) == 0 {
		return step
	}
	out := make([]agentdir.CompletionCondition, 0, len(step)+len(s.cfg.Validators))
	seen := make(map[string]bool, cap(out))
	for _, c := range step {
		if !seen[c.Validator] {
			seen[c.Validator] = true
			out = append(out, c)
		}
	}
	for _, name := range s.cfg.Validators {
		if !seen[name] {
			seen[name] = true
			out = append(out, agentdir.CompletionCondition{Validator: name})
		}
	}
	return out
}

// commit makes the fork's state the machine's and journals its moves.
func (s *Stage) commit(fork *Machine) {
	s.cfg.Machine.Commit(fork)
	s.buf.flush(s.cfg.Events)
}

func (s *Stage) emitCheck(v Verdict) {
	r := v.Completion
	r.Complete = v.Action == Complete
	r.Reason = v.Reason
	s.check = event.CheckEvent{CompletionResult: r, Verdict: v.Action, ClosureVerdict: v.ClosureVerdict}
	if vr := v.Validation; vr != nil {
		s.check.Verified = vr.Checked
		if !vr.Valid {
			s.check.Validation = vr
		}
	}
	s.cfg.Events.Emit(&s.check)
}

// format checks the structured output against the step's schema; done is
// true when the verdict is made (a format retry or a stop).
func (s *Stage) format(id string, st agentdir.Step, ref agentdir.SchemaRef, sum *event.IterationSummary, v *Verdict) (bool, error) {
	if s.cfg.Schemas == nil {
		return true, agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerCompletion, false,
			"step %q has an outputSchemaRef but the verdict stage has no schemas", id)
	}
	raw, sv, err := s.cfg.Schemas.OutputSchema(ref)
	if err != nil {
		return true, err
	}
	r := s.cfg.Format.Validate(sum, sv)
	if r.Valid {
		s.budget(&s.fmtBudget, id, st.OnFailure).Reset()
		if r.Recovered && r.Extracted != nil {
			// The JSON came from prose: hand it on as the structured output.
			if out, err := json.Marshal(r.Extracted); err == nil {
				sum.StructuredOutput = out
			}
		}
		return false, nil
	}
	d, err := s.budget(&s.fmtBudget, id, st.OnFailure).Next(event.ValidationResult{Validator: "format", Pattern: "format-invalid"})
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeSchemaValidation, agenterr.LayerCompletion, false,
			"step %q: the model's output still does not match schema %s#%s", id, ref.File, ref.Schema)
		v.Action, v.Err, v.Reason, v.CompletionReason = Stop, e, e.Error(), ReasonValidationExhausted
		return true, nil
	}
	text := FormatRetryPrompt(r, raw)
	v.Retry = &event.RetryPromptEvent{Kind: "format", Step: id, Source: "format-retry:" + ref.File + "#" + ref.Schema,
		Attempt: d.Attempt, Max: d.MaxAttempts, Text: text, Warnings: []string{r.Error}}
	v.Action = Retry
	v.Reason = fmt.Sprintf("output format invalid: %s; attempt %d of %d failed, format retry sent", r.Error, d.Attempt, d.MaxAttempts)
	s.cfg.Events.Emit(*v.Retry)
	return true, nil
}

// retry applies the step's onFailure after a failed verification. The
// fork is dropped — the step stays where it was — unless onFailure is skip,
// which lets the iteration stand.
func (s *Stage) retry(ctx context.Context, id string, st agentdir.Step, ver agentdir.StepVerification, claim string, sum *event.IterationSummary, vr event.ValidationResult, v Verdict, fork *Machine) (Verdict, error) {
	d, err := s.budget(&s.attempts, id, ver.OnFailure).Next(vr)
	if err != nil {
		v.Action, v.Err, v.Reason, v.CompletionReason = Stop, err, err.Error(), ReasonValidationExhausted
		if errors.Is(err, agenterr.ErrValidationAborted) {
			v.CompletionReason = ReasonAborted
		}
		s.emitCheck(v)
		return v, nil
	}
	if d.Action == OnFailureSkip && !s.guarded(vr) {
		s.commit(fork)
		v.Action = Complete
		v.Reason = fmt.Sprintf("%s; %s failed (%s) but onFailure is skip", claim, vr.Validator, vr.Pattern)
		s.emitCheck(v)
		return v, nil
	}
	// The retry prompts live where the step's verification says (a
	// validation step's c2/c3, e.g. retry/issue).
	st.C2, st.C3 = ver.C2, ver.C3
	rp, err := s.cfg.Retries.BuildRetryPrompt(ctx, st, vr)
	if err != nil {
		return v, err
	}
	text := rp.Text
	if note := declarationNote(sum); note != "" {
		text += "\n\n" + note
	}
	if s.lastPattern[id] == vr.Pattern {
		text += "\n\n" + RetryNote
	}
	if s.lastPattern == nil {
		s.lastPattern = map[string]string{}
	}
	s.lastPattern[id] = vr.Pattern
	v.Action = Retry
	v.Retry = &event.RetryPromptEvent{Kind: "completion", Step: id, Pattern: vr.Pattern, Validator: vr.Validator,
		Params: vr.Params, Source: rp.Source, Attempt: d.Attempt, Max: d.MaxAttempts,
		Text: text, Warnings: rp.Warnings}
	if claim == "" {
		claim = "completion claimed"
	}
	v.Reason = fmt.Sprintf("%s, but %s failed (pattern %s); attempt %d of %d failed, retry prompt sent",
		claim, vr.Validator, vr.Pattern, d.Attempt, d.MaxAttempts)
	s.emitCheck(v)
	s.cfg.Events.Emit(*v.Retry)
	return v, nil
}

func (s *Stage) budget(mp *map[string]*RetryBudget, id string, onFailure *agentdir.OnFailure) *RetryBudget {
	if b, ok := (*mp)[id]; ok {
		return b
	}
	if *mp == nil {
		*mp = map[string]*RetryBudget{}
	}
	m := *mp
	b, err := NewRetryBudget(onFailure)
	if err != nil { // rejected by validation; the default budget is the safe reading
		b, _ = NewRetryBudget(nil)
	}
	m[id] = b
	return b
}

// stepError turns a step-machine error into the verdict.
func stepError(v Verdict, err error) (Verdict, error) {
	if errors.Is(err, agenterr.ErrStepLoopLimit) {
		v.Action, v.Err, v.Reason, v.CompletionReason = Stop, err, err.Error(), ReasonStepLoopLimit
		return v, nil
	}
	if e := agenterr.From(err); e != nil && e.Layer == agenterr.LayerStep {
		v.Action, v.Err, v.Reason = Stop, err, err.Error()
		return v, nil
	}
	return v, err
}

func describeMoves(ev StepEvaluation, cr event.CompletionResult) string {
	if len(ev.Moves) == 0 {
		return cr.Reason
	}
	last := ev.Moves[len(ev.Moves)-1]
	switch last.Kind {
	case MoveStay:
		return cr.Reason
	case MoveRetry:
		return fmt.Sprintf("step %s check failed (%s); retrying the step", last.From, ev.Check.Reason)
	}
	return fmt.Sprintf("step %s → %s (%s)", ev.Moves[0].From, last.To, last.Kind)
}

// declarationNote is the part of the iteration summary a retry prompt
// carries: what the model reported and declared last iteration, so it sees
// the gap between its declaration and the world. The rest of the summary
// (what was done) is already in the session transcript.
func declarationNote(s *event.IterationSummary) string {
	d := FormatDeclaration(s)
	if d == "" {
		return ""
	}
	return fmt.Sprintf("### Previous Iteration Decision (iteration %d)\n%sThe completion check above did not confirm that declaration.\n", s.Iteration, d)
}

// buffer holds a fork's events until the fork is committed.
type buffer struct {
	events []event.Payload
}

// Emit implements event.Emitter.
func (b *buffer) Emit(p event.Payload) {
	b.events = append(b.events, p)
}

func (b *buffer) reset() { b.events = b.events[:0] }

func (b *buffer) flush(to event.Emitter) {
	for _, p := range b.events {
		to.Emit(p)
	}
	b.reset()
}
