package eino

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/verdict"

	einomodel "github.com/cloudwego/eino/components/model"
	einotool "github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// iterationsPerRun is the length of one timed run of the iteration
// benchmarks: each op runs this many iterations in one session.
const iterationsPerRun = 50

const (
	systemPrompt = "You work in a temporary directory."
	replyText    = "working on part of the notes"
)

// stepPrompt is the prompt of iteration i: capstan resolves it from its
// template, the other loops format it.
func stepPrompt(i int) string {
	return fmt.Sprintf("Iteration %d: write notes about boats.", i)
}

// instantModel is capstan's side of the in-process model: it answers
// every request at once. With toolCall set it asks for the shout tool
// unless the last message carries a tool result, then answers in text.
type instantModel struct{ toolCall bool }

func (m instantModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	usage := event.Usage{InputTokens: 100, OutputTokens: 10}
	if m.toolCall {
		if last := req.Messages[len(req.Messages)-1]; len(last.ToolResults) == 0 {
			return &llm.Response{Message: event.Message{Role: event.RoleAssistant, ToolCalls: []event.ToolCall{
				{ID: "call_1", Name: "shout", Input: json.RawMessage(`{"text":"hello ada"}`)}}},
				StopReason: "tool_use", Usage: usage}, nil
		}
	}
	return &llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: replyText}, StopReason: "end_turn", Usage: usage}, nil
}

// The capstan agent's model is "instant:bench", registered once.
func init() {
	llm.RegisterModel("instant", func(context.Context, llm.Config) (llm.Model, error) { return instantModel{}, nil })
}

// einoModel is eino's side of the in-process model, answering the same.
type einoModel struct{ toolCall bool }

func (m einoModel) Generate(_ context.Context, input []*schema.Message, _ ...einomodel.Option) (*schema.Message, error) {
	usage := &schema.ResponseMeta{Usage: &schema.TokenUsage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}}
	if m.toolCall && input[len(input)-1].Role != schema.Tool {
		return &schema.Message{Role: schema.Assistant, ResponseMeta: usage, ToolCalls: []schema.ToolCall{
			{ID: "call_1", Type: "function", Function: schema.FunctionCall{Name: "shout", Arguments: `{"text":"hello ada"}`}}}}, nil
	}
	return &schema.Message{Role: schema.Assistant, Content: replyText, ResponseMeta: usage}, nil
}

func (m einoModel) Stream(ctx context.Context, input []*schema.Message, opts ...einomodel.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func (m einoModel) WithTools([]*schema.ToolInfo) (einomodel.ToolCallingChatModel, error) {
	return m, nil
}

type shoutInput struct {
	Text string `json:"text"`
}

func shout(_ context.Context, in shoutInput) (string, error) { return strings.ToUpper(in.Text), nil }

// capstanShout and einoShout are the same tool on both sides.
func capstanShout() tool.Tool {
	return tool.Func("shout", "Upper-case a text.", func(ctx context.Context, in shoutInput) (string, error) {
		return shout(ctx, in)
	}).WithKind(tool.KindRead)
}

func einoShout(b *testing.B) einotool.InvokableTool {
	t, err := utils.InferTool("shout", "Upper-case a text.", func(ctx context.Context, in shoutInput) (string, error) {
		return shout(ctx, in)
	})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

func newEinoAgent(b *testing.B, toolCall bool) *react.Agent {
	a, err := react.NewAgent(context.Background(), &react.AgentConfig{
		ToolCallingModel: einoModel{toolCall: toolCall},
		ToolsConfig:      compose.ToolsNodeConfig{Tools: []einotool.BaseTool{einoShout(b)}},
		MaxStep:          12,
	})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// perOp runs the b.Loop of op and reports the process's CPU time per op
// (user and system, all threads) next to the wall time: on a machine
// shared with other work the wall clock stretches with their load, the
// CPU time much less.
func perOp(b *testing.B, op func()) {
	b.ReportAllocs()
	c0 := testenv.ProcessCPUTime()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64((testenv.ProcessCPUTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// perIteration runs b.N runs of run (which does iterationsPerRun
// iterations and times itself between start and stop) and reports
// ns/iter, B/iter and allocs/iter of the timed part only.
func perIteration(b *testing.B, run func(b *testing.B, start, stop func())) {
	var elapsed, cpu time.Duration
	var bytes, mallocs uint64
	var ms0, ms1 runtime.MemStats
	var t0 time.Time
	var c0 time.Duration
	start := func() {
		runtime.ReadMemStats(&ms0)
		t0, c0 = time.Now(), testenv.ProcessCPUTime()
		b.StartTimer()
	}
	stop := func() {
		b.StopTimer()
		elapsed += time.Since(t0)
		cpu += testenv.ProcessCPUTime() - c0
		runtime.ReadMemStats(&ms1)
		bytes += ms1.TotalAlloc - ms0.TotalAlloc
		mallocs += ms1.Mallocs - ms0.Mallocs
	}
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		run(b, start, stop)
	}
	n := float64(b.N * iterationsPerRun)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/iter")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/iter")
	b.ReportMetric(float64(bytes)/n, "B/iter")
	b.ReportMetric(float64(mallocs)/n, "allocs/iter")
}

// BenchmarkIteration compares one iteration of a run of iterationsPerRun
// iterations in one session, against an instant in-process model that
// answers in text:
//
//   - capstan: agent.Run of an agent built from Go values (one step,
//     keyword completion that is never met, the shout tool offered), with
//     its journal on: the prompt resolved from its template, the query
//     through the tool loop, the iteration summary, the step machine and
//     completion check, and every event hash-chained into events.jsonl.
//   - eino: the react agent (ChatModel node and ToolsNode with the same
//     tool) generating once per iteration on the growing conversation.
//   - handloop: a loop written by hand that formats the prompt, calls the
//     same instant model through capstan's Model interface, and writes
//     the events capstan journals for such an iteration (same types, same
//     values) with json.Encoder, one write per event, no hash chain.
func BenchmarkIteration(b *testing.B) {
	b.Run("capstan", func(b *testing.B) {
		ctx := context.Background()
		var perIter float64
		perIteration(b, func(b *testing.B, start, stop func()) {
			a := newCapstanAgent(b)
			start()
			a.Run(ctx)
			stop()
			res := a.Stop()
			if res.Iterations != iterationsPerRun || res.CompletionReason != "max_iterations" {
				b.Fatalf("%+v", res)
			}
			perIter = eventsPerIteration(b, res.Journal)
		})
		b.ReportMetric(perIter, "events/iter")
	})
	b.Run("eino", func(b *testing.B) {
		ctx := context.Background()
		a := newEinoAgent(b, false)
		perIteration(b, func(b *testing.B, start, stop func()) {
			history := []*schema.Message{schema.SystemMessage(systemPrompt)}
			start()
			for i := 1; i <= iterationsPerRun; i++ {
				history = append(history, schema.UserMessage(stepPrompt(i)))
				out, err := a.Generate(ctx, history)
				if err != nil {
					b.Fatal(err)
				}
				history = append(history, out)
			}
			stop()
		})
	})
	b.Run("handloop", func(b *testing.B) {
		ctx := context.Background()
		perIteration(b, func(b *testing.B, start, stop func()) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "events.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			start()
			handLoop(ctx, b, f)
			stop()
			f.Close()
		})
	})
}

// newCapstanAgent builds and starts the capstan agent of BenchmarkIteration
// (not timed).
func newCapstanAgent(b *testing.B) *agent.Agent {
	ctx := context.Background()
	state := b.TempDir()
	a, err := agent.New(ctx, agent.Config{
		Definition: &agentdir.Definition{Name: "bench", Runner: agentdir.Runner{
			Model:      "instant:bench",
			Completion: agentdir.Completion{Type: "keyword", Keyword: "ALL_DONE"},
			Boundaries: agentdir.Boundaries{AllowedTools: []string{"shout"}, PermissionMode: "acceptEdits"},
		}},
		Registry: &agentdir.Registry{EntryStep: "work", Steps: map[string]agentdir.Step{"work": {}}},
		Prompts: agent.Prompts{System: systemPrompt,
			Steps: map[string]string{"work": "Iteration {uv-iteration}: write notes about boats."}},
		Tools:         []tool.Tool{capstanShout()},
		MaxIterations: iterationsPerRun,
		WorkDir:       b.TempDir(),
		Store:         journal.Store{Dir: state},
		Getenv:        func(string) string { return "" },
		NoSandbox:     true, // no command runs; the sandbox probe is not what is measured
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		b.Fatal(err)
	}
	return a
}

// eventsPerIteration counts the journal's events inside iterations.
func eventsPerIteration(b *testing.B, path string) float64 {
	events, err := journal.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.Iteration > 0 && e.Type != journal.RunEnd && e.Type != journal.LifecycleChange {
			n++
		}
	}
	return float64(n) / iterationsPerRun
}

// envelope is the hand loop's journal line.
type envelope struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	Iteration int       `json:"iteration,omitempty"`
	Step      string    `json:"step,omitempty"`
	Data      any       `json:"data,omitempty"`
}

// handLoop is the hand-written loop of BenchmarkIteration.
func handLoop(ctx context.Context, b *testing.B, f *os.File) {
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	var seq int64
	write := func(iteration int, step string, p event.Payload) {
		seq++
		if err := enc.Encode(envelope{Seq: seq, Time: time.Now().UTC(), Type: string(p.EventKind()), Iteration: iteration, Step: step, Data: p}); err != nil {
			b.Fatal(err)
		}
	}
	m := instantModel{}
	var msgs []event.Message
	var runUsage event.Usage
	for i := 1; i <= iterationsPerRun; i++ {
		began := time.Now()
		write(i, "", event.IterationStartEvent{Iteration: i})
		prompt := stepPrompt(i)
		write(i, "work", event.PromptEvent{Source: "prompts/steps/work/main/f_default.md", Text: prompt})
		write(i, "work", event.QueryStartEvent{SessionID: "session-1", Source: "prompts/steps/work/main/f_default.md"})
		before := len(msgs)
		msgs = append(msgs, event.Message{Role: event.RoleUser, Text: prompt, Pinned: true})
		res, err := m.Generate(ctx, &llm.Request{System: systemPrompt, Messages: msgs})
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, res.Message)
		write(i, "work", event.ModelTurnEvent{Turn: 1, Message: &res.Message, StopReason: res.StopReason, Usage: res.Usage,
			DurationMs: time.Since(began).Milliseconds(), Query: "c9ace2cd4d2d7115fa398751500f5eb3"})
		write(i, "work", event.SessionMessagesEvent{SessionID: "session-1", Messages: msgs[before:]})
		qr := &event.QueryResult{Responses: []string{res.Message.Text}, SessionID: "session-1", StopReason: res.StopReason, Turns: 1, Usage: res.Usage}
		write(i, "work", qr)
		runUsage.Add(res.Usage)
		summary := &event.IterationSummary{Iteration: i, SessionID: "session-1", StepID: "work", Prompt: prompt,
			AssistantResponses: qr.Responses, ToolsUsed: []event.ToolUse{}, DetectedActions: []event.DetectedAction{},
			Errors: []string{}, Usage: res.Usage, Timestamp: began.UTC(), DurationMs: time.Since(began).Milliseconds()}
		write(i, "work", event.StepMove{From: "work", To: "work", Kind: "stay", Passed: true, Reason: "step has no check"})
		write(i, "work", event.CheckEvent{Verdict: verdict.Continue})
		write(i, "work", event.IterationEvent{Summary: summary, RunUsage: runUsage, StepState: &event.StepStateEvent{State: event.StepState{Current: "work",
			Visits: map[string]int{"work": 1}, LastEntered: "work", Consecutive: 1}}})
	}
}

// BenchmarkToolTurn compares one query with one tool call (model turn,
// the shout tool, model turn with the final text), against the same
// instant in-process models:
//
//   - capstan/journal=file: capstan's tool loop (llm.NewToolLoop, the
//     tool policy, the shout tool) with every event hash-chained into a
//     real journal; capstan/journal=discard: the same with no journal.
//   - eino: the react agent with the same tool, one Generate.
//   - handloop: model, tool, model by hand through capstan's Model
//     interface, writing the events capstan journals for such a query
//     with json.Encoder, one write per event.
//
// Each op starts a new session (capstan) or conversation (eino).
func BenchmarkToolTurn(b *testing.B) {
	ctx := context.Background()
	prompt := stepPrompt(1)
	for _, mode := range []string{"file", "discard"} {
		b.Run("capstan/journal="+mode, func(b *testing.B) {
			var events event.Emitter = event.Discard
			if mode == "file" {
				w, err := journal.Create(b.TempDir(), "bench")
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				events = event.Journal{Writer: w}
			}
			tools := []tool.Tool{capstanShout()}
			opts := llm.QueryOptions{SystemPrompt: systemPrompt, AllowedTools: []string{"shout"}, PermissionMode: tool.ModeAcceptEdits}
			work := b.TempDir()
			perOp(b, func() {
				loop := llm.NewToolLoop(instantModel{toolCall: true}, llm.Config{WorkDir: work, Tools: tools, Events: events})
				res, err := loop.Query(ctx, prompt, opts)
				if err != nil || res.Turns != 2 || len(res.ToolUses) != 1 || res.ToolUses[0].Output != "HELLO ADA" {
					b.Fatalf("%v %+v", err, res)
				}
			})
		})
	}
	b.Run("eino", func(b *testing.B) {
		a := newEinoAgent(b, true)
		perOp(b, func() {
			out, err := a.Generate(ctx, []*schema.Message{schema.SystemMessage(systemPrompt), schema.UserMessage(prompt)})
			if err != nil || out.Content != replyText {
				b.Fatalf("%v %+v", err, out)
			}
		})
	})
	b.Run("handloop", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "events.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		enc := json.NewEncoder(f)
		enc.SetEscapeHTML(false)
		var seq int64
		write := func(p event.Payload) {
			seq++
			if err := enc.Encode(envelope{Seq: seq, Time: time.Now().UTC(), Type: string(p.EventKind()), Data: p}); err != nil {
				b.Fatal(err)
			}
		}
		m := instantModel{toolCall: true}
		perOp(b, func() {
			msgs := []event.Message{{Role: event.RoleUser, Text: prompt}}
			var usage event.Usage
			var uses []event.ToolUse
			for turn := 1; ; turn++ {
				began := time.Now()
				res, err := m.Generate(ctx, &llm.Request{System: systemPrompt, Messages: msgs})
				if err != nil {
					b.Fatal(err)
				}
				usage.Add(res.Usage)
				msgs = append(msgs, res.Message)
				write(event.ModelTurnEvent{Turn: turn, StopReason: res.StopReason, ToolCalls: len(res.Message.ToolCalls), Usage: res.Usage,
					DurationMs: time.Since(began).Milliseconds()})
				if len(res.Message.ToolCalls) == 0 {
					break
				}
				var results []event.ToolResult
				for _, c := range res.Message.ToolCalls {
					var in shoutInput
					if err := json.Unmarshal(c.Input, &in); err != nil {
						b.Fatal(err)
					}
					out, _ := shout(ctx, in)
					use := event.ToolUse{ID: c.ID, Name: c.Name, Input: c.Input, Output: out, DurationMs: time.Since(began).Milliseconds()}
					write(use)
					uses = append(uses, use)
					results = append(results, event.ToolResult{CallID: c.ID, Name: c.Name, Content: out})
				}
				msgs = append(msgs, event.Message{Role: event.RoleTool, ToolResults: results})
			}
			write(event.SessionMessagesEvent{SessionID: "session-1", Messages: msgs})
			write(&event.QueryResult{SessionID: "session-1", Responses: []string{replyText}, ToolUses: uses, Usage: usage, Turns: 2, StopReason: "end_turn"})
		})
	})
}
