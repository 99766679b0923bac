package agent

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool"
)

// callingModel asks for a tool call on every turn.
type callingModel struct{}

func (callingModel) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	return &llm.Response{Message: event.Message{ToolCalls: []event.ToolCall{{Name: "Nothing"}}}, StopReason: "tool_use",
		Usage: event.Usage{InputTokens: 10, OutputTokens: 5}}, nil
}

// TestMaxTurnsKeepsTheSession: a query that runs out of turns keeps its
// transcript in its session (to be continued on resume); the iteration's
// summary and the run name that session, also when it was the run's first.
func TestMaxTurnsKeepsTheSession(t *testing.T) {
	bridge := llm.NewToolLoop(callingModel{}, llm.Config{MaxTurns: 2})
	l, err := NewLoop(LoopConfig{Bridge: bridge, Flow: untilFlow{}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &RuntimeContext{}
	res := l.Run(context.Background(), rc)
	if !errors.Is(res.Err, agenterr.ErrMaxTurns) || len(rc.Summaries) != 1 {
		t.Fatalf("result %+v", res)
	}
	sid := bridge.SessionID()
	if sid == "" || len(bridge.Transcript(sid)) != 5 {
		t.Fatalf("the bridge kept session %q: %+v", sid, bridge.Transcript(sid))
	}
	if rc.Summaries[0].SessionID != sid || rc.SessionID != sid || res.SessionID != sid {
		t.Fatalf("summary names session %q, run %q / %q; the transcript is in %q", rc.Summaries[0].SessionID, rc.SessionID, res.SessionID, sid)
	}
	if rc.Summaries[0].Usage.OutputTokens != 10 {
		t.Errorf("usage %+v", rc.Summaries[0].Usage)
	}
}

// stepFlow sends iteration 2 to its own bridge in session "step-s".
type stepFlow struct{ step llm.Bridge }

func (f stepFlow) Next(_ context.Context, rc *RuntimeContext) (Turn, error) {
	if rc.Iteration == 2 {
		return Turn{StepID: "own", Prompt: "p", Bridge: f.step, SessionID: "step-s"}, nil
	}
	return Turn{StepID: "work", Prompt: "p"}, nil
}

func (stepFlow) After(context.Context, *RuntimeContext, *event.IterationSummary) (Outcome, error) {
	return Outcome{}, nil
}

// failingBridge fails every query after one billed turn.
type failingBridge struct{}

func (failingBridge) Query(context.Context, string, llm.QueryOptions) (*event.QueryResult, error) {
	return &event.QueryResult{Turns: 2, Usage: event.Usage{InputTokens: 3}},
		agenterr.New(agenterr.CodeSdkRateLimit, agenterr.LayerSDKBridge, true, "slow down")
}
func (failingBridge) SessionID() string { return "" }
func (failingBridge) Close() error      { return nil }

// TestFailedStepQueryNamesItsSession: the summary of an iteration whose
// query to a step's own model failed names that model's session, not the
// run's (resume continues each model's session from the summaries).
func TestFailedStepQueryNamesItsSession(t *testing.T) {
	l, err := NewLoop(LoopConfig{Bridge: llm.NewToolLoop(echoModel{}, llm.Config{}), Flow: stepFlow{step: failingBridge{}}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &RuntimeContext{}
	res := l.Run(context.Background(), rc)
	if len(rc.Summaries) != 2 || res.Err == nil {
		t.Fatalf("result %+v", res)
	}
	run := rc.Summaries[0].SessionID
	if got := rc.Summaries[1].SessionID; got != "step-s" || rc.SessionID != run || run == "" {
		t.Fatalf("failed step query recorded session %q; run session %q → %q", got, run, rc.SessionID)
	}
}

// lostSessionBridge answers like the run's bridge, except that its first
// query in an existing session fails as a lost session after a billed
// turn and a tool call.
type lostSessionBridge struct {
	llm.Bridge
	failed bool
}

func (b *lostSessionBridge) Query(ctx context.Context, prompt string, opts llm.QueryOptions) (*event.QueryResult, error) {
	if opts.SessionID != "" && !b.failed {
		b.failed = true
		return &event.QueryResult{Turns: 2, Usage: event.Usage{InputTokens: 1000, OutputTokens: 100},
				ToolUses: []event.ToolUse{{ID: "c1", Name: "Bash", Output: "ran"}}},
			agenterr.New(agenterr.CodeSdkSessionNotFound, agenterr.LayerSDKBridge, true, "no session %s", opts.SessionID)
	}
	return b.Bridge.Query(ctx, prompt, opts)
}

// TestReconnectCountsTheLostAttempt: the query asked again in a new
// session after the backend lost the old one does not make the first
// attempt's billed turns and tool calls disappear.
func TestReconnectCountsTheLostAttempt(t *testing.T) {
	bridge := &lostSessionBridge{Bridge: llm.NewToolLoop(echoModel{}, llm.Config{})}
	l, err := NewLoop(LoopConfig{Bridge: bridge, Flow: untilFlow{doneAt: 2}, Cost: func(u event.Usage) float64 { return float64(u.InputTokens) / 1000 }})
	if err != nil {
		t.Fatal(err)
	}
	rc := &RuntimeContext{}
	res := l.Run(context.Background(), rc)
	if !res.Success || !bridge.failed {
		t.Fatalf("result %+v", res)
	}
	s := rc.Summaries[1]
	if s.Usage.InputTokens < 1000 || s.Usage.OutputTokens < 100 || len(s.ToolsUsed) != 1 || s.CostUSD < 1 {
		t.Fatalf("iteration 2 counts usage %+v, cost %v, tools %+v", s.Usage, s.CostUSD, s.ToolsUsed)
	}
	if res.Usage.InputTokens < 1000 {
		t.Errorf("run usage %+v", res.Usage)
	}
}

// TestReconnectBudgetCountsTheLostAttempt: the query asked again after
// the backend lost its session is held to the token budget with the lost
// attempt's turns counted (it ran to MAX_TURNS past the budget).
func TestReconnectBudgetCountsTheLostAttempt(t *testing.T) {
	bridge := &lostSessionBridge{Bridge: llm.NewToolLoop(callingModel{}, llm.Config{MaxTurns: 25})}
	l, err := NewLoop(LoopConfig{Bridge: bridge, Flow: untilFlow{}, Budgets: Budgets{MaxTokens: 1060}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &RuntimeContext{SessionID: "gone"}
	res := l.Run(context.Background(), rc)
	if !bridge.failed || res.CompletionReason != ReasonTokenBudget || !errors.Is(res.Err, agenterr.ErrBudgetExceeded) || res.Usage.Total() != 1100 {
		t.Fatalf("%s %v, usage %d", res.CompletionReason, res.Err, res.Usage.Total())
	}
}

// TestTokenBudgetStopsWithinAnIteration: the token and cost budgets are
// checked before every model turn of the tool loop, not only between
// iterations: a model that keeps calling tools in one iteration cannot
// spend past them by up to maxTurns turns. The transcript so far is kept
// in the session, as after MAX_TURNS.
func TestTokenBudgetStopsWithinAnIteration(t *testing.T) {
	for _, c := range []struct {
		name    string
		budgets Budgets
		reason  string
	}{
		{"tokens", Budgets{MaxTokens: 40}, ReasonTokenBudget},
		{"cost", Budgets{MaxCostUSD: 0.04}, ReasonCostBudget},
	} {
		t.Run(c.name, func(t *testing.T) {
			bridge := llm.NewToolLoop(callingModel{}, llm.Config{MaxTurns: 25})
			l, err := NewLoop(LoopConfig{Bridge: bridge, Flow: untilFlow{}, Budgets: c.budgets,
				Cost: func(u event.Usage) float64 { return float64(u.Total()) / 1000 }})
			if err != nil {
				t.Fatal(err)
			}
			rc := &RuntimeContext{}
			res := l.Run(context.Background(), rc)
			checkInvariant(t, rc, res)
			// 15 tokens a turn: the third turn reaches 45 ≥ 40, so no fourth
			// is sent.
			if res.CompletionReason != c.reason || !errors.Is(res.Err, agenterr.ErrBudgetExceeded) || res.Usage.Total() != 45 {
				t.Fatalf("%s %v, usage %d", res.CompletionReason, res.Err, res.Usage.Total())
			}
			if len(rc.Summaries) != 1 || rc.Summaries[0].Usage.Total() != 45 || len(rc.Summaries[0].ToolsUsed) != 3 {
				t.Fatalf("summaries %+v", rc.Summaries)
			}
			if sid := rc.Summaries[0].SessionID; sid == "" || len(bridge.Transcript(sid)) != 7 {
				t.Fatalf("session %q kept %d messages", sid, len(bridge.Transcript(sid)))
			}
		})
	}
}

// endEvents keeps the iteration.end payloads.
type endEvents struct{ ends []event.IterationEvent }

func (e *endEvents) Emit(p event.Payload) {
	switch v := any(p).(type) {
	case event.IterationEvent:
		e.ends = append(e.ends, v)
	case *event.IterationEvent:
		e.ends = append(e.ends, *v)
	}
}

// TestRedoIterationEndCarriesRunTotals: the iteration.end of an iteration
// cut short (Ctrl-C during its query) carries the run's totals like every
// other, its billed turns included (progress prints them).
func TestRedoIterationEndCarriesRunTotals(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := testStopTool{cancel: cancel}
	bridge := llm.NewToolLoop(callingModel{}, llm.Config{Tools: []tool.Tool{stop}})
	events := &endEvents{}
	l, err := NewLoop(LoopConfig{Bridge: bridge, Flow: untilFlow{}, Events: events, Cost: func(u event.Usage) float64 { return float64(u.Total()) / 1000 }})
	if err != nil {
		t.Fatal(err)
	}
	res := l.Run(ctx, &RuntimeContext{})
	if res.CompletionReason != ReasonCanceled || res.Usage.Total() != 15 || len(events.ends) != 1 {
		t.Fatalf("%s, usage %d, %d iteration.end events", res.CompletionReason, res.Usage.Total(), len(events.ends))
	}
	if e := events.ends[0]; !e.Outcome.Redo || e.RunUsage.Total() != 15 || e.RunCostUSD != res.CostUSD || res.CostUSD == 0 {
		t.Fatalf("iteration.end %+v (run cost %v)", e, res.CostUSD)
	}
}

// testStopTool is named Nothing (the tool callingModel calls) and cancels
// the run while it runs.
type testStopTool struct{ cancel func() }

func (testStopTool) Spec() tool.Spec { return tool.Spec{Name: "Nothing"} }
func (testStopTool) Kind() tool.Kind { return tool.KindRead }
func (s testStopTool) Run(context.Context, json.RawMessage) (tool.Result, error) {
	s.cancel()
	return tool.Result{Content: "stopped"}, nil
}
