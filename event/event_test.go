package event

import (
	"testing"
	"time"
)

type pos struct {
	i int
	s string
}

func (p pos) Position() (int, string) { return p.i, p.s }

type wants struct {
	got  []Event
	want bool
}

func (w *wants) Consume(e Event)        { w.got = append(w.got, e) }
func (w *wants) WantsModelOutput() bool { return w.want }

func TestStreamStampsAndRoutes(t *testing.T) {
	now := time.Unix(100, 0)
	plain, output := &wants{}, &wants{want: true}
	s := NewStream(func() time.Time { return now }, plain, nil, output)
	s.Emit("a", nil)
	s.Emit("iteration.start", pos{2, ""})
	s.Emit("b", nil)
	s.Emit("prompt.resolved", pos{2, "work"})
	if k := s.ModelOutput(); k == nil {
		t.Fatal("a consumer wants model output but there is no sink")
	} else {
		k.TextDelta("hel")
	}
	s.Emit("c", "x")
	want := []struct {
		typ  string
		iter int
		step string
	}{{"a", 0, ""}, {"iteration.start", 2, ""}, {"b", 2, ""}, {"prompt.resolved", 2, "work"}, {"c", 2, "work"}}
	if len(plain.got) != len(want) {
		t.Fatalf("plain consumer got %d events: %+v", len(plain.got), plain.got)
	}
	for i, w := range want {
		if e := plain.got[i]; e.Type != w.typ || e.Iteration != w.iter || e.Step != w.step || !e.Time.Equal(now) {
			t.Errorf("event %d: %+v, want %+v", i, e, w)
		}
	}
	if len(output.got) != len(want)+1 || output.got[4].Type != TextDelta || output.got[4].Data != "hel" || output.got[4].Step != "work" {
		t.Fatalf("model-output consumer got %+v", output.got)
	}
	if NewStream(nil, plain).ModelOutput() != nil {
		t.Fatal("a sink without anyone wanting model output makes providers stream for nobody")
	}
}
