package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/tool"
)

// Loop is one run of capstan's tool loop over a transcript: model turn →
// tool calls → results → … → a turn without tool calls. Agent runs (through
// ToolLoop), the skill runtime and pipeline model stages all run their
// model turns with it, so each gets the same hardening: a bound on turns,
// unique call ids, every call answered, large results truncated, panicking
// tools contained, denied calls journaled, tool calls streamed,
// cancellation honoured between turns and between calls, and a call cut
// off by the output token limit not run.
//
// Each call passes a middleware chain: streaming (ToolStart/ToolEnd to the
// StreamSink in ctx, outermost), the caller's Middleware in order (ToolLoop
// gives JournalTools and the query's tool.Enforce policy), an answer naming
// the offered tools for an unknown tool, truncation to MaxToolOutput, and
// finally tool.Invoke.
type Loop struct {
	// Model plays the turns.
	Model Model
	// Request is the template of every turn (model name, system prompt,
	// tool specs, output schema, sampling); the loop sets Messages.
	Request Request
	// Tools are the callable tools by name. A call of another name is
	// answered with the names in Request.Tools (the tools offered).
	Tools map[string]tool.Tool
	// Middleware wraps each call inside streaming and outside truncation:
	// journaling, a permission policy, a runtime's budgets and evidence.
	Middleware []tool.Middleware
	// Redact, when set, replaces secret values in every model answer
	// (Redactor.Response) before the transcript, the journal, the hooks
	// or the result see it, so the next request carries no secret either.
	Redact Redactor
	// MaxTurns bounds the model turns of one Run (0 = DefaultMaxTurns).
	// Exceeding it is a recoverable MAX_TURNS error.
	MaxTurns int
	// MaxToolCallsPerTurn bounds the tool calls run of one model turn (0 =
	// DefaultMaxToolCallsPerTurn): the calls after it are not run but
	// answered with an error naming the bound, so every call still gets
	// its one result and the model can make them in its next turn. The
	// tool results one turn keeps are bounded too, to MaxTurnToolBytes.
	MaxToolCallsPerTurn int
	// Events receives a model.turn event per turn (nil = none).
	Events event.Emitter
	// Hooks, when set, lets a runtime steer the turns (budgets, exit
	// decisions).
	Hooks Hooks
	// Context, when set, fits every request into the model's context
	// window before it is sent (compaction); msgs[Query] is the prompt of
	// the current query, which it never compacts away. Compactions are
	// journaled as context.compacted events of session SessionID.
	Context   ContextManager
	Query     int
	SessionID string
	// Ledger, when set, journals each turn's answer and each call's intent
	// and continues a query that an earlier, cut attempt of the iteration
	// ran with the same prompt from what it recorded (see Ledger).
	Ledger *Ledger
	// Compacted reports, after Run, that the context manager replaced the
	// transcript's earlier messages (so the whole transcript is new).
	Compacted bool
	// Guarded reports, after Run, that a TurnGuard in the context ended
	// it (its error is Run's).
	Guarded bool
	// replayed says that the current turn's answer came from led (the
	// Run's record in Ledger); known that size was set before Run (see
	// size). Next to the bools above, so that the struct has no padding
	// for them.
	replayed, known bool

	// The Run under way: the transcript, the result, the request of its
	// turns (a copy of Request per Run, which a model may keep), the turn
	// bound, when the turn began and the tool-call handler (built at the
	// first tool call). They live here rather than in Run's stack frame,
	// which is what a run parked in a model call keeps.
	msgs     []event.Message
	res      *event.QueryResult
	req      *Request
	maxTurns int
	start    time.Time
	handle   tool.Handler
	// led is the Run's record in Ledger (nil without one).
	led *ledgerRun
	// size is the transcript's size (Message.Size summed), kept as it
	// grows, so that fitting a request into the context window costs the
	// same on the hundredth turn as on the first. A ToolLoop sets it to
	// its session's size before Run (known); other Runs measure msgs once.
	size int
	// named are a ToolLoop's tools, sorted by name, when Tools is nil.
	named *[]specCached
	// cut is the turn's call the answer was cut off in (max_tokens),
	// which is not run; nil when there is none. A pointer, made when an
	// answer is cut off: a parked query's Loop stays in a smaller size
	// class.
	cut *cutOffCall
	// The turn's calls so far (the one being handled is call number
	// calls) and the bytes of their results kept; reset every turn.
	calls, kept int
}

// tool is the tool called name, nil when there is none.
func (lp *Loop) tool(name string) tool.Tool {
	if lp.named == nil {
		return lp.Tools[name]
	}
	tools := *lp.named
	if i, ok := slices.BinarySearchFunc(tools, name, func(t specCached, name string) int { return strings.Compare(t.spec.Name, name) }); ok {
		return &tools[i]
	}
	return nil
}

// cutOffCall is the call an answer was cut off in: its id, and what cut
// the answer off.
type cutOffCall struct{ id, by string }

// Hooks lets the runtime that owns a Loop steer it between turns.
type Hooks interface {
	// BeforeTurn is called before each model turn (turn counts from 1);
	// returning false ends the Run without error.
	BeforeTurn(ctx context.Context, turn int) bool
	// OnResponse sees each model answer before its tool calls run.
	OnResponse(turn int, resp *Response)
	// AfterTools sees each turn's tool results before they enter the
	// transcript and may change their content; returning true ends the Run
	// without error (the results are still appended, so the transcript
	// stays well formed).
	AfterTools(turn int, results []event.ToolResult) bool
}

// Run continues the conversation msgs (which ends with a user message) and
// returns the grown transcript and what happened. On an error after the
// model was called, the result is non-nil and counts what happened before
// it; after MAX_TURNS the transcript so far is returned as well. A Loop
// runs one Run at a time.
//
// Run itself only issues the model calls: the work before a turn
// (prepare) and after it (answer) is kept out of line, so that a run
// parked in a model call keeps a small frame here.
func (lp *Loop) Run(ctx context.Context, msgs []event.Message) ([]event.Message, *event.QueryResult, error) {
	lp.begin(msgs)
	for {
		if done, err := lp.prepare(ctx); done {
			return lp.ended(err)
		}
		resp, err := lp.generate(ctx)
		if done, err := lp.answer(ctx, resp, err); done {
			return lp.ended(err)
		}
	}
}

// begin sets up the state of a Run over msgs. It is kept out of Run: its
// copy of Request, inlined, would put a Request-sized temporary in Run's
// frame.
//
//go:noinline
func (lp *Loop) begin(msgs []event.Message) {
	req := lp.Request
	lp.msgs, lp.res, lp.req, lp.handle = msgs, &event.QueryResult{}, &req, nil
	lp.Compacted, lp.Guarded = false, false
	lp.led, lp.replayed = nil, false
	if lp.Ledger != nil && len(msgs) > 0 {
		lp.led = lp.Ledger.open(msgs[len(msgs)-1].Text)
	}
	lp.maxTurns = lp.MaxTurns
	if lp.maxTurns <= 0 {
		lp.maxTurns = DefaultMaxTurns
	}
	if !lp.known {
		lp.size = messagesBytes(msgs)
	}
	lp.known = false
}

// ended returns what Run returns and lets go of the Run's state.
func (lp *Loop) ended(err error) ([]event.Message, *event.QueryResult, error) {
	msgs, res := lp.msgs, lp.res
	lp.msgs, lp.res, lp.req, lp.handle, lp.led = nil, nil, nil, nil, nil
	return msgs, res, err
}

// generate plays the current turn: the answer an earlier attempt recorded
// (Ledger), or the model's.
//
//go:noinline
func (lp *Loop) generate(ctx context.Context) (*Response, error) {
	if r := lp.led.recorded(lp.res.Turns); r != nil {
		lp.replayed = true
		c := *r
		c.Message.ToolCalls = slices.Clone(r.Message.ToolCalls)
		if tr, ok := lp.Model.(TurnReplayer); ok {
			tr.TurnReplayed(&c)
		}
		return &c, nil
	}
	lp.replayed = false
	if lp.Events != nil {
		// The usage of a response that a kill cuts while it streams
		// reaches the journal before the turn does.
		turn := lp.res.Turns
		ctx = WithUsageObserver(ctx, func(u event.Usage, unreported bool) {
			lp.events().Emit(event.ModelUsageEvent{Turn: turn, Usage: u, Unreported: unreported})
		})
	}
	return lp.Model.Generate(ctx, lp.req)
}

// events is where the Loop journals (Events, or nowhere).
func (lp *Loop) events() event.Emitter {
	if lp.Events == nil {
		return event.Discard
	}
	return lp.Events
}

// prepare readies the next turn's request: the hooks and the turn bound
// may end the Run first (done), and the context manager fits the
// transcript into the model's window.
//
//go:noinline
func (lp *Loop) prepare(ctx context.Context) (done bool, err error) {
	res := lp.res
	if lp.Hooks != nil && !lp.Hooks.BeforeTurn(ctx, res.Turns+1) {
		return true, nil
	}
	if guard := turnGuardFrom(ctx); guard != nil {
		if err := guard(res.Usage); err != nil {
			lp.Guarded = true
			return true, err
		}
	}
	if res.Turns >= lp.maxTurns {
		e := agenterr.New(agenterr.CodeMaxTurns, agenterr.LayerSDKBridge, true,
			"model used %d turns without a final answer", lp.maxTurns)
		e.Hint = "raise runner.boundaries.maxTurns or give the model a narrower task"
		return true, e
	}
	lp.req.Messages = lp.msgs
	if lp.Context != nil && lp.led.recorded(res.Turns+1) == nil {
		fit, err := lp.fit(ctx)
		res.Usage.Add(fit.Usage)
		if err != nil {
			return true, err
		}
		if fit.Compaction != nil {
			lp.Query -= len(lp.msgs) - len(fit.Messages)
			lp.msgs, lp.Compacted = fit.Messages, true
			lp.size = messagesBytes(lp.msgs)
			lp.req.Messages = lp.msgs
			fit.Compaction.SessionID = lp.SessionID
			lp.events().Emit(fit.Compaction)
		}
	}
	res.Turns++
	lp.start = time.Now()
	return false, nil
}

// fit asks the context manager to fit the current request, telling it the
// transcript's size when it takes it.
func (lp *Loop) fit(ctx context.Context) (Fitted, error) {
	if sc, ok := lp.Context.(sizedContext); ok {
		return sc.fitSized(ctx, lp.req, lp.Query, lp.size)
	}
	return lp.Context.Fit(ctx, lp.req, lp.Query)
}

// answer takes one model answer into the transcript: it redacts it, gives
// its tool calls unique ids, journals the turn, runs the calls and appends
// their results. done reports that the Run ends here (a final answer, a
// failed call, or a hook said stop).
//
//go:noinline
func (lp *Loop) answer(ctx context.Context, resp *Response, err error) (done bool, _ error) {
	if err != nil {
		// A failed turn may have been billed all the same.
		lp.res.Usage.Add(BilledUsage(err))
		lp.res.UnreportedAttempts += BilledUnreported(err)
		return true, err
	}
	if resp == nil {
		return true, agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "model returned no response and no error")
	}
	if lp.Context != nil && !lp.replayed {
		if sc, ok := lp.Context.(sizedContext); ok {
			sc.observeSized(lp.req, lp.size, resp.Usage.Input())
		} else {
			lp.Context.Observe(lp.req, resp.Usage.Input())
		}
	}
	res := lp.res
	res.Usage.Add(resp.Usage)
	res.UnreportedAttempts += resp.UnreportedAttempts
	resp.Message.Role = event.RoleAssistant
	lp.Redact.Response(resp)
	// Every call needs an id its result can answer; give calls that
	// lack one (or repeat one) a unique id before they enter the
	// transcript. An input that is not JSON would cost the journal the
	// query's messages (they could not be encoded): it becomes a string.
	ids := map[string]bool{}
	for i := range resp.Message.ToolCalls {
		c := &resp.Message.ToolCalls[i]
		if len(c.Input) > 0 && !json.Valid(c.Input) {
			c.Input = ToolInput(c.Input)
		}
		if c.ID == "" || ids[c.ID] {
			c.ID = fmt.Sprintf("call_t%d_%d", res.Turns, i+1)
			// The model may have used that id for an earlier call.
			for n := 2; ids[c.ID]; n++ {
				c.ID = fmt.Sprintf("call_t%d_%d_%d", res.Turns, i+1, n)
			}
		}
		ids[c.ID] = true
	}
	lp.msgs = append(lp.msgs, resp.Message)
	lp.size += resp.Message.Size()
	if !lp.replayed {
		mt := event.ModelTurnEvent{Turn: res.Turns, StopReason: resp.StopReason,
			ToolCalls: len(resp.Message.ToolCalls), Usage: resp.Usage, DurationMs: time.Since(lp.start).Milliseconds(),
			UnreportedAttempts: resp.UnreportedAttempts}
		if lp.led != nil {
			lp.led.record(res.Turns, resp)
			mt.Query, mt.Message, mt.StructuredOutput = lp.led.key, &resp.Message, resp.StructuredOutput
		}
		lp.events().Emit(mt)
	}
	if resp.Message.Text != "" {
		res.Responses = append(res.Responses, resp.Message.Text)
	}
	res.StopReason = resp.StopReason
	if lp.Hooks != nil {
		lp.Hooks.OnResponse(res.Turns, resp)
	}
	if len(resp.Message.ToolCalls) == 0 {
		res.StructuredOutput = resp.StructuredOutput
		return true, nil
	}
	if lp.handle == nil {
		lp.handle = lp.handler(ctx)
	}
	h := lp.handle
	// An answer that stopped at the output token limit (or filled the
	// context window) was cut off while it wrote its last call: that
	// call's input is incomplete (the provider hands it over as "{}" or as
	// a string) and is not run.
	lp.cut = nil
	if by := cutOffReasons[resp.StopReason]; by != "" {
		lp.cut = &cutOffCall{id: resp.Message.ToolCalls[len(resp.Message.ToolCalls)-1].ID, by: by}
	}
	results := make([]event.ToolResult, 0, len(resp.Message.ToolCalls))
	lp.calls, lp.kept = 0, 0
	for _, c := range resp.Message.ToolCalls {
		lp.calls++
		call := tool.Call{ID: c.ID, Name: c.Name, Input: c.InputOrEmpty(), Tool: lp.tool(c.Name)}
		use := useOf(call, h(ctx, call))
		res.ToolUses = append(res.ToolUses, use)
		results = append(results, event.ToolResult{CallID: call.ID, Name: call.Name, Content: use.Output, IsError: use.IsError})
	}
	stop := lp.Hooks != nil && lp.Hooks.AfterTools(res.Turns, results)
	lp.msgs = append(lp.msgs, event.Message{Role: event.RoleTool, ToolResults: results})
	lp.size += lp.msgs[len(lp.msgs)-1].Size()
	if stop {
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		return true, agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerSDKBridge, false, "query canceled")
	}
	return false, nil
}

// handler builds the middleware chain of one Run.
func (lp *Loop) handler(ctx context.Context) tool.Handler {
	h := lp.innermost(invokeTruncated)
	for i := len(lp.Middleware) - 1; i >= 0; i-- {
		if lp.Middleware[i] != nil {
			h = lp.Middleware[i](h)
		}
	}
	// The model streams its text to the sink itself (it reads the same
	// context); the loop reports the tool calls it runs.
	if sink := StreamSinkFrom(ctx); sink != nil {
		h = StreamTools(sink)(h)
	}
	return h
}

// innermost is the end of a Run's chain before next (truncation and
// tool.Invoke). As the last check before a tool runs, it refuses the
// calls that must not start: every call once the query is canceled (the
// remaining calls of a turn would otherwise still run after Ctrl-C or the
// end of the time budget, and a tool that ignores its context would still
// change the work dir), and the call the answer was cut off in. It answers
// a call of a tool that does not exist with the list of the tools offered,
// so the model can correct its choice, and passes the others to next.
func (lp *Loop) innermost(next tool.Handler) tool.Handler {
	return func(ctx context.Context, call tool.Call) tool.Outcome {
		if err := ctx.Err(); err != nil {
			return tool.Denial(fmt.Sprintf("not run: the query was canceled (%v)", err))
		}
		if cut := lp.cut; cut != nil && call.ID == cut.id && call.ID != "" {
			return tool.Denial("not run: your answer " + cut.by + " while it wrote this call, " +
				"so its input is incomplete. Make the call again with less input: split large content over several calls.")
		}
		if max := lp.maxToolCalls(); lp.calls > max {
			return tool.Denial(fmt.Sprintf("not run: more than %d tool calls in one turn (runner.boundaries.maxToolCallsPerTurn); "+
				"make this call again in your next turn if you still need it", max))
		}
		if call.Tool == nil {
			return unknownTool(lp.Request.Tools, call)
		}
		if lp.led != nil {
			return lp.keep(lp.led.run(ctx, lp.res.Turns, lp.replayed, call, lp.events(), next))
		}
		return lp.keep(next(ctx, call))
	}
}

// maxToolCalls is the bound on one turn's tool calls.
func (lp *Loop) maxToolCalls() int {
	if lp.MaxToolCallsPerTurn > 0 {
		return lp.MaxToolCallsPerTurn
	}
	return DefaultMaxToolCallsPerTurn
}

// keep counts a result against the turn's byte budget (MaxTurnToolBytes)
// and cuts the part that does not fit, at a UTF-8 boundary, with a marker
// the model reads.
func (lp *Loop) keep(out tool.Outcome) tool.Outcome {
	left := MaxTurnToolBytes - lp.kept
	if len(out.Content) <= left {
		lp.kept += len(out.Content)
		return out
	}
	marker := fmt.Sprintf("\n[output cut: this turn's tool results reached %d bytes, the most one turn keeps; %d bytes of this result not kept — make fewer or narrower calls]",
		MaxTurnToolBytes, len(out.Content)-max(left, 0))
	head := tool.CutUTF8(out.Content, max(left, 0))
	out.Content = head + marker
	lp.kept = MaxTurnToolBytes
	return out
}

// useOf is the record of a handled call.
func useOf(call tool.Call, out tool.Outcome) event.ToolUse {
	return event.ToolUse{ID: call.ID, Name: call.Name, Input: call.Input, Output: out.Content,
		IsError: out.IsError, Denied: out.Denied, DurationMs: out.Duration.Milliseconds(), Replayed: out.Replayed}
}

// JournalTools is tool middleware that journals every call as it ends: a
// tool.denied event for a call refused without running, a tool.call event
// (a ToolUse) for every other, unknown tools and failures included.
func JournalTools(events event.Emitter) tool.Middleware {
	return func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, call tool.Call) tool.Outcome {
			out := next(ctx, call)
			events.Emit(useOf(call, out))
			return out
		}
	}
}

// StreamTools is tool middleware that reports every call to sink: ToolStart
// before anything else runs (a policy check included), ToolEnd with the
// outcome.
func StreamTools(sink StreamSink) tool.Middleware {
	return func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, call tool.Call) tool.Outcome {
			sink.ToolStart(event.ToolCall{ID: call.ID, Name: call.Name, Input: call.Input})
			out := next(ctx, call)
			sink.ToolEnd(useOf(call, out))
			return out
		}
	}
}

// unknownTool is the answer to a call of a tool that does not exist: the
// names of the tools offered.
func unknownTool(offered []tool.Spec, call tool.Call) tool.Outcome {
	names := make([]string, len(offered))
	for i, s := range offered {
		names[i] = s.Name
	}
	list := strings.Join(names, ", ")
	if list == "" {
		list = "none"
	}
	return tool.Outcome{Result: tool.Result{IsError: true,
		Content: fmt.Sprintf("unknown tool %q; available tools: %s", call.Name, list)}}
}
