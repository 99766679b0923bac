package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/llm"
)

// Model stages run their turns on the shared tool loop (llm.Loop). These
// tests fail on the stage's former private loop.

// transcriptModel answers with fixed responses and keeps a copy of every
// request's messages.
type transcriptModel struct {
	replies []*llm.Response
	seen    [][]llm.Message
}

func (m *transcriptModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.seen = append(m.seen, append([]llm.Message(nil), req.Messages...))
	r := m.replies[0]
	m.replies = m.replies[1:]
	return r, nil
}

// A model that calls a tool the stage does not offer is answered, in the
// transcript, that there is none, and then answers.
func TestModelStageAnswersUnofferedToolCall(t *testing.T) {
	valid := text(`{"intents":[{"type":"activity","confidence":0.5}],"entities":{}}`)
	m := &transcriptModel{replies: []*llm.Response{
		{Message: llm.Message{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "Bash", Input: json.RawMessage(`{"command":"env"}`)}}},
			Usage: llm.Usage{InputTokens: 3}, StopReason: "tool_use"},
		&valid,
	}}
	mgr := newM(t, DefaultExecutionOptions(), intentStage(t, m, ""))
	out, err := mgr.Execute(context.Background(), input(t, "request", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.seen) != 2 {
		t.Fatalf("%d model turns", len(m.seen))
	}
	last := m.seen[1][len(m.seen[1])-1]
	if last.Role != llm.RoleTool || len(last.ToolResults) != 1 || last.ToolResults[0].CallID != "c1" ||
		!last.ToolResults[0].IsError || !strings.Contains(last.ToolResults[0].Content, "available tools: none") {
		t.Fatalf("second turn ends with %+v", last)
	}
	if runs := decode[[]AgentRun](t, out, KeyAgentRuns); runs[0].Usage == nil || runs[0].Usage.InputTokens != 13 {
		t.Fatalf("usage of both turns not recorded: %+v", runs[0].Usage)
	}
}

// A model that keeps calling tools is stopped by the loop's turn bound
// with a coded error rather than looping.
func TestModelStageTurnBound(t *testing.T) {
	call := &llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{{ID: "c", Name: "Read"}}}, StopReason: "tool_use"}
	m := &transcriptModel{replies: []*llm.Response{call, call, call, call, call}}
	_, err := intentStage(t, m, "").Execute(context.Background(), input(t, "request", "x"))
	if agenterr.CodeOf(err) != agenterr.CodeMaxTurns || len(m.seen) != 2 {
		t.Fatalf("err %v after %d turns", err, len(m.seen))
	}
}

// A model that returns neither a response nor an error fails the stage
// with a coded error instead of crashing the process.
func TestModelStageNilResponse(t *testing.T) {
	m := &transcriptModel{replies: []*llm.Response{nil}}
	_, err := intentStage(t, m, "").Execute(context.Background(), input(t, "request", "x"))
	if agenterr.CodeOf(err) != agenterr.CodeSdkRequest {
		t.Fatalf("err %v", err)
	}
}
