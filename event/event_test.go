package event

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/journal"
)

type wants struct {
	got  []Event
	want bool
}

func (w *wants) Consume(e Event)        { w.got = append(w.got, e) }
func (w *wants) WantsModelOutput() bool { return w.want }

// TestStreamStampsAndRoutes: every event carries its payload's kind and
// the position the last Positioner moved the run to; model-output events
// reach only the consumers that want them.
func TestStreamStampsAndRoutes(t *testing.T) {
	now := time.Unix(100, 0)
	plain, output := &wants{}, &wants{want: true}
	s := NewStream(func() time.Time { return now }, plain, nil, output)
	s.Emit(Warning("a"))
	s.Emit(&IterationStartEvent{Iteration: 2})
	s.Emit(QueryStartEvent{})
	s.Emit(&PromptEvent{Iteration: 2, Step: "work"})
	if !s.WantsModelOutput() {
		t.Fatal("a consumer wants model output")
	}
	s.Emit(TextDeltaEvent{Text: "hel"})
	s.Emit(ErrorEvent{Message: "x"})
	want := []struct {
		kind Kind
		iter int
		step string
	}{{KindWarning, 0, ""}, {KindIterationStart, 2, ""}, {KindQueryStart, 2, ""}, {KindPromptResolved, 2, "work"}, {KindError, 2, "work"}}
	if len(plain.got) != len(want) {
		t.Fatalf("plain consumer got %d events: %+v", len(plain.got), plain.got)
	}
	for i, w := range want {
		if e := plain.got[i]; e.Kind != w.kind || e.Iteration != w.iter || e.Step != w.step || !e.Time.Equal(now) {
			t.Errorf("event %d: %+v, want %+v", i, e, w)
		}
	}
	if len(output.got) != len(want)+1 || output.got[4].Kind != KindTextDelta || output.got[4].Payload != (TextDeltaEvent{Text: "hel"}) || output.got[4].Step != "work" {
		t.Fatalf("model-output consumer got %+v", output.got)
	}
	if NewStream(nil, plain).WantsModelOutput() {
		t.Fatal("no consumer wants model output")
	}
}

// TestJournalWritesKindAndPayload: the journal line of an event is its
// payload's kind and the payload's JSON; an event read back from a
// journal (Raw) is written again as it was; activity events are not
// written.
func TestJournalWritesKindAndPayload(t *testing.T) {
	w, err := journal.Create(t.TempDir(), "run")
	if err != nil {
		t.Fatal(err)
	}
	j := Journal{Writer: w}
	j.Emit(ToolUse{ID: "c1", Name: "Bash", Input: json.RawMessage(`{}`), Denied: true})
	j.Emit(ActivityStartEvent{Activity{Kind: ActivityValidator, Name: "v"}})
	j.Emit(Raw{Kind: "workflow.phase", Data: json.RawMessage(`{"issue":7}`)})
	j.Emit(LifecycleEvent{State: "started"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := journal.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ typ, data string }{
		{"tool.denied", `{"id":"c1","name":"Bash","input":{},"output":"","denied":true,"duration_ms":0}`},
		{"workflow.phase", `{"issue":7}`},
		{"lifecycle", `{"state":"started"}`},
	}
	if len(evs) != len(want) {
		t.Fatalf("journal has %d events: %+v", len(evs), evs)
	}
	for i, w := range want {
		if evs[i].Type != w.typ || string(evs[i].Data) != w.data {
			t.Errorf("event %d: %s %s, want %s %s", i, evs[i].Type, evs[i].Data, w.typ, w.data)
		}
	}
}
