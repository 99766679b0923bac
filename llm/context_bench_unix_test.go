//go:build unix

package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool"
)

// echoModel answers a prompt with a call of the RunTests tool and the
// tool's result with a final text, reporting usage as a provider does.
type echoModel struct{}

func (echoModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	usage := event.Usage{InputTokens: 900, OutputTokens: 12}
	if last := req.Messages[len(req.Messages)-1]; last.Role != event.RoleTool {
		return &llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: "running the tests",
			ToolCalls: []event.ToolCall{{Name: "RunTests", Input: json.RawMessage(`{}`)}}}, StopReason: "tool_use", Usage: usage}, nil
	}
	return &llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: "the tests ran; the next part follows"},
		StopReason: "end_turn", Usage: usage}, nil
}

// smallOutput is a tool whose every call prints a few hundred bytes.
type smallOutput struct{}

func (smallOutput) Spec() tool.Spec {
	return tool.Spec{Name: "RunTests", Description: "run the test suite", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}
}
func (smallOutput) Kind() tool.Kind { return tool.KindRead }
func (smallOutput) Run(context.Context, json.RawMessage) (tool.Result, error) {
	return tool.Result{Content: strings.Repeat("ok  \tpkg/part\t0.01s\n", 10)}, nil
}

// BenchmarkQueryCostBySessionLength measures whether a query costs more
// CPU the longer its session when every request is fitted into a known
// context window (a Compactor, as a real model name gets): one op is a
// session of 100 queries, each a tool call and a final answer (two model
// turns), and the process CPU time of queries 1–5 and 96–100 is reported
// per query. A fit that re-measures the whole transcript every turn makes
// the late figure grow with the session; kept sizes keep it flat.
func BenchmarkQueryCostBySessionLength(b *testing.B) {
	const queries = 100
	ctx := context.Background()
	var early, late time.Duration
	for b.Loop() {
		model := echoModel{}
		loop := llm.NewToolLoop(model, llm.Config{Model: "claude-sonnet-5", Tools: []tool.Tool{smallOutput{}},
			Context: llm.NewCompactor(200_000, model, "claude-sonnet-5", llm.CompactionOptions{})})
		session := ""
		at := make([]time.Duration, 0, queries+1)
		for q := 0; q < queries; q++ {
			at = append(at, testenv.ProcessCPUTime())
			res, err := loop.Query(ctx, "RETRY: the tests still fail; fix the code.", llm.QueryOptions{SessionID: session, SystemPrompt: "act"})
			if err != nil {
				b.Fatal(err)
			}
			session = res.SessionID
		}
		at = append(at, testenv.ProcessCPUTime())
		early += at[5] - at[0]
		late += at[100] - at[95]
	}
	n := float64(b.N * 5)
	b.ReportMetric(float64(early.Nanoseconds())/n, "cpu-ns/query-1-5")
	b.ReportMetric(float64(late.Nanoseconds())/n, "cpu-ns/query-96-100")
	b.ReportMetric(float64(late)/float64(early), "late/early")
}
