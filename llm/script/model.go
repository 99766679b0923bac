package script

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
)

func init() {
	llm.RegisterModel("script", open)
}

// open is the "script" provider factory.
func open(_ context.Context, cfg llm.Config) (llm.Model, error) {
	name := cfg.Model
	if name == "" {
		name = DefaultFile
	}
	var s *Script
	var err error
	if rel, ok := inAgentDir(cfg.AgentDir, name); ok && cfg.AgentFS != nil {
		// The script file is part of the pinned agent definition.
		s, err = LoadFS(cfg.AgentFS, rel, name)
	} else {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(cfg.AgentDir, p)
		}
		s, err = Load(p, name)
		if err != nil && p != name && errors.Is(err, fs.ErrNotExist) {
			// The file was looked for where name leads from the folder
			// the spec is relative to, which the name alone does not say.
			if e := agenterr.From(err); e != nil {
				moved := *e
				moved.Message = fmt.Sprintf("%s: script:%s is read relative to %s", e.Message, name, cfg.AgentDir)
				moved.File = p
				moved.Hint = fmt.Sprintf("create %s, or name the script file relative to %s, or by an absolute path", p, cfg.AgentDir)
				err = &moved
			}
		}
	}
	if err != nil {
		return nil, err
	}
	m := New(s)
	// A resumed run continues the script where the run left off: every
	// assistant message in the restored transcripts was one scripted turn.
	// (Turns of a query that never finished were not journaled and are
	// replayed, like the iteration they belonged to.)
	for _, msgs := range cfg.Transcripts {
		for _, msg := range msgs {
			if msg.Role == event.RoleAssistant {
				m.next++
				m.calls += len(msg.ToolCalls)
			}
		}
	}
	if m.next > len(s.Turns) {
		m.next = len(s.Turns)
	}
	return m, nil
}

// inAgentDir returns the script file name as a path inside the agent
// folder dir (name is relative to it, or absolute), and whether it is one.
func inAgentDir(dir, name string) (string, bool) {
	if filepath.IsAbs(name) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", false
		}
		if name, err = filepath.Rel(abs, name); err != nil {
			return "", false
		}
	}
	rel := path.Clean(filepath.ToSlash(name))
	return rel, filepath.IsLocal(name) && fs.ValidPath(rel)
}

// Model replays a Script, one turn per Generate call. It is safe for
// concurrent use; the turn cursor belongs to the Model, so two Models built
// from the same Script replay it independently.
type Model struct {
	script *Script

	mu    sync.Mutex
	next  int // index of the next turn
	calls int // tool call ids handed out
}

// New returns a Model that replays s from its first turn.
func New(s *Script) *Model {
	return &Model{script: s}
}

// TurnReplayed implements llm.TurnReplayer: the tool loop answered a turn
// from the run's journal (llm.Ledger), which is one scripted turn played
// by the run before it was cut; the script continues after it.
func (m *Model) TurnReplayed(resp *llm.Response) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next < len(m.script.Turns) {
		m.next++
	}
	m.calls += len(resp.Message.ToolCalls)
}

// Remaining reports how many turns have not been replayed yet.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.script.Turns) - m.next
}

// Generate implements llm.Model: it returns the next scripted turn. A
// StreamSink in ctx receives the turn's text (for a structured answer without
// text, the JSON) as one delta.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, agenterr.Wrap(err, agenterr.CodeCanceled, agenterr.LayerSDKBridge, false, "model call canceled")
	}
	if req.Summary {
		return summary(req), nil
	}
	m.mu.Lock()
	if m.next >= len(m.script.Turns) {
		n := len(m.script.Turns)
		m.mu.Unlock()
		e := agenterr.New(agenterr.CodeScriptExhausted, agenterr.LayerSDKBridge, false,
			"script %s has %d turns and all were used; model call %d has no scripted reply", m.script.File, n, n+1)
		e.File = m.script.File
		e.Hint = "add turns to the script, or lower the number of iterations or tool turns the agent may take"
		return nil, e
	}
	idx := m.next
	t := m.script.Turns[idx]
	m.next++
	firstID := m.calls + 1
	m.calls += len(t.ToolCalls)
	m.mu.Unlock()

	where := fmt.Sprintf("turn %d of %s", idx+1, m.script.File)
	if e := m.expect(where, "prompt", "prompt_contains", lastUserText(req), t.PromptContains, t); e != nil {
		return nil, e
	}
	if e := m.expect(where, "system prompt", "system_contains", req.System, t.SystemContains, t); e != nil {
		return nil, e
	}
	if t.Error != nil {
		return nil, simulate(t.Error, where)
	}

	msg := event.Message{Role: event.RoleAssistant, Text: t.Text}
	for i, c := range t.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, event.ToolCall{
			ID:    "call_" + strconv.Itoa(firstID+i),
			Name:  c.Name,
			Input: append([]byte(nil), c.Input...),
		})
	}
	resp := &llm.Response{Message: msg, Model: req.Model, StopReason: "end_turn"}
	if resp.Model == "" {
		resp.Model = "script"
	}
	if len(msg.ToolCalls) > 0 {
		resp.StopReason = "tool_use"
	}
	if t.Structured != nil {
		resp.StructuredOutput = append([]byte(nil), t.Structured...)
		if resp.Message.Text == "" {
			resp.Message.Text = string(t.Structured)
		}
	}
	// A script turn arrives whole: its text is one delta.
	if sink := llm.StreamSinkFrom(ctx); sink != nil && resp.Message.Text != "" {
		sink.TextDelta(resp.Message.Text)
	}
	if t.Usage != nil {
		resp.Usage = event.Usage{InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens,
			CacheReadTokens: t.Usage.CacheReadTokens, CacheWriteTokens: t.Usage.CacheWriteTokens}
	} else {
		resp.Usage = event.Usage{InputTokens: EstimateTokens(llm.RequestSize(req)), OutputTokens: EstimateTokens(resp.Message.Size())}
	}
	return resp, nil
}

// summary answers a context-compaction summary request without a
// scripted turn: a deterministic digest of what it was asked to condense.
func summary(req *llm.Request) *llm.Response {
	in := lastUserText(req)
	text := fmt.Sprintf("Summary written by the script provider of %d bytes of earlier turns. They ended with: %s",
		len(in), excerpt(in[max(0, len(in)-300):], 300))
	msg := event.Message{Role: event.RoleAssistant, Text: text}
	return &llm.Response{Message: msg, Model: "script", StopReason: "end_turn",
		Usage: event.Usage{InputTokens: EstimateTokens(llm.RequestSize(req)), OutputTokens: EstimateTokens(msg.Size())}}
}

// simulate maps a scripted error onto the agenterr code a real provider
// would return for that failure.
func simulate(se *SimulatedError, where string) error {
	msg := se.Message
	if msg == "" {
		msg = "simulated " + strings.ReplaceAll(se.Type, "_", " ") + " error"
	}
	msg += " (scripted, " + where + ")"
	var e *agenterr.Error
	switch se.Type {
	case ErrorRateLimit:
		e = agenterr.New(agenterr.CodeSdkRateLimit, agenterr.LayerSDKBridge, true, "%s", msg)
		if se.RetryAfterSeconds > 0 {
			e.Message += "; retry after " + strconv.FormatFloat(se.RetryAfterSeconds, 'f', -1, 64) + "s"
		}
	case ErrorOverloaded, ErrorServer, ErrorConnection:
		e = agenterr.New(agenterr.CodeSdkConnection, agenterr.LayerSDKBridge, true, "%s", msg)
	case ErrorAuth:
		e = agenterr.New(agenterr.CodeSdkAuth, agenterr.LayerSDKBridge, false, "%s", msg)
	case ErrorSessionNotFound:
		e = agenterr.New(agenterr.CodeSdkSessionNotFound, agenterr.LayerSDKBridge, true, "%s", msg)
	default:
		// Parse rejects unknown types; reaching here means a Script was
		// built by hand with a bad type.
		e = agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "unknown simulated error type %q (%s)", se.Type, where)
	}
	return e
}

// lastUserText returns the text of the last user message in req.
func lastUserText(req *llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == event.RoleUser {
			return req.Messages[i].Text
		}
	}
	return ""
}

// expect checks that text (what holds the strings, named what) contains
// every one of wants; the error names the missing ones and the expect key.
func (m *Model) expect(where, what, key, text string, wants []string, t Turn) *agenterr.Error {
	var missing []string
	for _, want := range wants {
		if !strings.Contains(text, want) {
			missing = append(missing, strconv.Quote(want))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	e := agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false,
		"%s expected the %s to contain %s; %s was %s", where, what, strings.Join(missing, ", "), what, excerpt(text, 300))
	e.File, e.Line, e.Column = m.script.File, t.Line, t.Column
	e.Hint = fmt.Sprintf("the agent sent a different %s than the script expects; check the prompt templates or the expect.%s list", what, key)
	return e
}

func excerpt(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:n]) + fmt.Sprintf(" (%d bytes in all)", len(s))
}

// EstimateTokens estimates a token count from a character count (≈ 4
// characters per token, at least 1 for non-empty text).
func EstimateTokens(chars int) int64 { return llm.EstimateTokens(chars) }
