package openai_test

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

// probeTool answers with its input; it checks the sink saw its ToolStart
// before it runs.
type probeTool struct {
	rec *streamtest.Recorder
	t   *testing.T
}

func (probeTool) Spec() tool.Spec {
	return tool.Spec{Name: "Probe", InputSchema: json.RawMessage(`{"type":"object","properties":{"say":{"type":"string"}}}`)}
}
func (probeTool) Kind() tool.Kind { return tool.KindRead }
func (e probeTool) Run(_ context.Context, in json.RawMessage) (tool.Result, error) {
	if o := e.rec.Outline(); len(o) == 0 || o[len(o)-1] != "start:Probe" {
		e.t.Errorf("Probe ran after %q, want a ToolStart just before", o)
	}
	return tool.Result{Content: string(in)}, nil
}

func TestStreamSinkGetsContentDeltasAndToolCalls(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		{Text: "Let me echo that for you, 世界.", ChunkSize: 5, ToolCalls: []fakellm.ToolCall{{Name: "Probe", Input: json.RawMessage(`{"say":"hi"}`)}}},
		{Text: "The tool said hi.", ChunkSize: 3},
	}})
	rec := &streamtest.Recorder{}
	loop := llm.NewToolLoop(newModel(t, srv, testKey, nil, nil), llm.Config{Tools: []tool.Tool{probeTool{rec, t}}})
	res, err := loop.Query(llm.WithStreamSink(context.Background(), rec), "echo hi", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	texts := rec.Texts()
	if len(texts) < 6 {
		t.Fatalf("%d text deltas %q, want the reply in many fragments", len(texts), texts)
	}
	want := []string{"text:Let me echo that for you, 世界.", "start:Probe", "end:Probe", "text:The tool said hi."}
	if got := rec.Outline(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
	if got := strings.Join(texts, ""); got != strings.Join(res.Responses, "") {
		t.Errorf("deltas %q do not concatenate to the responses %q", got, res.Responses)
	}
}

// TestStreamCutMidMessageIsMarkedBeforeRetry: see the anthropic test of the
// same name; the contract is the same on every provider.
func TestStreamCutMidMessageIsMarkedBeforeRetry(t *testing.T) {
	const text = "Hello streaming world"
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		// the role chunk, then two content chunks: cut.
		{Text: text, ChunkSize: 5, Fault: &fakellm.Fault{CutAfter: 3}},
		{Text: text, ChunkSize: 5},
	}})
	rec := &streamtest.Recorder{}
	resp, err := newModel(t, srv, testKey, &sleeps{}, nil).Generate(llm.WithStreamSink(context.Background(), rec), userReq("hi"))
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
}
