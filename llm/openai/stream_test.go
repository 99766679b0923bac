package openai_test

import (
	"context"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
)

func TestStreamSinkGetsContentDeltasAndToolCalls(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: fakellm.ToolTurnReplies("Probe")})
	fakellm.CheckToolTurn(t, newModel(t, srv, testKey, nil, nil), "Probe")
}

// TestStreamCutMidMessageIsMarkedBeforeRetry: see the anthropic test of the
// same name; the contract is the same on every provider.
func TestStreamCutMidMessageIsMarkedBeforeRetry(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		// the role chunk, then two content chunks: cut.
		{Text: fakellm.CutText, ChunkSize: 5, Fault: &fakellm.Fault{CutAfter: 3}},
		{Text: fakellm.CutText, ChunkSize: 5},
	}})
	rec := &fakellm.SinkRecorder{}
	resp, err := newModel(t, srv, testKey, &sleeps{}, nil).Generate(llm.WithStreamSink(context.Background(), rec), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	fakellm.CheckCutThenRetry(t, rec, resp)
}

// The usage of a response in flight reaches the usage observer as the
// stream tells it: unreported from its first chunk, exact from the chunk
// that carries it (the last one); a dropped attempt whose stream had
// reported its usage is billed on top of the answer that follows.
func TestUsageObserverIsToldWhatTheStreamReported(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		// role chunk, two halves of the text, finish, usage: then dropped.
		{Text: "first try", Usage: fakellm.Usage{InputTokens: 300, OutputTokens: 30}, Fault: &fakellm.Fault{CutAfter: 5}},
		{Text: "second try", Usage: fakellm.Usage{InputTokens: 300, OutputTokens: 20}},
	}})
	type seen struct {
		u          event.Usage
		unreported bool
	}
	var got []seen
	ctx := llm.WithUsageObserver(context.Background(), func(u event.Usage, unreported bool) { got = append(got, seen{u, unreported}) })
	resp, err := newModel(t, srv, testKey, &sleeps{}, nil).Generate(ctx, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	first := event.Usage{InputTokens: 300, OutputTokens: 30}
	both := event.Usage{InputTokens: 600, OutputTokens: 50}
	want := []seen{{unreported: true}, {u: first}, {u: first, unreported: true}, {u: both}}
	if len(got) != len(want) {
		t.Fatalf("observed %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("observed %+v, want %+v", got, want)
		}
	}
	if resp.Usage != both {
		t.Fatalf("answer's usage %+v, want both attempts' %+v", resp.Usage, both)
	}
}
