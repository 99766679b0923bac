package event

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool/builtin"
)

// text is what a model-output consumer would show: the text deltas
// joined.
func text(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == TextDelta {
			b.WriteString(e.Data.(string))
		}
	}
	return b.String()
}

// TestModelOutputIsRedacted: a stream that redacts delivers the model's
// text, tool calls and discard reasons with secret values replaced, also
// when a secret is split across the provider's fragments; the text it
// held back reaches the consumers before the event that ends the turn.
func TestModelOutputIsRedacted(t *testing.T) {
	const key = "sk-stream-0123456789abcdef"
	output, plain := &wants{want: true}, &wants{}
	s := NewStream(nil, plain, output)
	s.RedactModelOutput(builtin.NewStreamRedactor([]string{"STREAM_API_KEY=" + key}))
	k := s.ModelOutput()
	for _, d := range []string{"the key is sk-str", "eam-0123", "456789abcdef, and", " it ends sk-st"} {
		k.TextDelta(d)
	}
	if got := text(output.got); strings.Contains(got, "sk-st") || got != "the key is [REDACTED], and it ends " {
		t.Fatalf("text so far %q", got)
	}
	s.Emit(journal.ModelTurn, llm.ModelTurnEvent{Turn: 1})
	if got := text(output.got); got != "the key is [REDACTED], and it ends sk-st" {
		t.Fatalf("text at the turn's end %q", got)
	}
	if last := output.got[len(output.got)-1]; last.Type != journal.ModelTurn {
		t.Fatalf("the held-back text came after the turn's end: %+v", output.got)
	}

	in, _ := json.Marshal(map[string]any{"command": "echo " + key})
	from := len(output.got)
	k.TextDelta("calling with sk-stream-01")
	k.ToolStart(llm.ToolCall{ID: "c1", Name: "Bash", Input: in})
	k.ToolEnd(llm.ToolUse{ID: "c1", Name: "Bash", Input: in, Output: key + "\n"})
	k.TextDelta("retrying sk-stream-0")
	k.TextDiscarded("stream failed: bad key " + key)
	k.TextDelta("done")
	s.Emit(journal.QueryResult, nil)
	var all strings.Builder
	for _, e := range output.got {
		b, _ := json.Marshal(e.Data)
		all.Write(b)
	}
	if strings.Contains(all.String(), key) || strings.Contains(text(output.got), "retrying sk-") {
		t.Fatalf("model output holds the key or discarded text: %s", all.String())
	}
	// Consecutive text deltas are one text here.
	var types []string
	for _, e := range output.got[from:] {
		if e.Type != TextDelta || len(types) == 0 || types[len(types)-1] != TextDelta {
			types = append(types, e.Type)
		}
	}
	if want := "model.text model.tool.start model.tool.end model.text model.discarded model.text query.result"; strings.Join(types, " ") != want {
		t.Fatalf("events %q, want %q", types, want)
	}
	if got := text(output.got[from : from+2]); got != "calling with sk-stream-01" {
		t.Fatalf("text before the tool call %q", got)
	}
	if len(plain.got) != 2 {
		t.Fatalf("a consumer without model output got %+v", plain.got)
	}
}
