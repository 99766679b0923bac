package openai_test

import (
	"context"
	"testing"

	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/internal/streamtest"
	"github.com/capstan-dev/capstan/llm"
)

func TestStreamSinkGetsContentDeltasAndToolCalls(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: streamtest.ToolTurnReplies("Probe")})
	streamtest.CheckToolTurn(t, newModel(t, srv, testKey, nil, nil), "Probe")
}

// TestStreamCutMidMessageIsMarkedBeforeRetry: see the anthropic test of the
// same name; the contract is the same on every provider.
func TestStreamCutMidMessageIsMarkedBeforeRetry(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		// the role chunk, then two content chunks: cut.
		{Text: streamtest.CutText, ChunkSize: 5, Fault: &fakellm.Fault{CutAfter: 3}},
		{Text: streamtest.CutText, ChunkSize: 5},
	}})
	rec := &streamtest.Recorder{}
	resp, err := newModel(t, srv, testKey, &sleeps{}, nil).Generate(llm.WithStreamSink(context.Background(), rec), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	streamtest.CheckCutThenRetry(t, rec, resp)
}
