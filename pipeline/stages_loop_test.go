package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
)

// Model stages run their turns on the shared tool loop (llm.Loop). These
// tests fail on the stage's former private loop.

// A model that calls a tool the stage does not offer is answered, in the
// transcript, that there is none, and then answers.
func TestModelStageAnswersUnofferedToolCall(t *testing.T) {
	valid := text(`{"intents":[{"type":"activity","confidence":0.5}],"entities":{}}`)
	m := &fakellm.Replay{Replies: []*llm.Response{
		{Message: event.Message{ToolCalls: []event.ToolCall{{ID: "c1", Name: "Bash", Input: json.RawMessage(`{"command":"env"}`)}}},
			Usage: event.Usage{InputTokens: 3}, StopReason: "tool_use"},
		&valid,
	}}
	mgr := newM(t, DefaultExecutionOptions(), intentStage(t, m, ""))
	out, err := mgr.Execute(context.Background(), input(t, "request", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Seen) != 2 {
		t.Fatalf("%d model turns", len(m.Seen))
	}
	last := m.Seen[1][len(m.Seen[1])-1]
	if last.Role != event.RoleTool || len(last.ToolResults) != 1 || last.ToolResults[0].CallID != "c1" ||
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
	call := &llm.Response{Message: event.Message{ToolCalls: []event.ToolCall{{ID: "c", Name: "Read"}}}, StopReason: "tool_use"}
	m := &fakellm.Replay{Replies: []*llm.Response{call, call, call, call, call}}
	_, err := intentStage(t, m, "").Execute(context.Background(), input(t, "request", "x"))
	if agenterr.CodeOf(err) != agenterr.CodeMaxTurns || len(m.Seen) != 2 {
		t.Fatalf("err %v after %d turns", err, len(m.Seen))
	}
}

// A model that returns neither a response nor an error fails the stage
// with a coded error instead of crashing the process.
func TestModelStageNilResponse(t *testing.T) {
	m := &fakellm.Replay{Replies: []*llm.Response{nil}}
	_, err := intentStage(t, m, "").Execute(context.Background(), input(t, "request", "x"))
	if agenterr.CodeOf(err) != agenterr.CodeSdkRequest {
		t.Fatalf("err %v", err)
	}
}

// A model that knows a key (the stage's environment holds it) and writes
// it into its answer leaves [REDACTED] in the stage's postconditions.
func TestModelStageRedactsSecretsInTheAnswer(t *testing.T) {
	const key = "sk-stage-0123456789"
	t.Setenv("STAGE_TEST_API_KEY", key)
	answer := text(`{"intents":[{"type":"` + key + `","confidence":0.5}],"entities":{"k":"` + key + `"}}`)
	m := &fakellm.Replay{Replies: []*llm.Response{&answer}}
	out, err := intentStage(t, m, "").Execute(context.Background(), input(t, "request", "x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out)
	var intents []map[string]any
	_ = out.Decode("reasoning.intents", &intents)
	if strings.Contains(string(b), key) || len(intents) != 1 || intents[0]["type"] != "[REDACTED]" {
		t.Fatalf("the key reached the stage output: %s (intents %v)", b, intents)
	}
}
