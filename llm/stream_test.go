package llm_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/script"
	"github.com/capstan-dev/capstan/tool"
)

func TestStreamSinkContext(t *testing.T) {
	ctx := context.Background()
	if llm.StreamSinkFrom(ctx) != nil {
		t.Fatal("sink in an empty context")
	}
	if got := llm.WithStreamSink(ctx, nil); got != ctx {
		t.Fatal("a nil sink changed the context")
	}
	rec := &fakellm.SinkRecorder{}
	if llm.StreamSinkFrom(llm.WithStreamSink(ctx, rec)) != rec {
		t.Fatal("sink not found")
	}
}

// TestToolLoopStreamsTextAndBracketsTools runs the shared tool loop with
// the script provider: each turn's text reaches the sink, and every tool
// call — run, denied by the policy, or unknown — is bracketed by ToolStart
// and ToolEnd, with the tool running in between.
func TestToolLoopStreamsTextAndBracketsTools(t *testing.T) {
	rec := &fakellm.SinkRecorder{}
	var seenWhileRunning []string
	probe := testTool{"Probe", func(context.Context) (tool.Result, error) {
		seenWhileRunning = rec.Outline()
		return tool.Result{Content: "probed"}, nil
	}}
	blocked := testTool{"Blocked", func(context.Context) (tool.Result, error) {
		t.Error("a disallowed tool ran")
		return tool.Result{}, nil
	}}
	s, err := script.Parse("t.yaml", []byte(`turns:
  - text: "Let me check."
    tool_calls: [{name: Probe}, {name: Blocked}, {name: Nope}]
  - text: "All checked."
`))
	if err != nil {
		t.Fatal(err)
	}
	loop := llm.NewToolLoop(script.New(s), llm.Config{Tools: []tool.Tool{probe, blocked}})
	ctx := llm.WithStreamSink(context.Background(), rec)
	res, err := loop.Query(ctx, "go", llm.QueryOptions{DisallowedTools: []string{"Blocked"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"text:Let me check.", "start:Probe", "end:Probe", "start:Blocked", "end:Blocked!denied",
		"start:Nope", "end:Nope!error", "text:All checked."}
	if got := rec.Outline(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw\n%q\nwant\n%q", got, want)
	}
	if want := []string{"text:Let me check.", "start:Probe"}; !reflect.DeepEqual(seenWhileRunning, want) {
		t.Errorf("while Probe ran the sink had seen %q, want %q", seenWhileRunning, want)
	}
	// The sink's view agrees with the record.
	var ends []event.ToolUse
	for _, e := range rec.Events() {
		if e.Kind == "end" {
			ends = append(ends, e.Use)
		}
	}
	if !reflect.DeepEqual(ends, res.ToolUses) {
		t.Errorf("ToolEnd uses %+v\nresult uses %+v", ends, res.ToolUses)
	}
	for i, e := range rec.Events() {
		if e.Kind == "start" && (i+1 >= len(rec.Events()) || rec.Events()[i+1].Use.ID != e.Call.ID) {
			t.Errorf("ToolStart %s not followed by its ToolEnd", e.Call.ID)
		}
	}
}

// TestToolLoopWithoutSink is the zero-cost path: the same query without a
// sink behaves as before.
func TestToolLoopWithoutSink(t *testing.T) {
	s, _ := script.Parse("t.yaml", []byte(`turns:
  - tool_calls: [{name: Probe}]
  - text: done
`))
	probe := testTool{"Probe", func(context.Context) (tool.Result, error) { return tool.Result{Content: "ok"}, nil }}
	res, err := llm.NewToolLoop(script.New(s), llm.Config{Tools: []tool.Tool{probe}}).Query(context.Background(), "go", llm.QueryOptions{})
	if err != nil || len(res.ToolUses) != 1 || res.Responses[0] != "done" {
		t.Fatalf("%v %+v", err, res)
	}
}

func TestWithoutStreamSink(t *testing.T) {
	ctx := context.Background()
	if llm.WithoutStreamSink(ctx) != ctx {
		t.Fatal("a context without a sink changed")
	}
	ctx = llm.WithStreamSink(ctx, &fakellm.SinkRecorder{})
	if llm.StreamSinkFrom(llm.WithoutStreamSink(ctx)) != nil {
		t.Fatal("sink still found")
	}
}
