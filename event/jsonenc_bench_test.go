package event

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

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

// iterationEvents are the nine events an iteration of a one-step agent
// without tools journals, with the values such an iteration has: the
// model's answer (100 input, 10 output tokens) in model.turn,
// session.messages, query.result and the iteration summary.
func iterationEvents(i int) []Payload {
	began := time.Date(2026, 11, 21, 9, 45, 0, 123456789, time.UTC)
	prompt := "Iteration " + strconv.Itoa(i) + ": write notes about boats."
	answer := Message{Role: RoleAssistant, Text: "Noted: boats float."}
	usage := Usage{InputTokens: 100, OutputTokens: 10}
	summary := &IterationSummary{Iteration: i, SessionID: "session-1", StepID: "work", Prompt: prompt,
		AssistantResponses: []string{answer.Text}, ToolsUsed: []ToolUse{}, DetectedActions: []DetectedAction{},
		Errors: []string{}, Usage: usage, Timestamp: began, DurationMs: 1}
	return []Payload{
		IterationStartEvent{Iteration: i},
		PromptEvent{Source: "prompts/steps/work/main/f_default.md", Text: prompt, Iteration: i, Step: "work"},
		QueryStartEvent{SessionID: "session-1", Source: "prompts/steps/work/main/f_default.md"},
		ModelTurnEvent{Turn: 1, Message: &answer, StopReason: "end_turn", Usage: usage, DurationMs: 1, Query: "c9ace2cd4d2d7115fa398751500f5eb3"},
		SessionMessagesEvent{SessionID: "session-1", Messages: []Message{{Role: RoleUser, Text: prompt, Pinned: true}, answer}},
		&QueryResult{Responses: summary.AssistantResponses, SessionID: "session-1", StopReason: "end_turn", Turns: 1, Usage: usage},
		StepMove{From: "work", To: "work", Kind: "stay", Passed: true, Reason: "step has no check"},
		&CheckEvent{Verdict: "continue"},
		IterationEvent{Summary: summary, RunUsage: Usage{InputTokens: 100 * int64(i), OutputTokens: 10 * int64(i)},
			StepState: &StepStateEvent{State: StepState{Current: "work", Visits: map[string]int{"work": i}, LastEntered: "work", Consecutive: i}}},
	}
}

// BenchmarkJournalIterationEvents writes the nine events of an iteration
// (iterationEvents) to a real journal through Journal: one op is the nine
// events.
func BenchmarkJournalIterationEvents(b *testing.B) {
	w, err := journal.Create(b.TempDir(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	j := Journal{Writer: w}
	events := iterationEvents(3)
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range events {
			j.Emit(p)
		}
	}
}

// BenchmarkEncodeIterationEvents is the encoding alone of the nine events
// of an iteration, by AppendJSON (self) and by encoding/json's Encoder
// as the journal used it before (reflection): one op is the nine payloads.
func BenchmarkEncodeIterationEvents(b *testing.B) {
	events := iterationEvents(3)
	b.Run("encoder=self", func(b *testing.B) {
		buf := make([]byte, 0, 4096)
		b.ReportAllocs()
		for b.Loop() {
			for _, p := range events {
				buf = p.(journal.AppendJSONer).AppendJSON(buf[:0])
			}
		}
	})
	b.Run("encoder=encoding/json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		b.ReportAllocs()
		for b.Loop() {
			for _, p := range events {
				buf.Reset()
				if err := enc.Encode(p); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
