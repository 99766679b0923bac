// The iteration loop drives iterations — resolve the prompt, query the
// bridge, record the IterationSummary, evaluate completion and steps,
// update the carry — until the flow reports completion or a limit stops
// the run.
//
// The loop knows nothing about prompts, steps or validators: a Flow (the
// agent's, flow.go) decides what each iteration sends and what its outcome
// means. The loop owns the invariants: iteration starts at 0, one summary
// per started iteration (summaries.len == iteration at the end), the
// HARD_LIMIT of 100 iterations whatever the configuration says, the time,
// token and cost budgets, cancellation, and session continuity.

package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/llm"
)

// HardLimit is the most iterations any run may start, whatever its
// configuration says; a run that reaches it stops with HARD_LIMIT.
const HardLimit = 100

// Completion reasons reported in Result.CompletionReason.
const (
	ReasonCompleted     = "completed"      // the flow reported completion
	ReasonEmergencyStop = "emergency_stop" // HardLimit reached
	ReasonMaxIterations = "max_iterations" // budgets.maxIterations reached
	ReasonTimeBudget    = "time_budget"    // budgets.timeoutSeconds elapsed
	ReasonTokenBudget   = "token_budget"   // budgets.maxTokens exceeded
	ReasonCostBudget    = "cost_budget"    // budgets.maxCostUsd exceeded
	ReasonCanceled      = "canceled"       // the caller canceled (Ctrl-C)
	ReasonAborted       = "aborted"        // the flow stopped the run without completion
	ReasonError         = "error"          // an error ended the run
)

// RuntimeContext is the state a run carries from iteration to iteration:
// the session, the iteration count, the summaries so far and the carry. A
// resumed run starts from the one its journal restores.
type RuntimeContext struct {
	// SessionID is the session to continue; "" means a new session.
	SessionID string
	// Iteration counts started iterations (>= 0).
	Iteration int
	// Summaries holds one summary per started iteration.
	Summaries []event.IterationSummary
	// Carry is what the previous iteration handed over.
	Carry event.ContextCarry
	// Unrecorded is the usage (and its cost) of model turns of iterations
	// that never ended — a resumed run's killed iterations — which no
	// summary holds; it counts in the result and the budgets.
	Unrecorded        event.Usage
	UnrecordedCostUSD float64
	// UnreportedResponses counts the responses of those iterations whose
	// usage their provider never reported (RunRecord.UnreportedResponses):
	// Unrecorded misses their tokens. (Those of the iterations that ended
	// are in their summaries, UsageUnreported.)
	UnreportedResponses int
}

// Turn is what the flow wants sent in one iteration.
type Turn struct {
	StepID  string
	Prompt  string
	Source  string // where the prompt came from (file path, "retry:<pattern>", ...)
	Options llm.QueryOptions
	// Bridge, when set, sends this turn to another bridge than the loop's
	// (a step with a model of its own) in the session SessionID ("" = new);
	// the run's own session (RuntimeContext.SessionID) is left as it is.
	Bridge    llm.Bridge
	SessionID string
	// Cost prices this turn's usage when Bridge is set (nil = Config.Cost).
	Cost func(event.Usage) float64
	// Model names Bridge's model ("provider:model") for the journal; ""
	// when the turn uses the run's own model.
	Model string
}

// Outcome is the flow's verdict on a finished iteration.
type Outcome struct {
	// Complete ends the run successfully with Reason.
	Complete bool
	// Stop ends the run without completion (Reason says why; Err, if set,
	// is reported as the run's error).
	Stop   bool
	Reason string
	Err    error
	// CompletionReason overrides the reason token reported for a Stop
	// (e.g. "validation_exhausted"); "" derives it from Err.
	CompletionReason string
	// Redo is set by the loop when the iteration's query did not finish:
	// it failed before any model turn completed (the provider was down),
	// or the run was canceled or ran out of time during it. Such an
	// iteration does not count against budgets.maxIterations, and resume
	// runs it again under its number; the usage of its completed turns
	// still counts.
	Redo bool
	// StepState is the step machine's state after the iteration, which
	// the iteration.end event carries for resume (nil: a Flow without a
	// step machine).
	StepState *event.StepStateEvent
}

// Flow decides what each iteration sends and what it means.
type Flow interface {
	// Next returns the turn for the iteration rc.Iteration (already
	// incremented, >= 1).
	Next(ctx context.Context, rc *RuntimeContext) (Turn, error)
	// After evaluates the finished iteration whose summary is the last of
	// rc.Summaries.
	After(ctx context.Context, rc *RuntimeContext, s *event.IterationSummary) (Outcome, error)
}

// Budgets bound a run; zero means unbounded (HardLimit always applies).
type Budgets struct {
	MaxIterations int
	Timeout       time.Duration
	MaxTokens     int64
	MaxCostUSD    float64
}

// Config builds a Loop.
type LoopConfig struct {
	Bridge llm.Bridge
	Flow   Flow
	// Events receives the loop's events (iteration.start, prompt.resolved,
	// query.start, query.result, iteration.end, error); their payloads
	// carry the run's position (event.Positioner). nil = event.Discard.
	Events  event.Emitter
	Budgets Budgets
	// Cost estimates the USD cost of usage on the bridge's model; nil
	// counts cost only from what the bridge reports.
	Cost func(event.Usage) float64
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// Continuable says that the bridge continues a cut query from its
	// journal (llm.Ledger): an iteration whose query a provider failure
	// that another attempt can fix (SDK_RATE_LIMIT, SDK_CONNECTION) ended
	// after the model had answered is then a redo too, run again from
	// where it failed instead of counted with its work half done.
	Continuable bool
	// Broken, when set, says why the run's own machinery failed while a
	// query ran (nil while it has not): a build cache that the first
	// command needing it could not make. It is asked before each model
	// turn and after each query, and the run ends with its error.
	Broken func() error
}

// Loop runs iterations: each one asks the flow for a prompt, queries the
// model, records the iteration, and lets the flow decide whether the run
// goes on, until the flow reports completion or a limit, a budget, an
// error or the caller stops it.
type Loop struct {
	cfg LoopConfig
	// Event payloads, reused from iteration to iteration so that emitting
	// allocates nothing (consumers copy what they keep).
	start  event.IterationStartEvent
	prompt event.PromptEvent
	end    *event.IterationEvent // made at the first iteration's end
	// it is the iteration under way (iterations run one at a time).
	it iterationState
}

// New returns a Loop. Bridge and Flow are required.
func NewLoop(cfg LoopConfig) (*Loop, error) {
	if cfg.Bridge == nil || cfg.Flow == nil {
		return nil, agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLoop, false, "loop needs a bridge and a flow")
	}
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Loop{cfg: cfg}, nil
}

// LoopResult is how a run of the loop ended, as the loop knows it; the
// agent adds the run's identity to make a Result.
type LoopResult struct {
	Success          bool
	CompletionReason string
	Reason           string
	Iterations       int
	SessionID        string
	Usage            event.Usage
	CostUSD          float64
	// UsageUnreported counts the responses the run was billed for that
	// Usage and CostUSD miss (event.RunResult.UsageUnreported).
	UsageUnreported int
	Duration        time.Duration
	Err             error
	Summaries       []event.IterationSummary
}

// Run drives iterations until completion or a limit. rc.Iteration must be
// 0 for a new run; a resumed run passes the restored context. Run always
// returns a Result; its Success is true only when the flow reported
// completion, and otherwise its Err is set.
func (l *Loop) Run(ctx context.Context, rc *RuntimeContext) *LoopResult {
	s := l.Begin(rc, l.cfg.Now())
	for {
		if res := s.Step(ctx); res != nil {
			return res
		}
	}
}

// Session is a run of the loop driven one iteration at a time: Run is a
// Session stepped to its end, and a driver that must persist the run
// between iterations (a durable workflow engine) steps it itself. A
// Session is not safe for concurrent use.
type Session struct {
	l     *Loop
	rc    *RuntimeContext
	res   *LoopResult
	start time.Time
	done  *LoopResult
	last  event.OutcomeEvent
	// deadline is when the time budget ends, on the real clock (zero =
	// no time budget).
	deadline time.Time
	// guard checks the token and cost budgets before each model turn of
	// an iteration's query (nil = neither budget is set).
	guard llm.TurnGuard
}

// Last returns the outcome of the last iteration Step ran (zero before
// the first).
func (s *Session) Last() event.OutcomeEvent { return s.last }

// Begin starts a Session over rc. started is when the run began (the
// time budget counts from it; a run continued elsewhere passes its
// original start).
func (l *Loop) Begin(rc *RuntimeContext, started time.Time) *Session {
	res := &LoopResult{Usage: rc.Unrecorded, CostUSD: rc.UnrecordedCostUSD, UsageUnreported: rc.UnreportedResponses}
	for _, s := range rc.Summaries {
		res.Usage.Add(s.Usage)
		res.CostUSD += s.CostUSD
		res.UsageUnreported += s.UsageUnreported
	}
	s := &Session{l: l, rc: rc, res: res, start: started}
	if b := l.cfg.Budgets; b.MaxTokens > 0 || b.MaxCostUSD > 0 {
		s.guard = l.turnGuard(res)
	}
	if broken := l.cfg.Broken; broken != nil {
		budgets := s.guard
		s.guard = func(used event.Usage) error {
			if err := broken(); err != nil {
				return err
			}
			if budgets != nil {
				return budgets(used)
			}
			return nil
		}
	}
	if t := l.cfg.Budgets.Timeout; t > 0 {
		// The budget left, measured on the loop's clock, runs out on the
		// real one (a context deadline).
		s.deadline = time.Now().Add(t - l.cfg.Now().Sub(started))
	}
	return s
}

// Usage returns the run's usage and cost so far.
func (s *Session) Usage() (event.Usage, float64) { return s.res.Usage, s.res.CostUSD }

// Step checks the limits and, when none stops the run, runs one
// iteration. It returns nil when the run goes on, or the run's final
// Result (the same one on every later call).
//
// The checks before the iteration (before) and the bookkeeping after it
// (after) are kept out of line, so that Step's stack frame — part of what
// a run parked in a model call keeps — holds only what lives across the
// iteration.
func (s *Session) Step(ctx context.Context) *LoopResult {
	if s.done != nil {
		return s.done
	}
	if !s.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, s.deadline)
		defer cancel()
	}
	if s.before(ctx) {
		return s.done
	}
	it := s.l.iterate(ctx, s.rc, s.guard)
	return s.after(ctx, it)
}

// before checks the limits that apply before a new iteration: when one
// stops the run, it ends it (done) and reports true; otherwise it counts
// the iteration about to run.
//
//go:noinline
func (s *Session) before(ctx context.Context) bool {
	if r, stop := s.l.stopBeforeIteration(ctx, s.rc, s.res); stop {
		s.finish(r.CompletionReason, false, r.Reason, r.Err)
		return true
	}
	s.rc.Iteration++
	return false
}

// after counts a finished iteration into the run; it returns the run's
// Result when the iteration ended the run, or nil.
//
//go:noinline
func (s *Session) after(ctx context.Context, it *iterationState) *LoopResult {
	s.last = outcomeEvent(it.out)
	if e := s.l.settle(ctx, s.rc, s.res, it.s, &it.out); e != nil {
		return s.finish(e.reason, e.success, e.msg, e.err)
	}
	return nil
}

// finish ends the run: its Result, returned by every later Step.
func (s *Session) finish(reason string, success bool, msg string, err error) *LoopResult {
	res, rc := s.res, s.rc
	res.Success, res.CompletionReason, res.Reason, res.Err = success, reason, msg, err
	res.Iterations = rc.Iteration
	res.SessionID = rc.SessionID
	res.Duration = s.l.cfg.Now().Sub(s.start)
	res.Summaries = rc.Summaries
	s.done = res
	return res
}

// runEnd is how a run ends: finish's arguments.
type runEnd struct {
	reason  string
	success bool
	msg     string
	err     error
}

// settle counts a finished iteration into the run and journals its end;
// a non-nil runEnd ends the run. It is kept out of Run (not inlined) so
// that Run's stack frame — part of what a run parked in a model call
// keeps — holds only what lives across iterations.
//
//go:noinline
func (l *Loop) settle(ctx context.Context, rc *RuntimeContext, res *LoopResult, s *event.IterationSummary, outcome *Outcome) *runEnd {
	if outcome.Redo {
		// Its query did not finish: journaled, its billed turns
		// counted, but the iteration is not.
		res.Usage.Add(s.Usage)
		res.CostUSD += s.CostUSD
		res.UsageUnreported += s.UsageUnreported
		l.cfg.Events.Emit(event.IterationEvent{Summary: s, Outcome: outcomeEvent(*outcome), RunUsage: res.Usage, RunCostUSD: res.CostUSD, StepState: outcome.StepState})
		rc.Iteration--
		return &runEnd{reason: reasonForError(ctx, outcome.Err), msg: outcome.Reason, err: outcome.Err}
	}
	rc.Summaries = append(rc.Summaries, *s)
	summary := &rc.Summaries[len(rc.Summaries)-1]
	rc.Carry = event.UpdateCarry(rc.Carry, summary)
	res.Usage.Add(s.Usage)
	res.CostUSD += s.CostUSD
	res.UsageUnreported += s.UsageUnreported
	if l.end == nil {
		l.end = new(event.IterationEvent)
	}
	*l.end = event.IterationEvent{Summary: summary, Outcome: outcomeEvent(*outcome), RunUsage: res.Usage, RunCostUSD: res.CostUSD, StepState: outcome.StepState}
	l.cfg.Events.Emit(l.end)
	switch {
	case outcome.Complete:
		return &runEnd{reason: ReasonCompleted, success: true, msg: outcome.Reason}
	case outcome.Stop:
		if ctx.Err() != nil && outcome.CompletionReason == "" {
			// Interrupted while the iteration's validators ran: the run
			// is canceled (resumable), not failed by a validator that
			// could not finish.
			outcome.Err = stopError(reasonForError(ctx, ctx.Err()))
		}
		if outcome.Err == nil {
			// A run that did not succeed always says why in an error.
			outcome.Err = agenterr.New(agenterr.CodeAborted, agenterr.LayerLoop, false, "%s", outcome.Reason)
		}
		reason := outcome.CompletionReason
		if reason == "" {
			reason = reasonForError(ctx, outcome.Err)
			if reason == ReasonError && agenterr.CodeOf(outcome.Err) == agenterr.CodeAborted {
				reason = ReasonAborted
			}
		}
		return &runEnd{reason: reason, msg: outcome.Reason, err: outcome.Err}
	}
	return nil
}

// stopBeforeIteration checks the limits that apply before a new iteration.
func (l *Loop) stopBeforeIteration(ctx context.Context, rc *RuntimeContext, res *LoopResult) (*LoopResult, bool) {
	b := l.cfg.Budgets
	switch {
	case ctx.Err() != nil:
		reason := reasonForError(ctx, ctx.Err())
		return &LoopResult{CompletionReason: reason, Reason: "stopped before iteration " + fmt.Sprint(rc.Iteration+1), Err: stopError(reason)}, true
	case rc.Iteration >= HardLimit:
		return &LoopResult{CompletionReason: ReasonEmergencyStop, Reason: fmt.Sprintf("Hard limit exceeded: %d", HardLimit),
			Err: agenterr.New(agenterr.CodeHardLimit, agenterr.LayerLoop, false, "hard limit of %d iterations reached", HardLimit)}, true
	case b.MaxIterations > 0 && rc.Iteration >= b.MaxIterations:
		e := agenterr.New(agenterr.CodeBudgetExceeded, agenterr.LayerLoop, true, "iteration budget of %d used without completion", b.MaxIterations)
		e.Hint = "resume the run with a larger --max-iterations, or check why the completion condition is not met"
		return &LoopResult{CompletionReason: ReasonMaxIterations, Reason: fmt.Sprintf("reached budgets.maxIterations (%d) without completion", b.MaxIterations), Err: e}, true
	}
	if over := l.overBudget(res.Usage, res.CostUSD); over != nil {
		return over, true
	}
	return nil, false
}

// overBudget returns how the run ends when usage (costing cost) reached
// the token or cost budget, or nil.
func (l *Loop) overBudget(usage event.Usage, cost float64) *LoopResult {
	b := l.cfg.Budgets
	switch {
	case b.MaxTokens > 0 && usage.Total() >= b.MaxTokens:
		return &LoopResult{CompletionReason: ReasonTokenBudget, Reason: fmt.Sprintf("used %d tokens, budget %d", usage.Total(), b.MaxTokens),
			Err: agenterr.New(agenterr.CodeBudgetExceeded, agenterr.LayerLoop, false, "token budget of %d exceeded", b.MaxTokens)}
	case b.MaxCostUSD > 0 && cost >= b.MaxCostUSD:
		return &LoopResult{CompletionReason: ReasonCostBudget, Reason: fmt.Sprintf("cost $%.4f, budget $%.4f", cost, b.MaxCostUSD),
			Err: agenterr.New(agenterr.CodeBudgetExceeded, agenterr.LayerLoop, false, "cost budget of $%.4f exceeded", b.MaxCostUSD)}
	}
	return nil
}

// turnGuard checks the token and cost budgets before each model turn of
// an iteration's query: the run's usage so far (res) and the query's
// turns together. When a budget is reached it notes how the run ends in
// the iteration (over) and stops the query with that error.
func (l *Loop) turnGuard(res *LoopResult) llm.TurnGuard {
	return func(used event.Usage) error {
		it := &l.it
		usage, cost := res.Usage, res.CostUSD
		usage.Add(used)
		if it.cost != nil {
			cost += it.cost(used)
		}
		it.over = l.overBudget(usage, cost)
		if it.over == nil {
			return nil
		}
		return it.over.Err
	}
}

// iterate runs one iteration; the iteration it returns holds its summary
// and outcome.
//
// What comes before and after the query is in beginIteration and
// endIteration, kept out of line, so that iterate's stack frame — part of
// what a run parked in a model call keeps — holds only the query's call.
//
// guard, when set, checks the budgets before each model turn of the
// iteration's query (only that query: the flow's own, such as a step
// check's judge, are not the iteration's turns).
func (l *Loop) iterate(ctx context.Context, rc *RuntimeContext, guard llm.TurnGuard) *iterationState {
	it := l.beginIteration(ctx, rc)
	if it.ended {
		return it
	}
	qctx := llm.WithTurnGuard(ctx, guard)
	qr, err := it.query(qctx)
	if l.reconnect(it, err) {
		lost := qr
		if guard != nil && answered(lost) {
			// The budgets count the lost attempt's turns too.
			qctx = llm.WithTurnGuard(ctx, func(used event.Usage) error {
				used.Add(lost.Usage)
				return guard(used)
			})
		}
		qr, err = it.query(qctx)
		qr = it.withLost(qr, lost)
	}
	l.endIteration(ctx, rc, it, qr, err)
	return it
}

// query asks the iteration's bridge. The shared tool loop takes the
// options by pointer: Bridge.Query takes them by value, and a call of it
// holds two copies of them (about 340 bytes) in its caller's frame, which
// is part of a parked run's stack; other bridges are asked out of line.
func (it *iterationState) query(ctx context.Context) (*event.QueryResult, error) {
	if tl, ok := it.bridge.(*llm.ToolLoop); ok {
		return tl.QueryWith(ctx, it.s.Prompt, &it.opts)
	}
	return it.queryBridge(ctx)
}

// queryBridge asks a bridge other than the shared tool loop.
//
//go:noinline
func (it *iterationState) queryBridge(ctx context.Context) (*event.QueryResult, error) {
	return it.bridge.Query(ctx, it.s.Prompt, it.opts)
}

// reconnect reports whether a query that failed because the backend lost
// its session is to be asked again, once, in a new session (a reconnect);
// it journals the warning and forgets the session.
//
//go:noinline
func (l *Loop) reconnect(it *iterationState, err error) bool {
	if err == nil || !errors.Is(err, agenterr.ErrSdkSessionNotFound) || it.opts.SessionID == "" {
		return false
	}
	l.cfg.Events.Emit(event.WarningEvent{Message: "session disconnected; starting a new session", SessionID: it.opts.SessionID})
	it.opts.SessionID = ""
	return true
}

// withLost counts into qr, the query asked again in a new session, what
// the attempt that found its session lost had done: its billed turns (and
// their cost) and its tool calls.
func (it *iterationState) withLost(qr, lost *event.QueryResult) *event.QueryResult {
	if !answered(lost) {
		return qr
	}
	if qr == nil {
		qr = &event.QueryResult{}
	}
	costOf := func(q *event.QueryResult) float64 {
		if q.CostUSD == 0 && it.cost != nil {
			return it.cost(q.Usage)
		}
		return q.CostUSD
	}
	qr.CostUSD = costOf(lost) + costOf(qr)
	qr.Usage.Add(lost.Usage)
	qr.UnreportedAttempts += lost.UnreportedAttempts
	qr.Turns += lost.Turns
	qr.ToolUses = append(slices.Clip(lost.ToolUses), qr.ToolUses...)
	return qr
}

// iterationState is one iteration under way: its summary (with the
// prompt), and the query of its turn and where it goes.
type iterationState struct {
	s      *event.IterationSummary
	began  time.Time
	opts   llm.QueryOptions
	bridge llm.Bridge
	own    bool // the query runs in the run's own session
	cost   func(event.Usage) float64
	// out is the iteration's outcome; ended says it is known before any
	// query (the flow failed).
	out   Outcome
	ended bool
	// over is how the run ends when a budget stopped the query (nil =
	// none did).
	over *LoopResult
}

// fail ends the iteration with err.
func (l *Loop) fail(it *iterationState, err error) {
	s := it.s
	s.Errors = append(s.Errors, err.Error())
	s.DurationMs = l.cfg.Now().Sub(it.began).Milliseconds()
	l.cfg.Events.Emit(errorEvent(err))
	it.out = Outcome{Stop: true, Reason: err.Error(), Err: err}
}

// beginIteration starts an iteration: it asks the flow for the turn and
// journals it. An iteration that ended (the flow failed) has its outcome
// already.
//
//go:noinline
func (l *Loop) beginIteration(ctx context.Context, rc *RuntimeContext) *iterationState {
	it := &l.it
	*it = iterationState{began: l.cfg.Now()}
	it.s = &event.IterationSummary{Iteration: rc.Iteration, SessionID: rc.SessionID, Timestamp: it.began,
		AssistantResponses: []string{}, ToolsUsed: []event.ToolUse{}, DetectedActions: []event.DetectedAction{}, Errors: []string{}}
	l.start.Iteration = rc.Iteration
	l.cfg.Events.Emit(&l.start)
	turn, err := l.cfg.Flow.Next(ctx, rc)
	if err != nil {
		l.fail(it, err)
		it.ended = true
		return it
	}
	it.s.StepID, it.s.Prompt = turn.StepID, turn.Prompt
	l.prompt = event.PromptEvent{Source: turn.Source, Text: turn.Prompt, Iteration: rc.Iteration, Step: turn.StepID}
	l.cfg.Events.Emit(&l.prompt)
	model := ""
	it.bridge, it.own, it.cost = l.cfg.Bridge, true, l.cfg.Cost
	it.opts = turn.Options
	it.opts.SessionID = rc.SessionID
	if turn.Bridge != nil {
		// The step's own model prices its usage; one with no known price
		// costs 0 (the provider's own figure, when it reports one,
		// counts), never the run's model's price.
		it.bridge, it.own, it.opts.SessionID, model, it.cost = turn.Bridge, false, turn.SessionID, turn.Model, turn.Cost
	}
	l.cfg.Events.Emit(event.QueryStartEvent{SessionID: it.opts.SessionID, Source: turn.Source, Model: model})
	return it
}

// endIteration takes the query's result (or error) into the summary and
// asks the flow what the iteration means (it.out).
//
//go:noinline
func (l *Loop) endIteration(ctx context.Context, rc *RuntimeContext, it *iterationState, qr *event.QueryResult, err error) {
	s, cost := it.s, it.cost
	if broken := l.cfg.Broken; broken != nil {
		if berr := broken(); berr != nil {
			err = berr
		}
	}
	if err != nil {
		interrupted := ctx.Err() != nil
		if interrupted {
			err = stopError(reasonForError(ctx, ctx.Err()))
		}
		if qr != nil {
			// A query that ran out of turns kept its transcript in its
			// session, to be continued.
			it.takeSession(rc, qr)
			// Turns that completed before the failure were billed: count them.
			s.Usage, s.CostUSD, s.UsageUnreported = qr.Usage, qr.CostUSD, qr.UnreportedAttempts
			if s.CostUSD == 0 && cost != nil {
				s.CostUSD = cost(qr.Usage)
			}
			s.ToolsUsed = append(s.ToolsUsed, qr.ToolUses...)
		}
		l.fail(it, err)
		it.out.Redo = interrupted || !answered(qr) || (l.cfg.Continuable && providerOutage(err))
		if over := it.over; over != nil && !interrupted && errors.Is(err, over.Err) {
			it.out.Reason, it.out.CompletionReason = over.Reason, over.CompletionReason
		}
		return
	}
	it.takeSession(rc, qr)
	s.AssistantResponses = append(s.AssistantResponses, qr.Responses...)
	s.ToolsUsed = append(s.ToolsUsed, qr.ToolUses...)
	s.StructuredOutput = qr.StructuredOutput
	s.Usage = qr.Usage
	s.CostUSD = qr.CostUSD
	s.UsageUnreported = qr.UnreportedAttempts
	if s.CostUSD == 0 && cost != nil {
		s.CostUSD = cost(qr.Usage)
	}
	for _, t := range qr.ToolUses {
		s.DetectedActions = append(s.DetectedActions, event.DetectedAction{Type: "tool:" + t.Name})
		s.ActionResults = append(s.ActionResults, event.ActionResult{Action: t.Name, Success: !t.IsError, Output: t.Output})
	}
	l.cfg.Events.Emit(qr)
	out, err := l.cfg.Flow.After(ctx, rc, s)
	s.DurationMs = l.cfg.Now().Sub(it.began).Milliseconds()
	if err != nil {
		l.fail(it, err)
		it.out.StepState = out.StepState // the state a failed verdict left, for resume
		return
	}
	it.out = out
}

// takeSession records the session the iteration's query ran in (the one
// asked for, unless the bridge names another) in the summary, and, for
// the run's own bridge, as the session to continue.
func (it *iterationState) takeSession(rc *RuntimeContext, qr *event.QueryResult) {
	s := it.s
	s.SessionID = it.opts.SessionID
	if qr.SessionID != "" {
		s.SessionID = qr.SessionID
	}
	if it.own {
		rc.SessionID = s.SessionID
	}
}

// answered reports whether a failed query got at least one model turn
// back: billed usage, a response or a tool call. (qr.Turns counts the
// failed attempt too.)
// providerOutage reports an error a later attempt of the same request can
// get past: the provider rate limits or is unreachable or overloaded.
func providerOutage(err error) bool {
	e := agenterr.From(err)
	return e != nil && e.Recoverable && (e.Code == agenterr.CodeSdkRateLimit || e.Code == agenterr.CodeSdkConnection)
}

func answered(qr *event.QueryResult) bool {
	return qr != nil && (qr.Usage != event.Usage{} || len(qr.Responses) > 0 || len(qr.ToolUses) > 0)
}

func outcomeEvent(o Outcome) event.OutcomeEvent {
	e := event.OutcomeEvent{Complete: o.Complete, Stop: o.Stop, Reason: o.Reason, Redo: o.Redo}
	if o.Err != nil {
		e.Error = o.Err.Error()
	}
	return e
}

func errorEvent(err error) event.ErrorEvent {
	return event.ErrorEvent{Code: agenterr.CodeOf(err), Message: err.Error(), Recoverable: agenterr.IsRecoverable(err)}
}

// reasonForError maps a run-ending error to a completion reason.
func reasonForError(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, agenterr.ErrTimeBudget), errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ReasonTimeBudget
	case errors.Is(err, agenterr.ErrCanceled), errors.Is(ctx.Err(), context.Canceled):
		return ReasonCanceled
	}
	return ReasonError
}

func stopError(reason string) error {
	// One line that says what happened: the cancellation's own chain
	// ("query canceled: context canceled") adds nothing.
	if reason == ReasonTimeBudget {
		return agenterr.New(agenterr.CodeTimeBudget, agenterr.LayerLoop, false, "time budget exhausted (runner.budgets.timeoutSeconds)")
	}
	return agenterr.New(agenterr.CodeCanceled, agenterr.LayerLoop, true, "run canceled (interrupted); its journal is complete up to here")
}
