package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool"
)

// typedEvents keeps every event of the given types, encoded when emitted.
type typedEvents struct {
	types  map[string]bool
	events []journal.Event
}

func (e *typedEvents) Emit(p event.Payload) {
	typ, data := string(p.EventKind()), any(p)
	if e.types != nil && !e.types[typ] {
		return
	}
	b, _ := json.Marshal(data)
	e.events = append(e.events, journal.Event{Type: typ, Data: b})
}

func (e *typedEvents) of(typ string) []journal.Event {
	var out []journal.Event
	for _, ev := range e.events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// counting is a tool that counts its runs and ignores its context, as a
// file write does.
func counting(name string, n *atomic.Int64) tool.Tool {
	return testTool{name, func(context.Context) (tool.Result, error) { n.Add(1); return tool.Result{Content: "ran"}, nil }}
}

func calls(names ...string) []event.ToolCall {
	out := make([]event.ToolCall, len(names))
	for i, n := range names {
		out[i] = event.ToolCall{ID: "c" + n, Name: n, Input: json.RawMessage(`{}`)}
	}
	return out
}

// TestToolLoopRunsNoCallAfterCancel: once the query is canceled (Ctrl-C,
// the time budget) while a turn's calls run, the calls after it are not
// started — a tool that ignores its context would otherwise still change
// the work dir — but answered and journaled as not run.
func TestToolLoopRunsNoCallAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var after atomic.Int64
	tools := []tool.Tool{
		testTool{"Stop", func(context.Context) (tool.Result, error) { cancel(); return tool.Result{Content: "ok"}, nil }},
		counting("Write", &after),
	}
	m := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{ToolCalls: calls("Stop", "Write", "Write")}}}}
	m.Replies[0].Message.ToolCalls[2].ID = "cWrite2"
	events := &typedEvents{}
	bridge := llm.NewToolLoop(m, llm.Config{Tools: tools, Events: events})
	res, err := bridge.Query(ctx, "go", llm.QueryOptions{})
	if agenterr.CodeOf(err) != agenterr.CodeCanceled {
		t.Fatalf("err = %v", err)
	}
	if n := after.Load(); n != 0 {
		t.Fatalf("%d calls ran after the query was canceled", n)
	}
	if len(res.ToolUses) != 3 || res.ToolUses[0].Denied || !res.ToolUses[1].Denied || !res.ToolUses[2].Denied ||
		!strings.Contains(res.ToolUses[1].Output, "canceled") {
		t.Fatalf("tool uses %+v", res.ToolUses)
	}
	if n, d := len(events.of(journal.ToolCall)), len(events.of(journal.ToolDenied)); n != 1 || d != 2 {
		t.Errorf("journal: %d tool.call, %d tool.denied events", n, d)
	}
}

// TestLoopCanceledBeforeCallsRunsNone: a cancellation that arrives while
// the model answers (the answer still comes back) runs none of its calls.
func TestLoopCanceledBeforeCallsRunsNone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Int64
	m := &cancelingModel{cancel: cancel, resp: &llm.Response{Message: event.Message{ToolCalls: calls("Write")}}}
	lp := llm.Loop{Model: m, Tools: map[string]tool.Tool{"Write": counting("Write", &ran)}}
	msgs, _, err := lp.Run(ctx, []event.Message{{Role: event.RoleUser, Text: "go"}})
	if agenterr.CodeOf(err) != agenterr.CodeCanceled || ran.Load() != 0 {
		t.Fatalf("err %v, %d runs", err, ran.Load())
	}
	// The transcript stays well formed: the call is answered.
	if last := msgs[len(msgs)-1]; last.Role != event.RoleTool || len(last.ToolResults) != 1 || !last.ToolResults[0].IsError {
		t.Fatalf("transcript ends with %+v", last)
	}
}

type cancelingModel struct {
	cancel func()
	resp   *llm.Response
}

func (m *cancelingModel) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	m.cancel()
	return m.resp, nil
}

// TestToolLoopCutOffCallNotRun: an answer that stopped at the output token
// limit ends in a call whose input was cut off (the provider hands it over
// as "{}" or as a string); it is not run but answered with what happened,
// so the model can make it again smaller. The calls before it ran.
func TestToolLoopCutOffCallNotRun(t *testing.T) {
	for _, stop := range []string{"max_tokens", "model_context_window_exceeded"} {
		var first, last atomic.Int64
		tools := []tool.Tool{counting("A", &first), counting("B", &last)}
		m := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{ToolCalls: calls("A", "B")}, StopReason: stop}}}
		events := &typedEvents{}
		bridge := llm.NewToolLoop(m, llm.Config{Tools: tools, Events: events})
		res, err := bridge.Query(context.Background(), "go", llm.QueryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if first.Load() != 1 || last.Load() != 0 {
			t.Fatalf("%s: A ran %d times, the cut-off B %d times", stop, first.Load(), last.Load())
		}
		u := res.ToolUses[1]
		if !u.Denied || !u.IsError || !strings.Contains(u.Output, stop) {
			t.Fatalf("%s: cut-off call %+v", stop, u)
		}
		seen := m.Seen[1][2].ToolResults[1]
		if seen.CallID != "cB" || seen.Content != u.Output {
			t.Errorf("%s: the model read %+v", stop, seen)
		}
		if d := events.of(journal.ToolDenied); len(d) != 1 {
			t.Errorf("%s: %d tool.denied events", stop, len(d))
		}
	}
}

// TestToolLoopKeepsMalformedInputJournaled: a provider that hands over a
// call's input as it came, not JSON (a cut-off or sloppy model), must not
// cost the journal the query's messages: the session is rebuilt from the
// journal exactly, and the tool answers with an input error.
func TestToolLoopKeepsMalformedInputJournaled(t *testing.T) {
	dir := t.TempDir()
	jw, err := journal.Create(dir, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer jw.Close()
	m := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{ToolCalls: []event.ToolCall{
		{ID: "c1", Name: "Echo", Input: json.RawMessage(`{"text": "cut`)},
	}}}}}
	echo := tool.Func("Echo", "Echoes.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	})
	bridge := llm.NewToolLoop(m, llm.Config{Tools: []tool.Tool{echo}, Events: event.Journal{Writer: jw}})
	res, err := bridge.Query(context.Background(), "go", writeAll)
	if err != nil {
		t.Fatal(err)
	}
	if u := res.ToolUses[0]; !u.IsError || !json.Valid(u.Input) {
		t.Errorf("use %+v", u)
	}
	evs, err := journal.ReadFile(jw.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if strings.Contains(string(ev.Data), "marshal_error") {
			t.Errorf("%s event lost its data: %s", ev.Type, ev.Data)
		}
	}
	rebuilt := llm.TranscriptsFromEvents(evs)[res.SessionID]
	if live := bridge.Transcript(res.SessionID); len(rebuilt) != len(live) || len(live) != 4 {
		t.Fatalf("journal rebuilt %d messages, the session has %d", len(rebuilt), len(live))
	}
}

// TestToolLoopsSeededAlikeDoNotShareMessages: two tool loops seeded with
// the same transcripts (a run's model and a step's model, both from the
// resumed journal) each extend their own copy: a query on one never
// overwrites the messages a query on the other committed, even in the
// same session.
func TestToolLoopsSeededAlikeDoNotShareMessages(t *testing.T) {
	history := make([]event.Message, 1, 8) // room to grow in place
	history[0] = event.Message{Role: event.RoleUser, Text: "earlier"}
	seed := map[string][]event.Message{"s1": history}
	a := llm.NewToolLoop(&fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{Text: "from A"}}}}, llm.Config{Transcripts: seed})
	b := llm.NewToolLoop(&fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{Text: "from B"}}}}, llm.Config{Transcripts: seed})
	if _, err := a.Query(context.Background(), "to A", llm.QueryOptions{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Query(context.Background(), "to B", llm.QueryOptions{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if got := a.Transcript("s1"); len(got) != 3 || got[1].Text != "to A" || got[2].Text != "from A" {
		t.Fatalf("A's session: %+v", got)
	}
	if len(seed["s1"]) != 1 || history[:2][1].Text != "" {
		t.Fatalf("the caller's transcript was written to: %+v", history[:2])
	}
}

// TestToolLoopKeepsTheSessionsUsedLast: a loop asked for many one-off
// sessions (an agent's prompt checks, a caller that never continues a
// session) keeps the KeptSessions used last and at most twice as many;
// the session continued all along and a seeded one no query continued
// are kept, and a query naming a forgotten session starts a new one and
// says so.
func TestToolLoopKeepsTheSessionsUsedLast(t *testing.T) {
	ctx := context.Background()
	seed := map[string][]event.Message{"resumed": {{Role: event.RoleUser, Text: "earlier"}}}
	loop := llm.NewToolLoop(&fakellm.Replay{}, llm.Config{Transcripts: seed})
	query := func(sid string) *event.QueryResult {
		t.Helper()
		res, err := loop.Query(ctx, "hello", llm.QueryOptions{SessionID: sid})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	main := query("").SessionID
	var oneOff []string
	continued := 1
	for i := range 5 * llm.KeptSessions {
		oneOff = append(oneOff, query("").SessionID)
		if i%10 == 9 {
			if res := query(main); res.SessionID != main || res.SessionRenewed {
				t.Fatalf("continuing the main session after %d one-off queries: %+v", i+1, res)
			}
			continued++
		}
	}
	if got := len(loop.Transcript(main)); got != 2*continued {
		t.Fatalf("the main session kept %d messages, want %d", got, 2*continued)
	}
	if got := loop.Transcript("resumed"); len(got) != 1 || got[0].Text != "earlier" {
		t.Fatalf("the seeded session: %+v", got)
	}
	kept := 0
	for i, sid := range oneOff {
		n := len(loop.Transcript(sid))
		if n > 0 {
			kept++
		}
		if i >= len(oneOff)-llm.KeptSessions+1 && n != 2 { // the main session was used after one of the last
			t.Fatalf("one-off session %d of %d (%s) kept %d messages, want 2", i+1, len(oneOff), sid, n)
		}
	}
	if kept > 2*llm.KeptSessions {
		t.Fatalf("the loop kept %d one-off sessions, want at most %d", kept, 2*llm.KeptSessions)
	}
	res := query(oneOff[0])
	if !res.SessionRenewed || res.SessionID == oneOff[0] || len(loop.Transcript(res.SessionID)) != 2 {
		t.Fatalf("continuing a forgotten session: %+v", res)
	}
}

// TestToolLoopToolOfTheSameNameGivenLastCounts: of two tools with the same
// name, the one given last is offered (once) and called; a call of a name
// no tool has is answered as unknown.
func TestToolLoopToolOfTheSameNameGivenLastCounts(t *testing.T) {
	var first, last, other atomic.Int64
	m := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{ToolCalls: calls("Write", "Read", "Missing")}}}}
	loop := llm.NewToolLoop(m, llm.Config{Tools: []tool.Tool{counting("Write", &first), counting("Read", &other), counting("Write", &last)}})
	res, err := loop.Query(context.Background(), "go", llm.QueryOptions{PermissionMode: "bypassPermissions"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Load() != 0 || last.Load() != 1 || other.Load() != 1 {
		t.Fatalf("runs: first Write %d, last Write %d, Read %d", first.Load(), last.Load(), other.Load())
	}
	if len(res.ToolUses) != 3 || !res.ToolUses[2].IsError || !strings.Contains(res.ToolUses[2].Output, "Read") {
		t.Fatalf("tool uses: %+v", res.ToolUses)
	}
}

// toolsSeen records the offered tools of every request.
type toolsSeen struct{ tools [][]tool.Spec }

func (m *toolsSeen) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.tools = append(m.tools, req.Tools)
	return &llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: "done"}, StopReason: "end_turn"}, nil
}

// TestToolLoopsOfferingTheSameToolsShareTheList: tool loops that offer
// the same tools under the same policy (the agents of one definition)
// share one list of them; a loop offering others gets its own, and the
// first loops' list stays as it was.
func TestToolLoopsOfferingTheSameToolsShareTheList(t *testing.T) {
	var n atomic.Int64
	offered := func(tools []tool.Tool, allowed ...string) []tool.Spec {
		t.Helper()
		m := &toolsSeen{}
		loop := llm.NewToolLoop(m, llm.Config{Tools: tools})
		if _, err := loop.Query(context.Background(), "go", llm.QueryOptions{AllowedTools: allowed, PermissionMode: "bypassPermissions"}); err != nil {
			t.Fatal(err)
		}
		return m.tools[0]
	}
	a := offered([]tool.Tool{counting("Write", &n), counting("Read", &n)}, "Read", "Write")
	b := offered([]tool.Tool{counting("Read", &n), counting("Write", &n)}, "Read", "Write")
	if len(a) != 2 || &a[0] != &b[0] {
		t.Fatalf("two loops with the same tools: %v and %v, shared %v", a, b, len(a) > 0 && len(b) > 0 && &a[0] == &b[0])
	}
	c := offered([]tool.Tool{counting("Read", &n), counting("Grep", &n)}, "Read", "Grep")
	if len(c) != 2 || c[0].Name != "Grep" || &c[0] == &a[0] || a[0].Name != "Read" || a[1].Name != "Write" {
		t.Fatalf("a loop with other tools: %v (the first loops' %v)", c, a)
	}
}
