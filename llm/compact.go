// Compaction keeps a tool loop's transcript within the model's context
// window: Compactor is a ContextManager.
//
// Before every model turn the Compactor estimates the tokens of the request
// about to be sent (about four bytes a token, calibrated with the input
// the provider reported for earlier requests). Below Threshold × window
// nothing changes. Above it the Compactor compacts, down to Target × window
// so that it does not have to compact again on the next turn (and the
// provider's prompt cache stays valid in between):
//
//  1. Older tool results are replaced by short stubs that name the call
//     whose full output the run journal keeps (tool.call events); the
//     newest KeepToolResults results stay verbatim.
//  2. When that is not enough, every message before the current query is
//     summarized by a model (the same one, or
//     CompactionOptions.SummaryModel) into one carry message.
//
// The current query's prompt (the retry prompt or the step's prompt) and
// the newest prompt marked as the step's instructions (event.Message.Pinned)
// are never removed. When the request still does not fit, or compaction is
// off, Fit fails with CONTEXT_OVERFLOW before anything is sent.

package llm

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm/modelspec"
)

// Defaults of CompactionOptions.
const (
	DefaultCompactionThreshold = 0.75
	DefaultCompactionTarget    = 0.5
	DefaultKeepToolResults     = 3
	// summaryMaxTokens bounds the summary's length.
	compactSummaryMaxTokens = 2048
	// stubPrefix starts every stub, so a stub is never stubbed again.
	compactStubPrefix = "[compacted: "
)

// CompactionOptions configure a Compactor.
type CompactionOptions struct {
	// Window is the context window in tokens (0 = the model's, from
	// llm.ModelLimitsOf).
	Window int64
	// Disabled turns compaction off: a request that would exceed the
	// window fails with CONTEXT_OVERFLOW instead.
	Disabled bool
	// Threshold is the share of the window above which the transcript is
	// compacted (0 = DefaultCompactionThreshold); Target the share it is compacted
	// down to (0 = DefaultCompactionTarget). 0 < Target < Threshold ≤ 1.
	Threshold, Target float64
	// KeepToolResults is how many of the newest tool results stay
	// verbatim (0 = DefaultKeepToolResults; negative = none).
	KeepToolResults int
	// SummaryModel is the "provider:model" that writes summaries ("" =
	// the model of the tool loop).
	SummaryModel string
}

// CompactionFactory returns a Config.NewContext function: it builds a Compactor
// for each tool loop llm.Open creates. A model whose window is neither
// configured nor in the table gets no Compactor (nothing can be counted
// against an unknown window).
func CompactionFactory(o CompactionOptions) func(ctx context.Context, cfg Config, m Model) (ContextManager, error) {
	return func(ctx context.Context, cfg Config, m Model) (ContextManager, error) {
		window := o.Window
		if window == 0 {
			limits, _ := ModelLimitsOf(cfg.Model)
			window = limits.ContextWindow
		}
		if window == 0 {
			return nil, nil
		}
		summarizer, model := m, cfg.Model
		if o.SummaryModel != "" && !o.Disabled {
			sc := cfg
			sc.Context, sc.NewContext = nil, nil
			if provider, _ := modelspec.Parse(o.SummaryModel); provider != cfg.Provider {
				sc.BaseURL = "" // the run's base URL belongs to the run's provider
			}
			s, err := OpenModel(ctx, o.SummaryModel, sc)
			if err != nil {
				return nil, fmt.Errorf("open runner.compaction.summaryModel %q: %w", o.SummaryModel, err)
			}
			_, model = modelspec.Parse(o.SummaryModel)
			summarizer = s
		}
		mgr := NewCompactor(window, summarizer, model, o)
		mgr.redact = cfg.Redact
		return mgr, nil
	}
}

// Compactor is a ContextManager.
type Compactor struct {
	window            int64
	threshold, target float64
	keep              int
	disabled          bool
	summarizer        Model
	summaryModel      string
	// redact replaces secret values in the summaries it writes (the
	// tool loop's llm.Config.Redact), which enter the transcript.
	redact Redactor

	mu sync.Mutex
	// scale calibrates byte estimates: the provider's count divided by
	// the estimate of the last request it counted (never below 1).
	scale float64
}

// NewCompactor builds a Compactor for a window of window tokens; summarizer (the
// model named summaryModel) writes summaries.
func NewCompactor(window int64, summarizer Model, summaryModel string, o CompactionOptions) *Compactor {
	m := &Compactor{window: window, threshold: o.Threshold, target: o.Target, keep: o.KeepToolResults,
		disabled: o.Disabled, summarizer: summarizer, summaryModel: summaryModel, scale: 1}
	if m.threshold == 0 {
		m.threshold = DefaultCompactionThreshold
	}
	if m.target == 0 {
		m.target = min(DefaultCompactionTarget, m.threshold/2)
	}
	if m.keep == 0 {
		m.keep = DefaultKeepToolResults
	}
	return m
}

// Observe implements llm.ContextManager: it calibrates estimates with the
// provider's count. It measures req's whole transcript; the tool loop,
// which keeps the transcript's size as it grows, calls observeSized.
func (m *Compactor) Observe(req *Request, inputTokens int64) {
	m.observeSized(req, messagesBytes(req.Messages), inputTokens)
}

// observeSized is Observe of a request whose transcript (req.Messages) is
// transcriptBytes bytes (Message.Size summed).
func (m *Compactor) observeSized(req *Request, transcriptBytes int, inputTokens int64) {
	est := EstimateTokens(fixedRequestSize(req) + transcriptBytes)
	if inputTokens <= 0 || est <= 0 {
		return
	}
	m.mu.Lock()
	m.scale = max(1, float64(inputTokens)/float64(est))
	m.mu.Unlock()
}

// tokens estimates the tokens of bytes prompt bytes.
func (m *Compactor) tokens(bytes int) int64 {
	m.mu.Lock()
	s := m.scale
	m.mu.Unlock()
	return int64(float64(EstimateTokens(bytes)) * s)
}

// Fit implements llm.ContextManager. It measures req's whole transcript;
// the tool loop, which keeps the transcript's size as it grows, calls
// fitSized, so that deciding costs the same on the hundredth turn as on
// the first.
func (m *Compactor) Fit(ctx context.Context, req *Request, query int) (Fitted, error) {
	return m.fitSized(ctx, req, query, messagesBytes(req.Messages))
}

// fitSized is Fit of a request whose transcript (req.Messages) is
// transcriptBytes bytes (Message.Size summed). Only compaction itself
// walks the transcript.
func (m *Compactor) fitSized(ctx context.Context, req *Request, query int, transcriptBytes int) (Fitted, error) {
	msgs := req.Messages
	fixed := fixedRequestSize(req) // system prompt, tools, output schema
	size := fixed + transcriptBytes
	before := m.tokens(size)
	if float64(before) <= m.threshold*float64(m.window) || (m.disabled && before <= m.window) {
		return Fitted{Messages: msgs}, nil
	}
	if m.disabled {
		return Fitted{}, m.overflow(before, "compaction is off (runner.compaction.enabled is false)")
	}
	goal := int64(m.target * float64(m.window))
	ev := &event.CompactionEvent{Window: m.window, TokensBefore: before}

	out := compactStub(msgs, m.keep, func(saved int) bool {
		size -= saved
		return m.tokens(size) <= goal
	}, ev)
	var usage event.Usage
	if m.tokens(size) > goal && query > 0 {
		var err error
		out, usage, err = m.summarize(ctx, req, out, query, ev)
		if err != nil {
			return Fitted{Usage: usage}, err
		}
		size = fixed + messagesBytes(out)
	}
	if len(ev.StubbedCalls) == 0 && ev.SummarizedMessages == 0 {
		if before > m.window {
			return Fitted{}, m.overflow(before, "nothing older than the current query is left to compact")
		}
		return Fitted{Messages: msgs}, nil
	}
	ev.TokensAfter = m.tokens(size)
	ev.Usage = usage
	if ev.TokensAfter > m.window {
		return Fitted{Usage: usage}, m.overflow(ev.TokensAfter, "even after compaction, the current step's prompt and this query's turns do not fit")
	}
	return Fitted{Messages: out, Compaction: ev, Usage: usage}, nil
}

func (m *Compactor) overflow(tokens int64, why string) error {
	e := agenterr.New(agenterr.CodeContextOverflow, agenterr.LayerSDKBridge, false,
		"the request would be about %d tokens, more than the model's context window of %d tokens; %s; nothing was sent", tokens, m.window, why)
	e.Hint = "turn compaction on (runner.compaction.enabled), set runner.contextWindow to the model's real window, or give the model smaller tool outputs"
	return e
}

// stub replaces tool results, oldest first, by stubs until enough returns
// true, keeping the newest keep results verbatim, and always the results
// the model has not seen yet (a tool message at the end). msgs is not
// modified: changed messages are copies.
func compactStub(msgs []event.Message, keep int, enough func(saved int) bool, ev *event.CompactionEvent) []event.Message {
	seen := len(msgs)
	if seen > 0 && msgs[seen-1].Role == event.RoleTool {
		seen--
	}
	total := 0
	for _, msg := range msgs[:seen] {
		total += len(msg.ToolResults)
	}
	stubbable := total - max(keep, 0)
	out := msgs
	copied := false
	for i := 0; i < seen && stubbable > 0; i++ {
		for j, r := range msgs[i].ToolResults {
			if stubbable == 0 {
				break
			}
			stubbable--
			text := compactStubText(r)
			if strings.HasPrefix(r.Content, compactStubPrefix) || len(text) >= len(r.Content) {
				continue
			}
			if !copied {
				out, copied = append([]event.Message(nil), msgs...), true
			}
			if &out[i].ToolResults[0] == &msgs[i].ToolResults[0] {
				out[i].ToolResults = append([]event.ToolResult(nil), msgs[i].ToolResults...)
			}
			out[i].ToolResults[j].Content = text
			ev.StubbedCalls = append(ev.StubbedCalls, r.CallID)
			ev.StubbedBytes += len(r.Content)
			if enough(len(r.Content) - len(text)) {
				return out
			}
		}
	}
	return out
}

// stubText is the deterministic stand-in of a tool result.
func compactStubText(r event.ToolResult) string {
	name := r.Name
	if name == "" {
		name = "a tool"
	}
	return fmt.Sprintf("%sthe %d-byte output of %s (call %s) was removed to keep this conversation within the context window; the run journal keeps it in full (tool.call event of call %s, shown by capstan show)]",
		compactStubPrefix, len(r.Content), name, r.CallID, r.CallID)
}

// summarize replaces msgs[:query] by the newest pinned prompt among them
// and one carry message summarizing the rest.
func (m *Compactor) summarize(ctx context.Context, req *Request, msgs []event.Message, query int, ev *event.CompactionEvent) ([]event.Message, event.Usage, error) {
	pinned := -1
	for i := query - 1; i >= 0; i-- {
		if msgs[i].Pinned && msgs[i].Role == event.RoleUser {
			pinned = i
			break
		}
	}
	older := make([]event.Message, 0, query)
	for i, msg := range msgs[:query] {
		if i != pinned {
			older = append(older, msg)
		}
	}
	if len(older) == 0 {
		return msgs, event.Usage{}, nil
	}
	sreq := &Request{Model: m.summaryModel, System: compactSummarySystem, MaxTokens: compactSummaryMaxTokens, Summary: true,
		Messages: []event.Message{{Role: event.RoleUser, Text: renderCompacted(older, int(m.window/2)*BytesPerToken)}}}
	resp, err := m.summarizer.Generate(ctx, sreq)
	if err != nil {
		// A request that failed after it was billed still costs its usage.
		return nil, BilledUsage(err), fmt.Errorf("summarize older turns to fit the context window: %w", err)
	}
	summary := strings.TrimSpace(m.redact.Text(resp.Message.Text))
	if summary == "" {
		return nil, resp.Usage, agenterr.New(agenterr.CodeContextOverflow, agenterr.LayerSDKBridge, false,
			"the summary model returned no text, so older turns could not be compacted; nothing was sent")
	}
	out := make([]event.Message, 0, len(msgs)-query+2)
	if pinned >= 0 {
		out = append(out, msgs[pinned])
	}
	out = append(out, event.Message{Role: event.RoleUser, Text: compactCarryHeader + summary})
	out = append(out, msgs[query:]...)
	ev.SummarizedMessages = len(older)
	ev.SummaryModel = m.summaryModel
	ev.Summary = summary
	return out, resp.Usage, nil
}

const compactSummarySystem = "You condense the earlier part of an agent's working session so that the agent can continue " +
	"without it. Write a concise summary in plain text: what the task is, what was done and found (files, commands, " +
	"results, errors), what was tried and failed, and what remains. Keep exact names, paths and error messages. " +
	"Do not invent anything."

const compactCarryHeader = "Summary of the earlier part of this session (older turns were compacted to stay within the " +
	"model's context window; the run journal keeps them in full):\n\n"

// render writes messages as plain text for the summarizer, each tool
// result and text cut to a few KB, the whole to at most limit bytes (the
// newest part kept).
func renderCompacted(msgs []event.Message, limit int) string {
	const perPart = 4 << 10
	var b strings.Builder
	for _, msg := range msgs {
		switch msg.Role {
		case event.RoleUser:
			fmt.Fprintf(&b, "USER:\n%s\n\n", cut(msg.Text, perPart))
		case event.RoleAssistant:
			if msg.Text != "" {
				fmt.Fprintf(&b, "ASSISTANT:\n%s\n", cut(msg.Text, perPart))
			}
			for _, c := range msg.ToolCalls {
				fmt.Fprintf(&b, "ASSISTANT called %s %s\n", c.Name, cut(string(c.Input), 512))
			}
			b.WriteString("\n")
		}
		for _, r := range msg.ToolResults {
			status := "result"
			if r.IsError {
				status = "error"
			}
			fmt.Fprintf(&b, "TOOL %s %s (call %s):\n%s\n\n", r.Name, status, r.CallID, cut(r.Content, perPart))
		}
	}
	s := b.String()
	if limit > 0 && len(s) > limit {
		s = "[earliest part left out]\n" + s[len(s)-limit:]
	}
	return s
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf(" [… %d more bytes]", len(s)-n)
}

// sizedContext is a ContextManager that takes the size of the
// transcript from its caller: the Loop keeps it as the transcript grows
// (Loop.size), so a turn's decision does not walk the whole
// transcript. Compactor is one; other ContextManagers get Fit and Observe.
type sizedContext interface {
	fitSized(ctx context.Context, req *Request, query int, transcriptBytes int) (Fitted, error)
	observeSized(req *Request, transcriptBytes int, inputTokens int64)
}

var _ sizedContext = (*Compactor)(nil)

func messagesBytes(msgs []event.Message) int {
	n := 0
	for _, msg := range msgs {
		n += msg.Size()
	}
	return n
}
