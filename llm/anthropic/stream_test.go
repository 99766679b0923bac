package anthropic_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/internal/streamtest"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool"
)

// echoTool answers with its input; it checks the sink saw its ToolStart
// before it runs.
type echoTool struct {
	rec *streamtest.Recorder
	t   *testing.T
}

func (echoTool) Spec() tool.Spec {
	return tool.Spec{Name: "Echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"say":{"type":"string"}}}`)}
}
func (echoTool) Kind() tool.Kind { return tool.KindRead }
func (e echoTool) Run(_ context.Context, in json.RawMessage) (tool.Result, error) {
	if o := e.rec.Outline(); len(o) == 0 || o[len(o)-1] != "start:Echo" {
		e.t.Errorf("Echo ran after %q, want a ToolStart just before", o)
	}
	return tool.Result{Content: string(in)}, nil
}

func TestStreamSinkGetsTextDeltasAndToolCalls(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		{Text: "Let me echo that for you, 世界.", ChunkSize: 5, ToolCalls: []fakellm.ToolCall{{Name: "Echo", Input: json.RawMessage(`{"say":"hi"}`)}}},
		{Text: "The tool said hi.", ChunkSize: 3},
	}})
	rec := &streamtest.Recorder{}
	loop := llm.NewToolLoop(newModel(t, srv, nil, nil), llm.Config{Tools: []tool.Tool{echoTool{rec, t}}})
	res, err := loop.Query(llm.WithStreamSink(context.Background(), rec), "echo hi", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	texts := rec.Texts()
	if len(texts) < 6 {
		t.Fatalf("%d text deltas %q, want the reply in many fragments", len(texts), texts)
	}
	want := []string{"text:Let me echo that for you, 世界.", "start:Echo", "end:Echo", "text:The tool said hi."}
	if got := rec.Outline(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
	if got := strings.Join(texts, ""); got != strings.Join(res.Responses, "") {
		t.Errorf("deltas %q do not concatenate to the responses %q", got, res.Responses)
	}
	for _, e := range rec.Events() {
		if e.Kind == "end" && (e.Use.Output != `{"say":"hi"}` || e.Use.IsError) {
			t.Errorf("ToolEnd use = %+v", e.Use)
		}
	}
}

// TestStreamCutMidMessageIsMarkedBeforeRetry: a stream dropped after some
// text deltas is retried; the sink is told TextDiscarded between the
// broken attempt's text and the retry's, so a display never runs the two
// together unmarked, and the retry's deltas alone make the final text.
func TestStreamCutMidMessageIsMarkedBeforeRetry(t *testing.T) {
	const text = "Hello streaming world"
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		// message_start, content_block_start, ping, then two deltas: cut.
		{Text: text, ChunkSize: 5, Fault: &fakellm.Fault{CutAfter: 5}},
		{Text: text, ChunkSize: 5},
	}})
	rec := &streamtest.Recorder{}
	resp, err := newModel(t, srv, &sleeps{}, nil).Generate(llm.WithStreamSink(context.Background(), rec), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Text != text {
		t.Fatalf("text = %q", resp.Message.Text)
	}
	want := []string{"text:Hello stre", "discard", "text:" + text}
	if got := rec.Outline(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
	evs := rec.Events()
	var after []string
	for i, e := range evs {
		if e.Kind == "discard" {
			if !strings.Contains(e.Text, "dropped") && !strings.Contains(e.Text, "connection") {
				t.Errorf("discard reason %q does not say why", e.Text)
			}
			for _, x := range evs[i+1:] {
				after = append(after, x.Text)
			}
		}
	}
	if strings.Join(after, "") != resp.Message.Text {
		t.Errorf("text after the discard %q != final text %q", after, resp.Message.Text)
	}
	if strings.Contains(strings.Join(rec.Texts(), ""), testKey) {
		t.Error("key in streamed text")
	}
}

// TestStreamFailureWithoutTextIsNotMarked: an attempt that fails before any
// text (a 529) needs no marker.
func TestStreamFailureWithoutTextIsNotMarked(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		{Fault: &fakellm.Fault{Status: 529}},
		{Text: "fine now"},
	}})
	rec := &streamtest.Recorder{}
	if _, err := newModel(t, srv, &sleeps{}, nil).Generate(llm.WithStreamSink(context.Background(), rec), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Outline(), []string{"text:fine now"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
}
