package openai_test

import (
	"context"
	"testing"

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
