package event

import (
	"encoding/json"
	"testing"

	"github.com/capstan-dev/capstan/journal"
)

// BenchmarkJournalSmallEvents writes the small events of an iteration
// with a tool call — iteration.start, prompt.resolved, query.start,
// tool.call, step.transition — to a real journal through Journal: one op
// is the five events.
func BenchmarkJournalSmallEvents(b *testing.B) {
	w, err := journal.Create(b.TempDir(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	j := Journal{Writer: w}
	events := []Payload{
		IterationStartEvent{Iteration: 3},
		PromptEvent{Source: "prompts/steps/work/main/f_default.md", Text: "Iteration 3: write notes about boats."},
		QueryStartEvent{SessionID: "sess-6abb244cd35266c0", Source: "prompts/steps/work/main/f_default.md"},
		ToolUse{ID: "call_1", Name: "Write", Input: json.RawMessage(`{"file_path":"notes.txt","content":"boats float\n"}`), Output: "Created notes.txt (12 bytes)."},
		StepMove{From: "work", To: "work", Kind: "stay", Passed: true, Reason: "step has no check"},
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range events {
			j.Emit(p)
		}
	}
}
