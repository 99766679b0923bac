package llm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/tool"
)

// DefaultMaxTurns bounds model turns per query when neither the query nor
// the provider config sets a bound.
const DefaultMaxTurns = 25

// MaxToolOutput caps what one tool result may put into the transcript.
const MaxToolOutput = 100 << 10

// DefaultMaxToolCallsPerTurn bounds the tool calls run of one model turn
// when neither the Loop nor the provider config sets a bound. Real turns
// make a handful of calls, a wide exploration a few dozen; the calls past
// the bound are answered with an error the model reads, not run.
const DefaultMaxToolCallsPerTurn = 64

// MaxTurnToolBytes bounds the bytes of tool results one model turn keeps
// in the transcript (and so in the journal and the next request): a
// result that would pass it is cut with a marker saying so. It is larger
// than any model's context window, so a turn that fits a window is never
// cut.
const MaxTurnToolBytes = 4 << 20

// ToolLoop turns a Model into a Bridge: each query runs the shared tool
// loop (Loop: model → tool calls → results → … → final answer, bounded by
// max turns) with the query's tool policy (tool.Enforce) and journaling
// (JournalTools) as tool-call middleware. Sessions are transcripts kept in memory and written to the
// journal (session.messages events), so a run can be resumed from its
// journal on every backend.
type ToolLoop struct {
	model Model
	cfg   loopConfig
	tools map[string]tool.Tool
	// byName holds the tools with their specs, sorted by name; tools
	// points into it.
	byName []specCached
	// journal is the tool-call journaling middleware of every query.
	journal tool.Middleware

	mu sync.Mutex
	// chain is what the last policy queried with decided; an agent
	// queries with the same policy every iteration.
	chain    policyChain
	sessions map[string]session
	// busy lists the sessions a query is extending: the query appends to
	// the session's own slice, so a second concurrent query on the same
	// session must work on a copy. (A list: a loop runs few queries at
	// once.)
	busy []string
	last string
}

// session is a session's transcript and its size (Message.Size summed),
// kept as the transcript grows so that no query has to measure it again.
type session struct {
	msgs  []Message
	bytes int
}

// loopConfig is the part of its Config a ToolLoop keeps.
type loopConfig struct {
	Model    string
	WorkDir  string
	Events   event.Emitter
	MaxTurns int
	// MaxToolCallsPerTurn bounds each turn's tool calls (0 = default).
	MaxToolCallsPerTurn int
	Redact              Redactor
	Context             ContextManager
	Ledger              *Ledger
}

// NewToolLoop wraps m in the shared tool loop.
func NewToolLoop(m Model, cfg Config) *ToolLoop {
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	l := &ToolLoop{model: m, tools: make(map[string]tool.Tool, len(cfg.Tools)), journal: JournalTools(cfg.Events),
		cfg: loopConfig{Model: cfg.Model, WorkDir: cfg.WorkDir, Events: cfg.Events, MaxTurns: cfg.MaxTurns,
			MaxToolCallsPerTurn: cfg.MaxToolCallsPerTurn, Redact: cfg.Redact, Context: cfg.Context, Ledger: cfg.Ledger}}
	l.byName = make([]specCached, len(cfg.Tools))
	for i, t := range cfg.Tools {
		l.byName[i] = specCached{Tool: t, spec: t.Spec()}
	}
	// Of tools with the same name, the last one given counts.
	sort.SliceStable(l.byName, func(i, j int) bool { return l.byName[i].spec.Name < l.byName[j].spec.Name })
	for i := range l.byName {
		l.tools[l.byName[i].spec.Name] = &l.byName[i]
	}
	for id, msgs := range cfg.Transcripts {
		// Clipped: queries extend a session in place, which must not
		// write into the caller's array (another loop may be seeded
		// with it too).
		l.setSession(id, slices.Clip(msgs), messagesBytes(msgs))
	}
	return l
}

// SessionID returns the session of the last query, or "".
func (l *ToolLoop) SessionID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Transcript returns a copy of a session's messages.
func (l *ToolLoop) Transcript(sessionID string) []Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Message(nil), l.sessions[sessionID].msgs...)
}

// Close releases the model if it holds resources.
func (l *ToolLoop) Close() error {
	if c, ok := l.model.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// SessionMessagesEvent is the payload of a session.messages journal event:
// the messages one query appended to a session, or, when Replace is set,
// the session's whole transcript after the query compacted it.
type SessionMessagesEvent struct {
	SessionID string    `json:"session_id"`
	Messages  []Message `json:"messages"`
	Replace   bool      `json:"replace,omitempty"`
}

// ModelTurnEvent is the payload of a model.turn journal event.
type ModelTurnEvent struct {
	Turn       int    `json:"turn"`
	StopReason string `json:"stop_reason,omitempty"`
	ToolCalls  int    `json:"tool_calls"`
	Usage      Usage  `json:"usage"`
	DurationMs int64  `json:"duration_ms"`
	// Query, Message and StructuredOutput are written by a tool loop with
	// a Ledger: the query's ledger key (the digest of its prompt) and the
	// answer as it entered the transcript, so that an iteration run again
	// after a kill continues from this turn instead of asking the model
	// again. Older journals have none.
	Query            string          `json:"query,omitempty"`
	Message          *Message        `json:"message,omitempty"`
	StructuredOutput json.RawMessage `json:"structured_output,omitempty"`
}

// Query implements Bridge. When it fails after the model has been called,
// the returned result is non-nil and holds what happened before the failure
// (turns, usage, tool uses) so that budgets can count it; the session is
// then left as it was, except after MAX_TURNS or a stop by a TurnGuard in
// ctx, where the transcript so far is kept.
//
// A StreamSink in ctx (WithStreamSink) is told about every tool call the
// loop handles, denied and unknown ones included: ToolStart before the
// policy check, ToolEnd with the outcome.
func (l *ToolLoop) Query(ctx context.Context, prompt string, opts QueryOptions) (*QueryResult, error) {
	return l.QueryWith(ctx, prompt, &opts)
}

// QueryWith is Query with the options by pointer; it neither changes nor
// keeps them. A caller that asks many queries (an agent's iterations)
// passes its options without copying them into its stack frame, which is
// part of what a run parked in a model call keeps.
func (l *ToolLoop) QueryWith(ctx context.Context, prompt string, opts *QueryOptions) (*QueryResult, error) {
	q, msgs, err := l.begin(prompt, opts)
	if err != nil {
		return nil, err
	}
	defer l.end(q)
	msgs, res, err := q.lp.Run(ctx, msgs)
	l.settle(q, msgs, res, err)
	return res, err
}

// settle takes a finished query's transcript into its session when the
// query succeeded, ran out of turns or was stopped by a TurnGuard (a
// failed query leaves the session as it was).
func (l *ToolLoop) settle(q *query, msgs []Message, res *QueryResult, err error) {
	if res != nil {
		res.SessionRenewed = q.renewed
	}
	if err == nil || q.lp.Guarded || agenterr.CodeOf(err) == agenterr.CodeMaxTurns {
		prior := q.prior // messages the session had; -1 once compaction replaced them
		if q.lp.Compacted {
			prior = -1
		}
		l.commit(q.sid, msgs, q.lp.size, prior, res)
	}
}

// query is one Query under way: its session and the Loop that runs it.
type query struct {
	lp      Loop
	sid     string
	prior   int  // messages the session had before the query
	renewed bool // the asked-for session was unknown: sid is new
	owned   bool // the query holds the session (release it at the end)
}

// queries are reused from query to query (a query is a few hundred bytes
// that every query would otherwise allocate).
var queries = sync.Pool{New: func() any { return new(query) }}

// begin checks a query's prompt, finds or starts its session and builds
// its Loop; msgs is the transcript to run, the session's and the prompt.
// It is kept out of Query (not inlined), takes the options by pointer, and
// the query lives on the heap, so that Query's stack frame — part of what
// a run parked in a model call keeps — holds only what lives across the
// call. end releases it.
//
//go:noinline
func (l *ToolLoop) begin(prompt string, opts *QueryOptions) (_ *query, msgs []Message, _ error) {
	if strings.TrimSpace(prompt) == "" {
		return nil, nil, agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "query prompt is empty")
	}
	l.mu.Lock()
	q := queries.Get().(*query)
	*q = query{sid: opts.SessionID}
	held, known := l.sessions[q.sid]
	if q.sid == "" || !known {
		q.renewed = q.sid != ""
		q.sid = newSessionID()
		held = session{}
	}
	history := held.msgs
	q.prior = len(history)
	// The query appends to the session's slice in place (amortized growth,
	// no copy of the transcript per query); the session keeps its old
	// length until commit, so a failed query leaves it as it was.
	msgs = history
	if slices.Contains(l.busy, q.sid) {
		msgs = slices.Clone(history)
	} else {
		l.busy = append(l.busy, q.sid)
		q.owned = true
	}
	l.mu.Unlock()

	policy := tool.Policy{Allowed: opts.AllowedTools, Disallowed: opts.DisallowedTools,
		Mode: opts.PermissionMode, WorkDir: l.cfg.WorkDir, Boundary: opts.Boundary}
	chain := l.chainFor(policy)
	maxTurns := opts.MaxTurns
	if maxTurns <= 0 {
		maxTurns = l.cfg.MaxTurns
	}

	query := len(msgs) // index of this query's prompt
	msgs = append(msgs, Message{Role: RoleUser, Text: prompt, Pinned: opts.Instructions})
	size := held.bytes + msgs[query].Size()
	q.lp = Loop{
		Model: l.model,
		Request: Request{Model: l.cfg.Model, System: opts.SystemPrompt, Tools: chain.specs,
			OutputSchema: opts.OutputSchema, OutputSchemaName: opts.OutputName},
		Tools: l.tools, MaxTurns: maxTurns, MaxToolCallsPerTurn: l.cfg.MaxToolCallsPerTurn, Events: l.cfg.Events,
		Middleware: chain.mw, Redact: l.cfg.Redact,
		Context: l.cfg.Context, Query: query, SessionID: q.sid, Ledger: l.cfg.Ledger, size: size, known: true,
	}
	return q, msgs, nil
}

// end ends a query: it releases the query's hold on its session and
// returns the query, emptied, for reuse.
func (l *ToolLoop) end(q *query) {
	if q.owned {
		l.mu.Lock()
		l.busy = slices.DeleteFunc(l.busy, func(sid string) bool { return sid == q.sid })
		l.mu.Unlock()
	}
	*q = query{}
	queries.Put(q)
}

// policyChain is what a query policy decides for every query that uses
// it: the tools offered and the tool-call middleware.
type policyChain struct {
	policy tool.Policy
	specs  []tool.Spec // the tools the policy lets the model use, by name
	mw     []tool.Middleware
}

// chainFor returns the offered tools and the tool-call middleware
// (journaling, then the policy) of a query with policy p. They are worked
// out once per distinct policy in a row, so queries that repeat their
// options (an agent's iterations) allocate nothing for them.
func (l *ToolLoop) chainFor(p tool.Policy) policyChain {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.chain; c.mw != nil && c.policy.Mode == p.Mode && c.policy.WorkDir == p.WorkDir && c.policy.Boundary == p.Boundary &&
		slices.Equal(c.policy.Allowed, p.Allowed) && slices.Equal(c.policy.Disallowed, p.Disallowed) {
		return c
	}
	// The policy keeps its own copy of the patterns: a caller that reuses
	// its slices cannot change a cached policy.
	p.Allowed, p.Disallowed = slices.Clone(p.Allowed), slices.Clone(p.Disallowed)
	c := policyChain{policy: p, mw: []tool.Middleware{l.journal, tool.Enforce(p)}}
	// The list is made to the size of the tools offered (an agent's
	// policy usually leaves some out; it is kept while the agent runs).
	var buf [16]*specCached
	offered := buf[:0]
	for i := range l.byName {
		t := &l.byName[i]
		if l.tools[t.spec.Name] == tool.Tool(t) && p.MayUse(t) {
			offered = append(offered, t)
		}
	}
	c.specs = make([]tool.Spec, len(offered))
	for i, t := range offered {
		c.specs[i] = t.spec
	}
	// Queries share the list; its capacity is its length, so an append
	// to one query's Request.Tools copies instead of writing into the
	// others'.
	l.chain = c
	return c
}

// setSession makes msgs the transcript of session id (the map is made by
// the first session that ends a query, so an agent parked in its first
// query holds none). Called with l.mu held, or before l is shared.
func (l *ToolLoop) setSession(id string, msgs []Message, bytes int) {
	if l.sessions == nil {
		l.sessions = map[string]session{}
	}
	l.sessions[id] = session{msgs: msgs, bytes: bytes}
}

// commit makes msgs (of bytes bytes) the session's transcript and journals
// what changed: the messages after the first prior ones, or (prior < 0,
// after compaction) the whole transcript.
func (l *ToolLoop) commit(sid string, msgs []Message, bytes, prior int, res *QueryResult) {
	l.mu.Lock()
	l.setSession(sid, msgs, bytes)
	l.last = sid
	l.mu.Unlock()
	res.SessionID = sid
	ev := SessionMessagesEvent{SessionID: sid, Messages: msgs, Replace: true}
	if prior >= 0 {
		ev = SessionMessagesEvent{SessionID: sid, Messages: msgs[prior:]}
	}
	l.cfg.Events.Emit(ev)
}

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

	// The Run under way: the transcript, the result, the request of its
	// turns (a copy of Request per Run, which a model may keep), the turn
	// bound, when the turn began and the tool-call handler (built at the
	// first tool call). They live here rather than in Run's stack frame,
	// which is what a run parked in a model call keeps.
	msgs     []Message
	res      *QueryResult
	req      *Request
	maxTurns int
	start    time.Time
	handle   tool.Handler
	// led is the Run's record in Ledger (nil without one); replayed says
	// that the current turn's answer came from it.
	led      *ledgerRun
	replayed bool
	// size is the transcript's size (Message.Size summed), kept as it
	// grows, so that fitting a request into the context window costs the
	// same on the hundredth turn as on the first. A ToolLoop sets it to
	// its session's size before Run (known); other Runs measure msgs once.
	size  int
	known bool
	// cut is the turn's call the answer was cut off in (max_tokens),
	// which is not run; nil when there is none. A pointer, made when an
	// answer is cut off: a parked query's Loop stays in a smaller size
	// class.
	cut *cutOffCall
	// The turn's calls so far (the one being handled is call number
	// calls) and the bytes of their results kept; reset every turn.
	calls, kept int
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
	AfterTools(turn int, results []ToolResult) bool
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
func (lp *Loop) Run(ctx context.Context, msgs []Message) ([]Message, *QueryResult, error) {
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
func (lp *Loop) begin(msgs []Message) {
	req := lp.Request
	lp.msgs, lp.res, lp.req, lp.handle = msgs, &QueryResult{}, &req, nil
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
func (lp *Loop) ended(err error) ([]Message, *QueryResult, error) {
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
	resp.Message.Role = RoleAssistant
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
		mt := ModelTurnEvent{Turn: res.Turns, StopReason: resp.StopReason,
			ToolCalls: len(resp.Message.ToolCalls), Usage: resp.Usage, DurationMs: time.Since(lp.start).Milliseconds()}
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
	results := make([]ToolResult, 0, len(resp.Message.ToolCalls))
	lp.calls, lp.kept = 0, 0
	for _, c := range resp.Message.ToolCalls {
		lp.calls++
		call := tool.Call{ID: c.ID, Name: c.Name, Input: c.InputOrEmpty(), Tool: lp.Tools[c.Name]}
		use := useOf(call, h(ctx, call))
		res.ToolUses = append(res.ToolUses, use)
		results = append(results, ToolResult{CallID: call.ID, Name: call.Name, Content: use.Output, IsError: use.IsError})
	}
	stop := lp.Hooks != nil && lp.Hooks.AfterTools(res.Turns, results)
	lp.msgs = append(lp.msgs, Message{Role: RoleTool, ToolResults: results})
	lp.size += lp.msgs[len(lp.msgs)-1].Size()
	if stop {
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		return true, agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerSDKBridge, false, "query canceled")
	}
	return false, nil
}

// invokeTruncated runs a tool and truncates its result: the end of every
// Loop's chain.
var invokeTruncated = tool.Truncate(MaxToolOutput)(tool.Invoke)

// cutOffReasons are the stop reasons of an answer the model did not end
// itself but that was cut off, with what cut it off.
var cutOffReasons = map[string]string{
	"max_tokens":                    "reached the output token limit (max_tokens)",
	"model_context_window_exceeded": "filled the model's context window (model_context_window_exceeded)",
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
func useOf(call tool.Call, out tool.Outcome) ToolUse {
	return ToolUse{ID: call.ID, Name: call.Name, Input: call.Input, Output: out.Content,
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
			sink.ToolStart(ToolCall{ID: call.ID, Name: call.Name, Input: call.Input})
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

func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sess-" + hex.EncodeToString(b[:])
}

// specCached remembers a tool's Spec: the loop consults it for every call
// and every query, and building it may be costly (schema compaction).
type specCached struct {
	tool.Tool
	spec tool.Spec
}

func (c specCached) Spec() tool.Spec { return c.spec }

// Idempotent implements tool.Idempotent for the tool it caches.
func (c specCached) Idempotent() bool { return tool.IsIdempotent(c.Tool) }
