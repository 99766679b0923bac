package fakellm

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool"
)

// echoTool answers with its input and fails the test unless the recorder's
// last event is its own ToolStart: the sink must hear of a call before the
// tool runs.
type echoTool struct {
	t    testing.TB
	rec  *SinkRecorder
	name string
}

func (e echoTool) Spec() tool.Spec {
	return tool.Spec{Name: e.name, InputSchema: json.RawMessage(`{"type":"object","properties":{"say":{"type":"string"}}}`)}
}
func (echoTool) Kind() tool.Kind { return tool.KindRead }
func (e echoTool) Run(_ context.Context, in json.RawMessage) (tool.Result, error) {
	if o := e.rec.Outline(); len(o) == 0 || o[len(o)-1] != "start:"+e.name {
		e.t.Errorf("%s ran after %q, want a ToolStart just before", e.name, o)
	}
	return tool.Result{Content: string(in)}, nil
}

// Texts of the ToolTurn conversation: an answer in fragments with a tool
// call, then a short final answer.
const (
	toolTurnFirst = "Let me echo that for you, 世界."
	toolTurnFinal = "The tool said hi."
)

// ToolTurnReplies are a fake server's replies for CheckToolTurn: toolTurnFirst
// in 5-byte fragments with a call of the tool named toolName, then
// toolTurnFinal in 3-byte fragments.
func ToolTurnReplies(toolName string) []Reply {
	return []Reply{
		{Text: toolTurnFirst, ChunkSize: 5, ToolCalls: []ToolCall{{Name: toolName, Input: json.RawMessage(`{"say":"hi"}`)}}},
		{Text: toolTurnFinal, ChunkSize: 3},
	}
}

// CheckToolTurn runs model (talking to a fake server that serves
// ToolTurnReplies(toolName)) through the shared tool loop with a sink, and
// checks the provider's part of the StreamSink contract: text arrives in
// many fragments that join to the responses, and the tool call is
// bracketed by ToolStart and ToolEnd, in order.
func CheckToolTurn(t *testing.T, model llm.Model, toolName string) {
	t.Helper()
	rec := &SinkRecorder{}
	loop := llm.NewToolLoop(model, llm.Config{Tools: []tool.Tool{echoTool{t, rec, toolName}}})
	res, err := loop.Query(llm.WithStreamSink(context.Background(), rec), "echo hi", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	texts := rec.Texts()
	if len(texts) < 6 {
		t.Fatalf("%d text deltas %q, want the reply in many fragments", len(texts), texts)
	}
	want := []string{"text:" + toolTurnFirst, "start:" + toolName, "end:" + toolName, "text:" + toolTurnFinal}
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

// CutText is the reply of CheckCutThenRetry's conversation.
const CutText = "Hello streaming world"

// CheckCutThenRetry checks a generation whose first stream was cut after
// the fragment "Hello stre" and retried: the sink hears the broken text,
// one TextDiscarded that says why, and then the retry's text alone, which
// is the final text.
func CheckCutThenRetry(t *testing.T, rec *SinkRecorder, resp *llm.Response) {
	t.Helper()
	if resp.Message.Text != CutText {
		t.Fatalf("text = %q", resp.Message.Text)
	}
	want := []string{"text:Hello stre", "discard", "text:" + CutText}
	if got := rec.Outline(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
	evs := rec.Events()
	for i, e := range evs {
		if e.Kind != "discard" {
			continue
		}
		if !strings.Contains(e.Text, "dropped") && !strings.Contains(e.Text, "connection") {
			t.Errorf("discard reason %q does not say why", e.Text)
		}
		var after strings.Builder
		for _, x := range evs[i+1:] {
			after.WriteString(x.Text)
		}
		if after.String() != resp.Message.Text {
			t.Errorf("text after the discard %q != final text %q", after.String(), resp.Message.Text)
		}
	}
}
