package openai_test

import (
	"context"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/openai"
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

// An attempt whose stream the connection dropped after it began and
// before its usage chunk was billed by the server, which never reports
// how much: the answer of the retry carries its own usage and counts the
// dropped attempt in UnreportedAttempts; when every attempt drops so, the
// error carries the count.
func TestDroppedStreamWithoutUsageIsCountedUnreported(t *testing.T) {
	answer := event.Usage{InputTokens: 300, OutputTokens: 20}
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		// the role chunk and the first half of the text: then dropped.
		{Text: "first try", Usage: fakellm.Usage{InputTokens: 300, OutputTokens: 30}, Fault: &fakellm.Fault{CutAfter: 2}},
		{Text: "second try", Usage: fakellm.Usage{InputTokens: 300, OutputTokens: 20}},
	}})
	resp, err := newModel(t, srv, testKey, &sleeps{}, nil).Generate(context.Background(), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != answer || resp.UnreportedAttempts != 1 {
		t.Fatalf("usage %+v, unreported attempts %d; want the answer's %+v and 1", resp.Usage, resp.UnreportedAttempts, answer)
	}

	// A request refused before any chunk (HTTP 500) was not answered:
	// nothing to count.
	srv = fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		{Fault: &fakellm.Fault{Status: 500}},
		{Text: "answer", Usage: fakellm.Usage{InputTokens: 300, OutputTokens: 20}},
	}})
	if resp, err = newModel(t, srv, testKey, &sleeps{}, nil).Generate(context.Background(), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if resp.UnreportedAttempts != 0 {
		t.Fatalf("a refused attempt counted as billed: %d unreported attempts", resp.UnreportedAttempts)
	}

	var drops []fakellm.Reply
	for range 3 {
		drops = append(drops, fakellm.Reply{Text: "never finished", Fault: &fakellm.Fault{CutAfter: 2}})
	}
	srv = fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: drops})
	m, err := openai.New(openai.Config{APIKey: testKey, BaseURL: srv.URL, Model: "gpt-test", HTTPClient: srv.Client(),
		Retry: llm.RetryPolicy{MaxAttempts: 3, Rand: func() float64 { return 0 }, Sleep: (&sleeps{}).sleep}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), userReq("hi"))
	if err == nil || llm.BilledUnreported(err) != 3 {
		t.Fatalf("every attempt dropped: error %v with %d unreported attempts, want 3", err, llm.BilledUnreported(err))
	}
}
