package llm

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sort"
	"strings"
	"sync"

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
// journal on every backend. Of the sessions its queries have ended, a
// ToolLoop keeps at least the KeptSessions used last (and at most twice
// as many): a query that names a session no longer kept starts a new one
// and says so (QueryResult.SessionRenewed). The sessions of
// Config.Transcripts are kept until a query continues them.
type ToolLoop struct {
	model Model
	cfg   loopConfig
	// byName holds the tools with their specs, sorted by name, one per
	// name; a call finds its tool in it by binary search (a map of them
	// would be a few hundred bytes more that every agent keeps).
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
	// used counts the queries that ended in a session: a session's used
	// is the count when a query last ended in it (0 for the sessions of
	// Config.Transcripts no query has continued yet).
	used uint64
	// ended is how many of the sessions have a used above 0.
	ended int
}

// KeptSessions is how many of the sessions its queries ended a ToolLoop
// keeps at least (the ones used last): an agent continues one session
// per model and asks a few one-off queries (prompt checks) per iteration,
// and a loop that keeps every session it ever ran would hold all their
// transcripts for as long as it lives.
const KeptSessions = 32

// session is a session's transcript and its size (Message.Size summed),
// kept as the transcript grows so that no query has to measure it again.
type session struct {
	msgs  []event.Message
	bytes int
	used  uint64
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
	l := &ToolLoop{model: m, journal: JournalTools(cfg.Events),
		cfg: loopConfig{Model: cfg.Model, WorkDir: cfg.WorkDir, Events: cfg.Events, MaxTurns: cfg.MaxTurns,
			MaxToolCallsPerTurn: cfg.MaxToolCallsPerTurn, Redact: cfg.Redact, Context: cfg.Context, Ledger: cfg.Ledger}}
	l.byName = make([]specCached, len(cfg.Tools))
	for i, t := range cfg.Tools {
		l.byName[i] = specCached{Tool: t, spec: t.Spec()}
	}
	// Of tools with the same name, the last one given counts.
	sort.SliceStable(l.byName, func(i, j int) bool { return l.byName[i].spec.Name < l.byName[j].spec.Name })
	kept := l.byName[:0]
	for i, t := range l.byName {
		if i+1 < len(l.byName) && l.byName[i+1].spec.Name == t.spec.Name {
			continue // a later one of the same name counts
		}
		kept = append(kept, t)
	}
	l.byName = kept
	for id, msgs := range cfg.Transcripts {
		// Clipped: queries extend a session in place, which must not
		// write into the caller's array (another loop may be seeded
		// with it too).
		l.setSession(id, slices.Clip(msgs), messagesBytes(msgs), 0)
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
func (l *ToolLoop) Transcript(sessionID string) []event.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event.Message(nil), l.sessions[sessionID].msgs...)
}

// Close releases the model if it holds resources.
func (l *ToolLoop) Close() error {
	if c, ok := l.model.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
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
func (l *ToolLoop) Query(ctx context.Context, prompt string, opts QueryOptions) (*event.QueryResult, error) {
	return l.QueryWith(ctx, prompt, &opts)
}

// QueryWith is Query with the options by pointer; it neither changes nor
// keeps them. A caller that asks many queries (an agent's iterations)
// passes its options without copying them into its stack frame, which is
// part of what a run parked in a model call keeps.
func (l *ToolLoop) QueryWith(ctx context.Context, prompt string, opts *QueryOptions) (*event.QueryResult, error) {
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
func (l *ToolLoop) settle(q *query, msgs []event.Message, res *event.QueryResult, err error) {
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
func (l *ToolLoop) begin(prompt string, opts *QueryOptions) (_ *query, msgs []event.Message, _ error) {
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
	msgs = append(msgs, event.Message{Role: event.RoleUser, Text: prompt, Pinned: opts.Instructions})
	size := held.bytes + msgs[query].Size()
	q.lp = Loop{
		Model: l.model,
		Request: Request{Model: l.cfg.Model, System: opts.SystemPrompt, Tools: chain.specs,
			OutputSchema: opts.OutputSchema, OutputSchemaName: opts.OutputName},
		MaxTurns: maxTurns, MaxToolCallsPerTurn: l.cfg.MaxToolCallsPerTurn, Events: l.cfg.Events,
		Middleware: chain.mw, Redact: l.cfg.Redact,
		Context: l.cfg.Context, Query: query, SessionID: q.sid, Ledger: l.cfg.Ledger, size: size, known: true, named: &l.byName,
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
	p.Allowed, p.Disallowed = sharedPatterns(0, p.Allowed), sharedPatterns(1, p.Disallowed)
	c := policyChain{policy: p, mw: []tool.Middleware{l.journal, tool.Enforce(p)}}
	// The list is made to the size of the tools offered (an agent's
	// policy usually leaves some out; it is kept while the agent runs).
	var buf [16]*specCached
	offered := buf[:0]
	for i := range l.byName {
		t := &l.byName[i]
		if p.MayUse(t) {
			offered = append(offered, t)
		}
	}
	// Queries share the list; its capacity is its length, so an append
	// to one query's Request.Tools copies instead of writing into the
	// others'.
	c.specs = sharedSpecs(offered)
	l.chain = c
	return c
}

// lastLists are the list of offered tool specs and the policy's patterns
// (allowed, disallowed) the tool loops of this program made last, read
// only: the agents of one definition offer the same tools under the same
// policy, and share one copy of each instead of keeping one each.
var lastLists struct {
	mu       sync.Mutex
	specs    []tool.Spec
	patterns [2][]string
}

// sharedSpecs returns the specs of offered: the last list made when it
// holds the same specs, else a new one (capacity its length).
func sharedSpecs(offered []*specCached) []tool.Spec {
	lastLists.mu.Lock()
	defer lastLists.mu.Unlock()
	if sameSpecs(lastLists.specs, offered) {
		return lastLists.specs
	}
	specs := make([]tool.Spec, len(offered))
	for i, t := range offered {
		specs[i] = t.spec
	}
	lastLists.specs = specs
	return specs
}

// sameSpecs reports whether list holds the specs of offered, the same in
// every field.
func sameSpecs(list []tool.Spec, offered []*specCached) bool {
	if list == nil || len(list) != len(offered) {
		return false
	}
	for i, t := range offered {
		a, b := list[i], t.spec
		if a.Name != b.Name || a.Description != b.Description || !bytes.Equal(a.InputSchema, b.InputSchema) {
			return false
		}
	}
	return true
}

// sharedPatterns returns a read-only copy of patterns (nil for none): the
// last copy made for the same kind (0 allowed, 1 disallowed) when it holds
// the same patterns.
func sharedPatterns(kind int, patterns []string) []string {
	if patterns == nil {
		return nil
	}
	lastLists.mu.Lock()
	defer lastLists.mu.Unlock()
	if last := lastLists.patterns[kind]; last != nil && slices.Equal(last, patterns) {
		return last
	}
	own := slices.Clip(slices.Clone(patterns))
	lastLists.patterns[kind] = own
	return own
}

// setSession makes msgs the transcript of session id, used at used (0 for
// a seeded session). The map is made by the first session that ends a
// query, so an agent parked in its first query holds none. Called with
// l.mu held, or before l is shared.
func (l *ToolLoop) setSession(id string, msgs []event.Message, bytes int, used uint64) {
	if l.sessions == nil {
		l.sessions = map[string]session{}
	}
	if used > 0 && l.sessions[id].used == 0 {
		l.ended++
	}
	l.sessions[id] = session{msgs: msgs, bytes: bytes, used: used}
	if l.ended > 2*KeptSessions {
		l.forgetOldSessions()
	}
}

// forgetOldSessions drops the sessions queries ended in, but for the
// KeptSessions used last and those a query is extending. It runs once
// per KeptSessions queries ending in new sessions, not per query.
func (l *ToolLoop) forgetOldSessions() {
	type ended struct {
		used uint64
		id   string
	}
	all := make([]ended, 0, l.ended)
	for id, s := range l.sessions {
		if s.used > 0 {
			all = append(all, ended{s.used, id})
		}
	}
	slices.SortFunc(all, func(a, b ended) int { return cmp.Compare(a.used, b.used) })
	for _, s := range all[:len(all)-KeptSessions] {
		if !slices.Contains(l.busy, s.id) {
			delete(l.sessions, s.id)
			l.ended--
		}
	}
}

// commit makes msgs (of bytes bytes) the session's transcript and journals
// what changed: the messages after the first prior ones, or (prior < 0,
// after compaction) the whole transcript.
func (l *ToolLoop) commit(sid string, msgs []event.Message, bytes, prior int, res *event.QueryResult) {
	l.mu.Lock()
	l.used++
	l.setSession(sid, msgs, bytes, l.used)
	l.last = sid
	l.mu.Unlock()
	res.SessionID = sid
	ev := event.SessionMessagesEvent{SessionID: sid, Messages: msgs, Replace: true}
	if prior >= 0 {
		ev = event.SessionMessagesEvent{SessionID: sid, Messages: msgs[prior:]}
	}
	l.cfg.Events.Emit(ev)
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
