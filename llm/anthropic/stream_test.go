package anthropic_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
)

func TestStreamSinkGetsTextDeltasAndToolCalls(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: testKey, Replies: fakellm.ToolTurnReplies("Echo")})
	fakellm.CheckToolTurn(t, newModel(t, srv, nil, nil), "Echo")
}

// TestStreamCutMidMessageIsMarkedBeforeRetry: a stream dropped after some
// text deltas is retried; the sink is told TextDiscarded between the
// broken attempt's text and the retry's, so a display never runs the two
// together unmarked, and the retry's deltas alone make the final text.
func TestStreamCutMidMessageIsMarkedBeforeRetry(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		// message_start, content_block_start, ping, then two deltas: cut.
		{Text: fakellm.CutText, ChunkSize: 5, Fault: &fakellm.Fault{CutAfter: 5}},
		{Text: fakellm.CutText, ChunkSize: 5},
	}})
	rec := &fakellm.SinkRecorder{}
	resp, err := newModel(t, srv, &sleeps{}, nil).Generate(llm.WithStreamSink(context.Background(), rec), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	fakellm.CheckCutThenRetry(t, rec, resp)
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
	rec := &fakellm.SinkRecorder{}
	if _, err := newModel(t, srv, &sleeps{}, nil).Generate(llm.WithStreamSink(context.Background(), rec), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Outline(), []string{"text:fine now"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sink saw %q, want %q", got, want)
	}
}
