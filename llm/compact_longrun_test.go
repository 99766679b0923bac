package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/anthropic"
	"github.com/capstan-dev/capstan/llm/script"
	"github.com/capstan-dev/capstan/tool"
)

// eventRecorder keeps journal events in memory.
type eventRecorder struct {
	mu     sync.Mutex
	events []journal.Event
}

func (r *eventRecorder) Emit(p event.Payload) {
	typ, data := string(p.EventKind()), any(p)
	b, _ := json.Marshal(data)
	r.mu.Lock()
	r.events = append(r.events, journal.Event{Seq: int64(len(r.events) + 1), Type: typ, Data: b})
	r.mu.Unlock()
}

func (r *eventRecorder) count(typ string) int {
	n := 0
	for _, ev := range r.events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// testOutput is a tool whose every call prints 6 KB, like a verbose test
// run.
type testOutput struct{}

func (testOutput) Spec() tool.Spec {
	return tool.Spec{Name: "RunTests", Description: "run the test suite", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}
}
func (testOutput) Kind() tool.Kind { return tool.KindRead }
func (testOutput) Run(context.Context, json.RawMessage) (tool.Result, error) {
	return tool.Result{Content: strings.Repeat("--- FAIL: TestSomething (0.01s) expected 5, got 6\n", 120)}, nil
}

const (
	longRunIterations = 65
	longRunWindow     = 12_000 // tokens: about six iterations of tool output
	stepInstructions  = "STEP: make the test suite pass."
)

// runLong drives longRunIterations queries in one session, each a tool
// call with 6 KB of output and a final answer; the first prompt is the
// step's instructions, the others retry prompts.
func runLong(t *testing.T, loop *llm.ToolLoop) (string, error) {
	t.Helper()
	session := ""
	for i := 0; i < longRunIterations; i++ {
		prompt, instructions := fmt.Sprintf("RETRY %d: the tests still fail; fix the code.", i), false
		if i == 0 {
			prompt, instructions = stepInstructions, true
		}
		res, err := loop.Query(context.Background(), prompt, llm.QueryOptions{SessionID: session, SystemPrompt: "act", Instructions: instructions})
		if err != nil {
			return session, fmt.Errorf("iteration %d: %w", i+1, err)
		}
		session = res.SessionID
	}
	return session, nil
}

func checkLongRun(t *testing.T, loop *llm.ToolLoop, rec *eventRecorder, session string) {
	t.Helper()
	if rec.count(journal.ContextCompacted) == 0 {
		t.Fatal("no context.compacted event")
	}
	final := loop.Transcript(session)
	if got := llm.EstimateTokens(llm.RequestSize(&llm.Request{Messages: final})); got > longRunWindow {
		t.Fatalf("final transcript is %d tokens, window %d", got, longRunWindow)
	}
	if !strings.Contains(final[0].Text, stepInstructions) {
		t.Errorf("the step's instructions were compacted away; first message: %.80q", final[0].Text)
	}
	// A resumed run rebuilds exactly the compacted transcript.
	resumed := llm.TranscriptsFromEvents(rec.events)[session]
	a, _ := json.Marshal(resumed)
	b, _ := json.Marshal(final)
	if string(a) != string(b) {
		t.Fatalf("transcript rebuilt from the journal differs from the session (%d vs %d messages)", len(resumed), len(final))
	}
}

func TestLongRunThroughScriptProviderStaysWithinTheWindow(t *testing.T) {
	var src strings.Builder
	src.WriteString("turns:\n")
	for i := 0; i < longRunIterations; i++ {
		fmt.Fprintf(&src, "  - text: \"running the tests\"\n    tool_calls:\n      - name: RunTests\n        input: {}\n  - text: \"done %d\"\n", i)
	}
	s, err := script.Parse("long.yaml", []byte(src.String()))
	if err != nil {
		t.Fatal(err)
	}
	rec := &eventRecorder{}
	model := script.New(s)
	loop := llm.NewToolLoop(model, llm.Config{Tools: []tool.Tool{testOutput{}}, Events: rec,
		Context: llm.NewCompactor(longRunWindow, model, "script", llm.CompactionOptions{})})
	session, err := runLong(t, loop)
	if err != nil {
		t.Fatal(err)
	}
	checkLongRun(t, loop, rec, session)
}

// longRunFake answers like a model: a tool call for a new prompt, a final
// answer after the tool result, and a summary for a summary request.
func longRunFake(t *testing.T) *fakellm.Server {
	return fakellm.NewAnthropic(t, fakellm.Options{ContextWindow: longRunWindow, Respond: func(r fakellm.Request) fakellm.Reply {
		switch {
		case strings.Contains(r.System, "condense"):
			return fakellm.Reply{Text: "Summary: the tests failed many times with the same assertion."}
		case len(r.LastToolResults) > 0:
			return fakellm.Reply{Text: "done"}
		}
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "RunTests", Input: json.RawMessage(`{}`)}}}
	}})
}

func anthropicLoop(t *testing.T, srv *fakellm.Server, rec *eventRecorder, o llm.CompactionOptions) *llm.ToolLoop {
	model, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-test", BaseURL: srv.URL, Model: "claude-sonnet-5", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return llm.NewToolLoop(model, llm.Config{Model: "claude-sonnet-5", Tools: []tool.Tool{testOutput{}}, Events: rec,
		Context: llm.NewCompactor(longRunWindow, model, "claude-sonnet-5", o)})
}

func TestLongRunThroughAnthropicFakeWithSmallWindowCompletes(t *testing.T) {
	srv := longRunFake(t)
	rec := &eventRecorder{}
	loop := anthropicLoop(t, srv, rec, llm.CompactionOptions{})
	session, err := runLong(t, loop)
	if err != nil {
		t.Fatal(err)
	}
	checkLongRun(t, loop, rec, session)
	for _, r := range srv.Requests() {
		if r.Status != 200 {
			t.Fatalf("the fake answered %d: a request exceeded its window", r.Status)
		}
	}
}

func TestLongRunWithCompactionOffFailsBeforeSending(t *testing.T) {
	srv := longRunFake(t)
	rec := &eventRecorder{}
	loop := anthropicLoop(t, srv, rec, llm.CompactionOptions{Disabled: true})
	_, err := runLong(t, loop)
	var e *agenterr.Error
	if !errors.As(err, &e) || e.Code != agenterr.CodeContextOverflow {
		t.Fatalf("err = %v, want CONTEXT_OVERFLOW", err)
	}
	for _, r := range srv.Requests() {
		if r.Status != 200 {
			t.Fatalf("a request reached the provider and was refused with %d; the overflow must be caught before sending", r.Status)
		}
	}
	if rec.count(journal.ContextCompacted) != 0 {
		t.Fatal("compaction is off but something was compacted")
	}
}
