package event

import (
	"reflect"
	"testing"
)

// The carry update rule: the previous response is the iteration's
// responses joined by newlines; the accumulated context keeps what it had
// and records the last tools used and actions detected.
func TestUpdateCarry(t *testing.T) {
	prev := ContextCarry{AccumulatedContext: map[string]any{"ticket": "T-1", "lastToolsUsed": []string{"Old"}}}
	s := &IterationSummary{
		AssistantResponses: []string{"first", "second"},
		ToolsUsed:          []ToolUse{{Name: "Read"}, {Name: "Edit"}},
		DetectedActions:    []DetectedAction{{Type: "tool:Read"}},
	}
	got := UpdateCarry(prev, s)
	if got.PreviousResponse != "first\nsecond" {
		t.Fatalf("previousResponse %q", got.PreviousResponse)
	}
	want := map[string]any{"ticket": "T-1", "lastToolsUsed": []string{"Read", "Edit"}, "lastActions": []string{"tool:Read"}}
	if !reflect.DeepEqual(got.AccumulatedContext, want) {
		t.Fatalf("accumulatedContext %#v", got.AccumulatedContext)
	}
	// The previous carry is not modified.
	if !reflect.DeepEqual(prev.AccumulatedContext["lastToolsUsed"], []string{"Old"}) {
		t.Fatal("UpdateCarry mutated its input")
	}
	// An empty iteration records empty lists, not stale ones.
	empty := UpdateCarry(got, &IterationSummary{})
	if l := empty.AccumulatedContext["lastToolsUsed"].([]string); len(l) != 0 || empty.PreviousResponse != "" {
		t.Fatalf("%#v", empty)
	}
}
