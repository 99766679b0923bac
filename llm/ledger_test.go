package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool"
)

// effectTool is a tool of kind execute that counts its runs and records
// the idempotency key it was given.
type effectTool struct {
	name       string
	idempotent bool
	runs       *atomic.Int64
	key        *atomic.Value
}

func (t effectTool) Spec() tool.Spec {
	return tool.Spec{Name: t.name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (t effectTool) Kind() tool.Kind  { return tool.KindExecute }
func (t effectTool) Idempotent() bool { return t.idempotent }
func (t effectTool) Run(ctx context.Context, _ json.RawMessage) (tool.Result, error) {
	t.runs.Add(1)
	if t.key != nil {
		t.key.Store(tool.IdempotencyKey(ctx))
	}
	return tool.Result{Content: t.name + " done"}, nil
}

// iterationEvents stamps every event with iteration 1, as the journal
// writer does, and keeps it encoded.
type iterationEvents struct{ events []journal.Event }

func (e *iterationEvents) Emit(p event.Payload) {
	typ, data := string(p.EventKind()), any(p)
	b, _ := json.Marshal(data)
	e.events = append(e.events, journal.Event{Type: typ, Iteration: 1, Data: b})
}

// cutAfterIntent is the journal of an attempt killed while the call named
// name ran: everything up to its tool.intent.
func cutAfterIntent(t *testing.T, events []journal.Event, name string) []journal.Event {
	t.Helper()
	for i, ev := range events {
		var in event.ToolIntentEvent
		if ev.Type == journal.ToolIntent && json.Unmarshal(ev.Data, &in) == nil && in.Name == name {
			return events[:i+1]
		}
	}
	t.Fatalf("no intent of %s", name)
	return nil
}

// TestLedgerContinuesACutQuery: an attempt is killed while the second of
// three calls runs. The next attempt, seeded from that journal, asks the
// model nothing it already answered, answers the finished call from the
// journal without running it, tells the model that the cut call was
// interrupted (with what the work dir shows now) without running it, runs
// the call the kill came before, and continues with the model's next turn.
// Had the cut tool been idempotent, it would have run again, with the same
// idempotency key.
func TestLedgerContinuesACutQuery(t *testing.T) {
	for _, idempotent := range []bool{false, true} {
		var a, b, c atomic.Int64
		var keyA, keyB atomic.Value
		tools := []tool.Tool{effectTool{name: "A", runs: &a, key: &keyA}, effectTool{name: "B", idempotent: idempotent, runs: &b, key: &keyB}, effectTool{name: "C", runs: &c}}
		first := &fakellm.Replay{Replies: []*llm.Response{
			{Message: event.Message{Text: "three calls", ToolCalls: calls("A", "B", "C")}, StopReason: "tool_use", Usage: event.Usage{InputTokens: 100}},
			{Message: event.Message{Text: "done"}, StopReason: "end_turn"},
		}}
		ev1 := &iterationEvents{}
		l1 := &llm.Ledger{RunID: "r1"}
		l1.Begin(1)
		if _, err := llm.NewToolLoop(first, llm.Config{Tools: tools, Events: ev1, Ledger: l1}).Query(context.Background(), "go", llm.QueryOptions{AllowedTools: []string{"A", "B", "C"}}); err != nil {
			t.Fatal(err)
		}
		journaled := cutAfterIntent(t, ev1.events, "B")
		a.Store(0)
		b.Store(0)
		c.Store(0)

		second := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{Text: "checked, done"}, StopReason: "end_turn"}}}
		l2 := &llm.Ledger{RunID: "r1", Describe: func(context.Context, int) string { return "work dir: B.txt added" }}
		l2.Seed(1, journaled)
		l2.Begin(1)
		ev2 := &iterationEvents{}
		res, err := llm.NewToolLoop(second, llm.Config{Tools: tools, Events: ev2, Ledger: l2}).Query(context.Background(), "go", llm.QueryOptions{AllowedTools: []string{"A", "B", "C"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(second.Seen) != 1 {
			t.Fatalf("idempotent %v: the model was asked %d times, want once (turn 1 is in the journal)", idempotent, len(second.Seen))
		}
		if res.Usage.InputTokens != 0 {
			t.Errorf("idempotent %v: the replayed turn was billed again: %+v", idempotent, res.Usage)
		}
		if a.Load() != 0 || c.Load() != 1 {
			t.Errorf("idempotent %v: A ran %d times again (want 0: its result is in the journal), C %d (want 1: it never started)", idempotent, a.Load(), c.Load())
		}
		results := second.Seen[0][2].ToolResults
		if results[0].Content != "A done" {
			t.Errorf("idempotent %v: A answered with %q", idempotent, results[0].Content)
		}
		if idempotent {
			if b.Load() != 1 || results[1].Content != "B done" {
				t.Errorf("idempotent B: ran %d times, answered %q", b.Load(), results[1].Content)
			}
			if keyB.Load() != "capstan:r1:1:cB" {
				t.Errorf("idempotency key %v", keyB.Load())
			}
		} else {
			if b.Load() != 0 || !results[1].IsError || !strings.Contains(results[1].Content, "interrupted before it finished") ||
				!strings.Contains(results[1].Content, "work dir: B.txt added") {
				t.Errorf("cut B: ran %d times, answered %+v", b.Load(), results[1])
			}
		}
		if keyA.Load() != "capstan:r1:1:cA" {
			t.Errorf("idempotency key of A %v", keyA.Load())
		}
		// A third attempt killed now continues from both attempts' records.
		l3 := &llm.Ledger{RunID: "r1"}
		l3.Seed(1, append(journaled, ev2.events...))
		third := &fakellm.Replay{}
		if _, err := llm.NewToolLoop(third, llm.Config{Tools: tools, Events: &iterationEvents{}, Ledger: l3}).Query(context.Background(), "go", llm.QueryOptions{AllowedTools: []string{"A", "B", "C"}}); err != nil {
			t.Fatal(err)
		}
		if len(third.Seen) != 0 || a.Load() != 0 || c.Load() != 1 {
			t.Errorf("third attempt: model asked %d times, A %d, C %d", len(third.Seen), a.Load(), c.Load())
		}
	}
}

// TestLedgerStartsAfreshElsewhere: a query whose prompt differs, and the
// next iteration, do not take anything from the record of a cut attempt.
func TestLedgerStartsAfreshElsewhere(t *testing.T) {
	var a atomic.Int64
	tools := []tool.Tool{effectTool{name: "A", runs: &a}}
	m := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{ToolCalls: calls("A")}, StopReason: "tool_use"}}}
	ev := &iterationEvents{}
	l := &llm.Ledger{}
	l.Begin(1)
	if _, err := llm.NewToolLoop(m, llm.Config{Tools: tools, Events: ev, Ledger: l}).Query(context.Background(), "go", llm.QueryOptions{AllowedTools: []string{"A", "B", "C"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prompt    string
		iteration int
	}{{"another prompt", 1}, {"go", 2}} {
		l := &llm.Ledger{}
		l.Seed(1, ev.events)
		l.Begin(c.iteration)
		m := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{ToolCalls: calls("A")}, StopReason: "tool_use"}}}
		before := a.Load()
		if _, err := llm.NewToolLoop(m, llm.Config{Tools: tools, Events: &iterationEvents{}, Ledger: l}).Query(context.Background(), c.prompt, llm.QueryOptions{AllowedTools: []string{"A", "B", "C"}}); err != nil {
			t.Fatal(err)
		}
		if len(m.Seen) != 2 || a.Load() != before+1 {
			t.Errorf("%+v: model asked %d times, A ran %d times", c, len(m.Seen), a.Load()-before)
		}
	}
}

// kindTool is a tool of the given kind that records its name in *last
// when it runs.
type kindTool struct {
	name string
	kind tool.Kind
	last *string
}

func (t kindTool) Spec() tool.Spec {
	return tool.Spec{Name: t.name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (t kindTool) Kind() tool.Kind { return t.kind }
func (t kindTool) Run(context.Context, json.RawMessage) (tool.Result, error) {
	*t.last += t.name
	return tool.Result{Content: t.name + " done"}, nil
}

// TestLedgerSavesFromTheFirstEffectEditsCannotRedo: AfterEffect (a
// Temporal worker's checkpoint of its checkout) is not called after file
// edits before the iteration's first other effect — an attempt that finds
// no checkpoint makes them again — and is called after every call that is
// not idempotent from that effect on. An attempt that continues a cut one
// saves after every such call.
func TestLedgerSavesFromTheFirstEffectEditsCannotRedo(t *testing.T) {
	var ran string
	tools := []tool.Tool{kindTool{"E1", tool.KindEdit, &ran}, kindTool{"E2", tool.KindEdit, &ran}, kindTool{"X", tool.KindExecute, &ran},
		kindTool{"E3", tool.KindEdit, &ran}, kindTool{"R", tool.KindRead, &ran}}
	allowed := llm.QueryOptions{AllowedTools: []string{"E1", "E2", "X", "E3", "R"}}
	var saved []string
	save := func(context.Context, int) { saved = append(saved, ran) }
	m := &fakellm.Replay{Replies: []*llm.Response{
		{Message: event.Message{ToolCalls: calls("R", "E1", "E2", "X", "E3")}, StopReason: "tool_use"},
		{Message: event.Message{Text: "done"}, StopReason: "end_turn"},
	}}
	ev := &iterationEvents{}
	l := &llm.Ledger{RunID: "r", AfterEffect: save}
	l.Begin(1)
	if _, err := llm.NewToolLoop(m, llm.Config{Tools: tools, Events: ev, Ledger: l}).Query(context.Background(), "go", allowed); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(saved, ","); ran != "RE1E2XE3" || got != "RE1E2X,RE1E2XE3" {
		t.Fatalf("ran %s, saved after %s; want saves after X and E3 only", ran, got)
	}
	// The worker was lost while X ran, before any checkpoint: the next
	// attempt finds the work dir as the iteration began (Restored), makes
	// E1 and E2 again, is told X was interrupted, and saves after each
	// call that is not idempotent.
	ran, saved = "", nil
	l2 := &llm.Ledger{RunID: "r", AfterEffect: save, Restored: true}
	l2.Seed(1, cutAfterIntent(t, ev.events, "X"))
	l2.Begin(1)
	m2 := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{Text: "done"}, StopReason: "end_turn"}}}
	if _, err := llm.NewToolLoop(m2, llm.Config{Tools: tools, Events: &iterationEvents{}, Ledger: l2}).Query(context.Background(), "go", allowed); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(saved, ","); ran != "E1E2E3" || got != "E1,E1E2,E1E2E3" {
		t.Fatalf("second attempt ran %s, saved after %s", ran, got)
	}
	// The next iteration starts without saving again.
	ran, saved = "", nil
	l2.Begin(2)
	m3 := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{ToolCalls: calls("E1")}, StopReason: "tool_use"}, {Message: event.Message{Text: "done"}, StopReason: "end_turn"}}}
	if _, err := llm.NewToolLoop(m3, llm.Config{Tools: tools, Events: &iterationEvents{}, Ledger: l2}).Query(context.Background(), "go", allowed); err != nil {
		t.Fatal(err)
	}
	if ran != "E1" || len(saved) != 0 {
		t.Fatalf("next iteration ran %s, saved %v", ran, saved)
	}
}
