package llm

import (
	"encoding/json"
	"strings"
	"testing"

	"context"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/proc"
)

// text is what a model-output consumer would show: the text deltas
// joined.
func text(evs []event.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if d, ok := e.Payload.(event.TextDeltaEvent); ok {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// wants is a consumer that wants model output, or not.
type wants struct {
	got  []event.Event
	want bool
}

func (w *wants) Consume(e event.Event)  { w.got = append(w.got, e) }
func (w *wants) WantsModelOutput() bool { return w.want }

// streamSink is the sink StreamEvents puts in a context for s.
func streamSinkOf(t *testing.T, s *event.Stream) StreamSink {
	t.Helper()
	ctx, done := StreamEvents(context.Background(), s)
	t.Cleanup(done)
	k := StreamSinkFrom(ctx)
	if k == nil {
		t.Fatal("a consumer wants model output but there is no sink")
	}
	return k
}

// TestStreamEventsMakesModelOutputEvents: the sink StreamEvents gives the
// providers turns the model's work into model-output events, delivered
// only to the consumers that want them, at the run's position; with no
// such consumer there is no sink (providers do not stream for nobody).
func TestStreamEventsMakesModelOutputEvents(t *testing.T) {
	plain, output := &wants{}, &wants{want: true}
	s := event.NewStream(nil, plain, output)
	s.Emit(&event.PromptEvent{Iteration: 2, Step: "work"})
	streamSinkOf(t, s).TextDelta("hel")
	if len(plain.got) != 1 || len(output.got) != 2 {
		t.Fatalf("plain got %+v, output got %+v", plain.got, output.got)
	}
	if e := output.got[1]; e.Kind != event.KindTextDelta || e.Payload != (event.TextDeltaEvent{Text: "hel"}) || e.Iteration != 2 || e.Step != "work" {
		t.Fatalf("model-output event %+v", e)
	}
	ctx, done := StreamEvents(context.Background(), event.NewStream(nil, plain))
	defer done()
	if StreamSinkFrom(ctx) != nil {
		t.Fatal("a sink without anyone wanting model output makes providers stream for nobody")
	}
}

// TestModelOutputIsRedacted: a stream that redacts delivers the model's
// text, tool calls and discard reasons with secret values replaced, also
// when a secret is split across the provider's fragments; the text it
// held back reaches the consumers before the event that ends the turn.
func TestModelOutputIsRedacted(t *testing.T) {
	const key = "sk-stream-0123456789abcdef"
	output, plain := &wants{want: true}, &wants{}
	s := event.NewStream(nil, plain, output)
	s.RedactModelOutput(proc.NewStreamRedactor([]string{"STREAM_API_KEY=" + key}))
	k := streamSinkOf(t, s)
	for _, d := range []string{"the key is sk-str", "eam-0123", "456789abcdef, and", " it ends sk-st"} {
		k.TextDelta(d)
	}
	if got := text(output.got); strings.Contains(got, "sk-st") || got != "the key is [REDACTED], and it ends " {
		t.Fatalf("text so far %q", got)
	}
	s.Emit(event.ModelTurnEvent{Turn: 1})
	if got := text(output.got); got != "the key is [REDACTED], and it ends sk-st" {
		t.Fatalf("text at the turn's end %q", got)
	}
	if last := output.got[len(output.got)-1]; last.Kind != event.KindModelTurn {
		t.Fatalf("the held-back text came after the turn's end: %+v", output.got)
	}

	in, _ := json.Marshal(map[string]any{"command": "echo " + key})
	from := len(output.got)
	k.TextDelta("calling with sk-stream-01")
	k.ToolStart(event.ToolCall{ID: "c1", Name: "Bash", Input: in})
	k.ToolEnd(event.ToolUse{ID: "c1", Name: "Bash", Input: in, Output: key + "\n"})
	k.TextDelta("retrying sk-stream-0")
	k.TextDiscarded("stream failed: bad key " + key)
	k.TextDelta("done")
	s.Emit(&event.QueryResult{})
	var all strings.Builder
	for _, e := range output.got {
		b, _ := json.Marshal(e.Payload)
		all.Write(b)
	}
	if strings.Contains(all.String(), key) || strings.Contains(text(output.got), "retrying sk-") {
		t.Fatalf("model output holds the key or discarded text: %s", all.String())
	}
	// Consecutive text deltas are one text here.
	var types []string
	for _, e := range output.got[from:] {
		if e.Kind != event.KindTextDelta || len(types) == 0 || types[len(types)-1] != string(event.KindTextDelta) {
			types = append(types, string(e.Kind))
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
