package skill

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
)

// The Act loop runs on the shared tool loop, so it has the loop's
// hardening. These tests fail on the Act runtime's former private loop.

func toolTurn(calls ...event.ToolCall) *llm.Response {
	return &llm.Response{Message: event.Message{Role: event.RoleAssistant, ToolCalls: calls}, StopReason: "tool_use"}
}

// A model that repeats a call id (or sends none) still gets one result per
// call, each answering a distinct id of its own call: providers reject a
// transcript whose results do not pair up with the calls.
func TestActCallIDsAreUnique(t *testing.T) {
	sk := exampleSkill(t)
	m := &fakellm.Replay{Replies: []*llm.Response{toolTurn(
		event.ToolCall{ID: "same", Name: "blackboardPut", Input: json.RawMessage(`{"key":"a","value":1}`)},
		event.ToolCall{ID: "same", Name: "blackboardPut", Input: json.RawMessage(`{"key":"b","value":2}`)},
		event.ToolCall{Name: "blackboardGet", Input: json.RawMessage(`{"key":"a"}`)},
	)}}
	if _, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g"}); err != nil {
		t.Fatal(err)
	}
	if len(m.Seen) != 2 {
		t.Fatalf("%d requests", len(m.Seen))
	}
	msgs := m.Seen[1]
	calls, results := msgs[len(msgs)-2].ToolCalls, msgs[len(msgs)-1].ToolResults
	if len(calls) != 3 || len(results) != 3 {
		t.Fatalf("%d calls, %d results", len(calls), len(results))
	}
	ids := map[string]bool{}
	for i, c := range calls {
		if c.ID == "" || ids[c.ID] || results[i].CallID != c.ID {
			t.Errorf("call %d id %q answered by %q (ids so far %v)", i, c.ID, results[i].CallID, ids)
		}
		ids[c.ID] = true
	}
}

// A result larger than llm.MaxToolOutput is cut with a note before it
// enters the transcript: a model-chosen input must not fill the context.
func TestActLargeResultTruncated(t *testing.T) {
	sk := exampleSkill(t)
	key := strings.Repeat("k", llm.MaxToolOutput+1000) // blackboardPut echoes its key
	in, _ := json.Marshal(map[string]any{"key": key, "value": 1})
	m := &fakellm.Replay{Replies: []*llm.Response{toolTurn(event.ToolCall{ID: "c1", Name: "blackboardPut", Input: in})}}
	if _, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g"}); err != nil {
		t.Fatal(err)
	}
	msgs := m.Seen[1]
	got := msgs[len(msgs)-1].ToolResults[0].Content
	if len(got) > llm.MaxToolOutput+100 || !strings.Contains(got, "[output truncated:") {
		t.Fatalf("result of %d bytes, ends %q", len(got), got[max(0, len(got)-60):])
	}
}

// A model that returns no response and no error ends the run with a coded
// model error instead of crashing the process.
func TestActNilResponseIsModelError(t *testing.T) {
	res, err := New(Config{Model: &fakellm.Replay{Replies: []*llm.Response{nil}}}).Run(context.Background(), exampleSkill(t), Input{Goal: "g"})
	if agenterr.CodeOf(err) != agenterr.CodeSdkRequest || res == nil || res.ExitReason != ExitModelError ||
		res.Error == nil || res.Error.Code != agenterr.CodeSdkRequest {
		t.Fatalf("err %v, result %+v", err, res)
	}
}

// typedEvents keeps the journal events in order with their payloads.
type typedEvents struct {
	types []string
	data  []any
}

func (e *typedEvents) Emit(p event.Payload) {
	t, d := string(p.EventKind()), any(p)
	e.types, e.data = append(e.types, t), append(e.data, d)
}

// Calls the runtime refuses without running them (over the tool-call
// budget, after the run ended) are journaled as tool.denied, so the journal
// accounts for every call the model made.
func TestActRefusedCallsJournaled(t *testing.T) {
	sk := exampleSkill(t)
	m := &fakellm.Replay{Replies: []*llm.Response{toolTurn(
		event.ToolCall{ID: "c1", Name: "blackboardPut", Input: json.RawMessage(`{"key":"a","value":1}`)},
		event.ToolCall{ID: "c2", Name: "blackboardPut", Input: json.RawMessage(`{"key":"b","value":2}`)},
	), toolTurn(
		event.ToolCall{ID: "c3", Name: "finalize", Input: json.RawMessage(`{}`)},
		event.ToolCall{ID: "c4", Name: "blackboardGet", Input: json.RawMessage(`{}`)},
	)}}
	ev := &typedEvents{}
	res, err := New(Config{Model: m, Events: ev}).Run(context.Background(), sk, Input{Goal: "g", Budgets: Budgets{MaxToolCalls: 1}})
	if err != nil || res.ExitReason != ExitToolCallBudget {
		t.Fatalf("err %v exit %s", err, res.ExitReason)
	}
	var denied []event.ToolUse
	for i, ty := range ev.types {
		if ty == journal.ToolDenied {
			denied = append(denied, ev.data[i].(event.ToolUse))
		}
	}
	if len(denied) != 1 || denied[0].ID != "c2" || !denied[0].Denied || !strings.Contains(denied[0].Output, agenterr.CodeBudgetExceeded) {
		t.Fatalf("denied events %+v", denied)
	}

	// After finalize, the rest of the turn is skipped, and journaled so.
	m = &fakellm.Replay{Replies: []*llm.Response{toolTurn(
		event.ToolCall{ID: "c1", Name: "finalize", Input: json.RawMessage(`{}`)},
		event.ToolCall{ID: "c2", Name: "blackboardGet", Input: json.RawMessage(`{}`)},
	)}}
	ev = &typedEvents{}
	if res, err = New(Config{Model: m, Events: ev}).Run(context.Background(), sk, Input{Goal: "g"}); err != nil || res.ExitReason != ExitFinalized {
		t.Fatalf("err %v exit %s", err, res.ExitReason)
	}
	n := 0
	for i, ty := range ev.types {
		if ty == journal.ToolDenied {
			n++
			if u := ev.data[i].(event.ToolUse); u.ID != "c2" || !strings.Contains(u.Output, "SKIPPED") {
				t.Errorf("denied %+v", u)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d tool.denied events, want 1: %v", n, ev.types)
	}
}

// A model that knows a key (capstan's environment holds it) writes it in
// its text and a tool input: the events and the next request carry
// [REDACTED] instead.
func TestActRedactsSecretsTheModelWrites(t *testing.T) {
	const key = "sk-skill-0123456789"
	t.Setenv("SKILL_TEST_API_KEY", key)
	turn := toolTurn(event.ToolCall{ID: "c1", Name: "blackboardPut", Input: json.RawMessage(`{"key":"` + key + `","value":"` + key + `"}`)})
	turn.Message.Text = "the key is " + key
	m := &fakellm.Replay{Replies: []*llm.Response{turn}}
	ev := &typedEvents{}
	if _, err := New(Config{Model: m, Events: ev}).Run(context.Background(), exampleSkill(t), Input{Goal: "g"}); err != nil {
		t.Fatal(err)
	}
	if len(m.Seen) != 2 {
		t.Fatalf("%d requests", len(m.Seen))
	}
	sent, _ := json.Marshal(m.Seen[1])
	events, _ := json.Marshal(ev.data)
	if strings.Contains(string(sent), key) || !strings.Contains(string(sent), "the key is [REDACTED]") || strings.Contains(string(events), key) {
		t.Fatalf("the key reached the next request or the events:\n%s\n%s", sent, events)
	}
}
