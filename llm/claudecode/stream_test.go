package claudecode_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/capstan-dev/capstan/internal/streamtest"
	"github.com/capstan-dev/capstan/llm"
)

// TestStreamPartialMessages: with a sink the driver asks the CLI for
// partial messages and passes the stream_event text deltas on, not the
// assistant frames' copy of the same text; a delta run cut by an API retry
// is marked with TextDiscarded; a sub-agent's text is not streamed; tool
// calls are bracketed by their tool_use and tool_result frames.
func TestStreamPartialMessages(t *testing.T) {
	b, logPath := newBridge(t, "stream", nil, nil)
	rec := &streamtest.Recorder{}
	res, err := b.Query(llm.WithStreamSink(context.Background(), rec), "run the tests", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(readLog(t, logPath).Args, "--include-partial-messages") {
		t.Error("no --include-partial-messages with a sink")
	}
	want := []string{"text:Let me look.", "start:Bash", "end:Bash!error", "text:Tests fa", "discard", "text:Tests fail."}
	if got := rec.Outline(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
	if got := rec.Texts(); len(got) != 5 {
		t.Errorf("deltas %q, want the CLI's fragments", got)
	}
	if last := res.Responses[len(res.Responses)-1]; last != "Tests fail." {
		t.Errorf("responses %q", res.Responses)
	}
}

// TestStreamWithoutSinkAsksForNoPartialMessages: partial messages cost
// output volume, so the flag is passed only when a sink wants them.
func TestStreamWithoutSinkAsksForNoPartialMessages(t *testing.T) {
	b, logPath := newBridge(t, "stream", nil, nil)
	if _, err := b.Query(context.Background(), "run the tests", llm.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(readLog(t, logPath).Args, "--include-partial-messages") {
		t.Error("--include-partial-messages without a sink")
	}
}

// TestStreamAssistantFramesWhole: the default fake scenario sends no text
// deltas even when asked (like a CLI without partial-message support); each
// assistant frame's text then reaches the sink whole, as it arrives.
func TestStreamAssistantFramesWhole(t *testing.T) {
	b, _ := newBridge(t, "", nil, nil)
	rec := &streamtest.Recorder{}
	if _, err := b.Query(llm.WithStreamSink(context.Background(), rec), "fix the bug", llm.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"text:Reading the file.", "start:Read", "end:Read", "start:Bash", "end:Bash!denied", "text:You said: fix the bug"}
	if got := rec.Outline(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
}
