package llm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/tool"
)

// DefaultMaxTurns bounds model turns per query when neither the query nor
// the provider config sets a bound.
const DefaultMaxTurns = 25

// MaxToolOutput caps what one tool result may put into the transcript.
const MaxToolOutput = 100 << 10

// ToolLoop is capstan's shared tool loop: it turns a Model into a Bridge by
// running model → tool calls → results → … → final answer, bounded by max
// turns, with every call checked by the tool policy of the query and
// journaled. Sessions are transcripts kept in memory and written to the
// journal (session.messages events), so a run can be resumed from its
// journal on every backend.
type ToolLoop struct {
	model Model
	cfg   Config
	tools map[string]tool.Tool
	names []string

	mu       sync.Mutex
	sessions map[string][]Message
	// busy marks sessions a query is extending: the query appends to the
	// session's own slice, so a second concurrent query on the same
	// session must work on a copy.
	busy map[string]bool
	// offers remembers the tools each policy offers (see offer).
	offers map[string]offering
	last   string
}

// NewToolLoop wraps m in the shared tool loop.
func NewToolLoop(m Model, cfg Config) *ToolLoop {
	if cfg.Events == nil {
		cfg.Events = journal.Discard
	}
	l := &ToolLoop{model: m, cfg: cfg, tools: map[string]tool.Tool{}, sessions: map[string][]Message{}, busy: map[string]bool{}, offers: map[string]offering{}}
	for _, t := range cfg.Tools {
		spec := t.Spec()
		l.tools[spec.Name] = specCached{Tool: t, spec: spec}
		l.names = append(l.names, spec.Name)
	}
	sort.Strings(l.names)
	for id, msgs := range cfg.Transcripts {
		l.sessions[id] = slices.Clip(msgs) // appending must not write into the caller's array
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
	return append([]Message(nil), l.sessions[sessionID]...)
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
}

// Query implements Bridge. When it fails after the model has been called,
// the returned result is non-nil and holds what happened before the failure
// (turns, usage, tool uses) so that budgets can count it; the session is
// then left as it was, except after MAX_TURNS, where the transcript so far
// is kept.
//
// A StreamSink in ctx (WithStreamSink) is told about every tool call the
// loop handles, denied and unknown ones included: ToolStart before the
// policy check, ToolEnd with the outcome.
func (l *ToolLoop) Query(ctx context.Context, prompt string, opts QueryOptions) (*QueryResult, error) {
	if strings.TrimSpace(prompt) == "" {
		return nil, agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "query prompt is empty")
	}
	res := &QueryResult{}
	l.mu.Lock()
	sid := opts.SessionID
	history, known := l.sessions[sid]
	if sid == "" || !known {
		res.SessionRenewed = sid != ""
		sid = newSessionID()
		history = nil
	}
	// The query appends to the session's slice in place (amortized growth,
	// no copy of the transcript per query); the session keeps its old
	// length until commit, so a failed query leaves it as it was.
	msgs := history
	if l.busy[sid] {
		msgs = slices.Clone(history)
	} else {
		l.busy[sid] = true
		defer func() {
			l.mu.Lock()
			delete(l.busy, sid)
			l.mu.Unlock()
		}()
	}
	l.mu.Unlock()

	policy := tool.Policy{Allowed: opts.AllowedTools, Disallowed: opts.DisallowedTools,
		Mode: opts.PermissionMode, WorkDir: l.cfg.WorkDir}
	specs, offered := l.offer(policy)
	maxTurns := opts.MaxTurns
	if maxTurns <= 0 {
		maxTurns = l.cfg.MaxTurns
	}
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}

	prior := len(history) // messages the session had; -1 once compaction replaced them
	query := len(msgs)    // index of this query's prompt
	msgs = append(msgs, Message{Role: RoleUser, Text: prompt, Pinned: opts.Instructions})
	req := &Request{Model: l.cfg.Model, System: opts.SystemPrompt, Tools: specs,
		OutputSchema: opts.OutputSchema, OutputSchemaName: opts.OutputName}
	// The model streams its text to the sink itself (it reads the same
	// context); the loop reports the tool calls it runs.
	sink := StreamSinkFrom(ctx)

	for {
		if res.Turns >= maxTurns {
			l.commit(sid, msgs, prior, res)
			e := agenterr.New(agenterr.CodeMaxTurns, agenterr.LayerSDKBridge, true,
				"model used %d turns without a final answer", maxTurns)
			e.Hint = "raise runner.boundaries.maxTurns or give the model a narrower task"
			return res, e
		}
		req.Messages = msgs
		if cm := l.cfg.Context; cm != nil {
			fit, err := cm.Fit(ctx, req, query)
			res.Usage.Add(fit.Usage)
			if err != nil {
				return res, err
			}
			if fit.Compaction != nil {
				query -= len(msgs) - len(fit.Messages)
				msgs, prior = fit.Messages, -1
				req.Messages = msgs
				fit.Compaction.SessionID = sid
				l.cfg.Events.Emit(journal.ContextCompacted, fit.Compaction)
			}
		}
		res.Turns++
		start := time.Now()
		resp, err := l.model.Generate(ctx, req)
		if err != nil {
			return res, err
		}
		if resp == nil {
			return res, agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "model returned no response and no error")
		}
		if cm := l.cfg.Context; cm != nil {
			cm.Observe(req, resp.Usage.Input())
		}
		res.Usage.Add(resp.Usage)
		resp.Message.Role = RoleAssistant
		// Every call needs an id its result can answer; give calls that
		// lack one (or repeat one) a unique id before they enter the
		// transcript.
		ids := map[string]bool{}
		for i := range resp.Message.ToolCalls {
			c := &resp.Message.ToolCalls[i]
			if c.ID == "" || ids[c.ID] {
				c.ID = fmt.Sprintf("call_t%d_%d", res.Turns, i+1)
			}
			ids[c.ID] = true
		}
		msgs = append(msgs, resp.Message)
		l.cfg.Events.Emit(journal.ModelTurn, ModelTurnEvent{Turn: res.Turns, StopReason: resp.StopReason,
			ToolCalls: len(resp.Message.ToolCalls), Usage: resp.Usage, DurationMs: time.Since(start).Milliseconds()})
		if resp.Message.Text != "" {
			res.Responses = append(res.Responses, resp.Message.Text)
		}
		res.StopReason = resp.StopReason
		if len(resp.Message.ToolCalls) == 0 {
			res.StructuredOutput = resp.StructuredOutput
			break
		}
		results := make([]ToolResult, 0, len(resp.Message.ToolCalls))
		for _, call := range resp.Message.ToolCalls {
			if sink != nil {
				sink.ToolStart(call)
			}
			use := l.runTool(ctx, policy, offered, call)
			if sink != nil {
				sink.ToolEnd(use)
			}
			res.ToolUses = append(res.ToolUses, use)
			results = append(results, ToolResult{CallID: call.ID, Name: call.Name, Content: use.Output, IsError: use.IsError})
		}
		msgs = append(msgs, Message{Role: RoleTool, ToolResults: results})
		if err := ctx.Err(); err != nil {
			return res, agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerSDKBridge, false, "query canceled")
		}
	}
	l.commit(sid, msgs, prior, res)
	return res, nil
}

// commit makes msgs the session's transcript and journals what changed:
// the messages after the first prior ones, or (prior < 0, after
// compaction) the whole transcript.
func (l *ToolLoop) commit(sid string, msgs []Message, prior int, res *QueryResult) {
	l.mu.Lock()
	l.sessions[sid] = msgs
	l.last = sid
	l.mu.Unlock()
	res.SessionID = sid
	ev := SessionMessagesEvent{SessionID: sid, Messages: msgs, Replace: true}
	if prior >= 0 {
		ev = SessionMessagesEvent{SessionID: sid, Messages: msgs[prior:]}
	}
	l.cfg.Events.Emit(journal.SessionMessages, ev)
}

// offering is the tools a policy lets the model see.
type offering struct {
	specs []tool.Spec
	names []string
}

// offer returns the tools policy may use, in name order. Queries of a run
// repeat the same few policies, so the answer is remembered per policy
// instead of matching every pattern against every tool on each query.
func (l *ToolLoop) offer(policy tool.Policy) ([]tool.Spec, []string) {
	key := policy.Mode + "\x00" + strings.Join(policy.Allowed, "\x01") + "\x00" + strings.Join(policy.Disallowed, "\x01")
	l.mu.Lock()
	o, ok := l.offers[key]
	l.mu.Unlock()
	if ok {
		return o.specs, o.names
	}
	for _, name := range l.names {
		if t := l.tools[name]; policy.MayUse(t) {
			o.specs = append(o.specs, t.Spec())
			o.names = append(o.names, name)
		}
	}
	l.mu.Lock()
	l.offers[key] = o
	l.mu.Unlock()
	return o.specs, o.names
}

// runTool executes one call under the policy; it never returns an error:
// every failure becomes an error result the model can read.
func (l *ToolLoop) runTool(ctx context.Context, policy tool.Policy, offered []string, call ToolCall) (use ToolUse) {
	use = ToolUse{ID: call.ID, Name: call.Name, Input: call.InputOrEmpty()}
	t, ok := l.tools[call.Name]
	if !ok {
		use.IsError = true
		list := strings.Join(offered, ", ")
		if list == "" {
			list = "none"
		}
		use.Output = fmt.Sprintf("unknown tool %q; available tools: %s", call.Name, list)
		l.cfg.Events.Emit(journal.ToolCall, use)
		return use
	}
	if d := policy.Decide(t, use.Input); !d.Allowed {
		use.IsError, use.Denied = true, true
		use.Output = "permission denied: " + d.Reason
		l.cfg.Events.Emit(journal.ToolDenied, use)
		return use
	}
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			use.IsError = true
			use.Output = fmt.Sprintf("tool %s failed: internal error: %v", call.Name, r)
		}
		use.DurationMs = time.Since(start).Milliseconds()
		l.cfg.Events.Emit(journal.ToolCall, use)
	}()
	out, err := t.Run(ctx, use.Input)
	use.Output, use.IsError = out.Content, out.IsError
	if err != nil {
		use.IsError = true
		use.Output = fmt.Sprintf("tool %s failed: %v", call.Name, err)
	}
	if n := len(use.Output); n > MaxToolOutput {
		cut := MaxToolOutput
		for cut > 0 && !utf8.RuneStart(use.Output[cut]) {
			cut--
		}
		use.Output = use.Output[:cut] + fmt.Sprintf("\n[output truncated: %d bytes total]", n)
	}
	return use
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
