package llm_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
)

// summarizer records summary requests and answers them.
type summarizer struct {
	reqs []*llm.Request
	text string
}

func (s *summarizer) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	s.reqs = append(s.reqs, req)
	return &llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: s.text},
		Usage: event.Usage{InputTokens: 100, OutputTokens: 20}}, nil
}

// transcript is a session of n finished queries, each a prompt, one tool
// call with an out-byte result and a final answer; the first prompt is
// the step's instructions.
func transcript(n, out int) []event.Message {
	var msgs []event.Message
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			event.Message{Role: event.RoleUser, Text: fmt.Sprintf("prompt %d", i), Pinned: i == 0},
			event.Message{Role: event.RoleAssistant, ToolCalls: []event.ToolCall{{ID: id, Name: "Bash", Input: []byte(`{"command":"go test"}`)}}},
			event.Message{Role: event.RoleTool, ToolResults: []event.ToolResult{{CallID: id, Name: "Bash", Content: strings.Repeat("x", out)}}},
			event.Message{Role: event.RoleAssistant, Text: "done"})
	}
	return msgs
}

// withPrompt appends the current query's prompt and returns the request
// and the prompt's index.
func withPrompt(msgs []event.Message, prompt string) (*llm.Request, int) {
	q := len(msgs)
	return &llm.Request{System: "sys", Messages: append(msgs, event.Message{Role: event.RoleUser, Text: prompt})}, q
}

func TestBelowThresholdNothingChanges(t *testing.T) {
	m := llm.NewCompactor(100_000, &summarizer{}, "m", llm.CompactionOptions{})
	req, q := withPrompt(transcript(3, 1000), "retry")
	fit, err := m.Fit(context.Background(), req, q)
	if err != nil || fit.Compaction != nil || len(fit.Messages) != len(req.Messages) {
		t.Fatalf("fit = %+v, %v", fit, err)
	}
}

func TestOldToolResultsBecomeStubsNamingTheCall(t *testing.T) {
	// 10 results of 4,000 bytes ≈ 10,000 tokens; window 10,000: over
	// 0.75, compacted to 0.5 by stubs alone.
	msgs := transcript(10, 4000)
	orig := append([]event.Message(nil), msgs...)
	s := &summarizer{}
	m := llm.NewCompactor(10_000, s, "m", llm.CompactionOptions{})
	req, q := withPrompt(msgs, "retry prompt")
	fit, err := m.Fit(context.Background(), req, q)
	if err != nil || fit.Compaction == nil {
		t.Fatalf("fit = %+v, %v", fit, err)
	}
	if len(s.reqs) != 0 || fit.Compaction.SummarizedMessages != 0 {
		t.Fatalf("stubs were enough; no summary expected: %+v", fit.Compaction)
	}
	ev := fit.Compaction
	if ev.TokensAfter > 5000 || ev.TokensBefore <= 7500 || len(ev.StubbedCalls) == 0 || ev.StubbedCalls[0] != "call_0" {
		t.Fatalf("event = %+v", ev)
	}
	first := fit.Messages[2].ToolResults[0].Content
	if !strings.Contains(first, "4000-byte output of Bash (call call_0)") || !strings.Contains(first, "run journal") {
		t.Fatalf("stub = %q", first)
	}
	// The newest three results stay verbatim, the caller's transcript is
	// untouched, and the current prompt is last.
	for _, i := range []int{30, 34, 38} {
		if c := fit.Messages[i].ToolResults[0].Content; len(c) != 4000 {
			t.Errorf("result %d was stubbed: %q", i, c[:40])
		}
	}
	if !reflect.DeepEqual(msgs, orig) || len(msgs[2].ToolResults[0].Content) != 4000 {
		t.Fatal("Fit modified the caller's transcript")
	}
	if last := fit.Messages[len(fit.Messages)-1]; last.Text != "retry prompt" {
		t.Fatalf("last message = %+v", last)
	}
	// A second Fit of the compacted transcript has nothing to do.
	again, err := m.Fit(context.Background(), &llm.Request{System: "sys", Messages: fit.Messages}, q)
	if err != nil || again.Compaction != nil {
		t.Fatalf("second fit = %+v, %v", again, err)
	}
}

func TestOlderTurnsAreSummarizedKeepingInstructionsAndRetryPrompt(t *testing.T) {
	// Many small turns: stubs cannot help, a summary must.
	var msgs []event.Message
	msgs = append(msgs, event.Message{Role: event.RoleUser, Text: "STEP INSTRUCTIONS " + strings.Repeat("i", 2000), Pinned: true})
	for i := 0; i < 200; i++ {
		msgs = append(msgs, event.Message{Role: event.RoleAssistant, Text: strings.Repeat("thinking aloud ", 10)},
			event.Message{Role: event.RoleUser, Text: fmt.Sprintf("retry %d %s", i, strings.Repeat("r", 100))})
	}
	msgs = append(msgs, event.Message{Role: event.RoleAssistant, Text: "ok"})
	s := &summarizer{text: "the task so far"}
	m := llm.NewCompactor(15_000, s, "cheap-model", llm.CompactionOptions{})
	req, q := withPrompt(msgs, "CURRENT RETRY PROMPT")
	fit, err := m.Fit(context.Background(), req, q)
	if err != nil || fit.Compaction == nil {
		t.Fatalf("compaction = %+v, %v", fit.Compaction, err)
	}
	if len(s.reqs) != 1 || !s.reqs[0].Summary || s.reqs[0].Model != "cheap-model" || !strings.Contains(s.reqs[0].Messages[0].Text, "retry 199") {
		t.Fatalf("summary requests = %+v", s.reqs)
	}
	if strings.Contains(s.reqs[0].Messages[0].Text, "STEP INSTRUCTIONS") {
		t.Error("the pinned instructions were sent to be summarized instead of kept")
	}
	want := []string{"STEP INSTRUCTIONS", "Summary of the earlier part", "CURRENT RETRY PROMPT"}
	if len(fit.Messages) != 3 {
		t.Fatalf("compacted transcript has %d messages", len(fit.Messages))
	}
	for i, w := range want {
		if !strings.Contains(fit.Messages[i].Text, w) || fit.Messages[i].Role != event.RoleUser {
			t.Errorf("message %d = %q, want it to contain %q", i, fit.Messages[i].Text, w)
		}
	}
	if !strings.HasSuffix(fit.Messages[1].Text, "the task so far") || fit.Compaction.SummarizedMessages != 401 || fit.Usage.InputTokens != 100 {
		t.Fatalf("compaction = %+v usage %+v", fit.Compaction, fit.Usage)
	}
}

// failingSummarizer fails every summary request after being billed for it.
type failingSummarizer struct{}

func (failingSummarizer) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	return nil, &llm.BilledError{Err: agenterr.New(agenterr.CodeSdkConnection, agenterr.LayerSDKBridge, true, "stream dropped"),
		Usage: event.Usage{InputTokens: 700, OutputTokens: 3}}
}

// TestFailedSummaryRequestIsCounted: a summary request that failed after
// it was billed (llm.BilledError) still costs the query its usage.
func TestFailedSummaryRequestIsCounted(t *testing.T) {
	var msgs []event.Message
	for i := 0; i < 200; i++ {
		msgs = append(msgs, event.Message{Role: event.RoleUser, Text: strings.Repeat("r", 100)}, event.Message{Role: event.RoleAssistant, Text: "ok"})
	}
	req, q := withPrompt(msgs, "now")
	fit, err := llm.NewCompactor(5_000, failingSummarizer{}, "m", llm.CompactionOptions{}).Fit(context.Background(), req, q)
	if agenterr.CodeOf(err) != agenterr.CodeSdkConnection || fit.Usage != (event.Usage{InputTokens: 700, OutputTokens: 3}) {
		t.Fatalf("fit usage %+v, err %v", fit.Usage, err)
	}
}

func TestOverflowIsACodedErrorBeforeSending(t *testing.T) {
	req, q := withPrompt(transcript(10, 4000), "retry")
	off := llm.NewCompactor(5_000, &summarizer{}, "m", llm.CompactionOptions{Disabled: true})
	_, err := off.Fit(context.Background(), req, q)
	var e *agenterr.Error
	if !errors.As(err, &e) || e.Code != agenterr.CodeContextOverflow || !strings.Contains(e.Message, "5000 tokens") || e.Hint == "" {
		t.Fatalf("err = %v", err)
	}
	// Off but within the window: sent as it is.
	if fit, err := llm.NewCompactor(50_000, &summarizer{}, "m", llm.CompactionOptions{Disabled: true, Threshold: 0.1}).Fit(context.Background(), req, q); err != nil || fit.Compaction != nil {
		t.Fatalf("fit = %+v, %v", fit, err)
	}
	// On, but the current prompt alone is larger than the window.
	huge, q2 := withPrompt(nil, strings.Repeat("p", 40_000))
	_, err = llm.NewCompactor(5_000, &summarizer{}, "m", llm.CompactionOptions{}).Fit(context.Background(), huge, q2)
	if !errors.As(err, &e) || e.Code != agenterr.CodeContextOverflow {
		t.Fatalf("err = %v", err)
	}
}

func TestObservedCountsCalibrateEstimates(t *testing.T) {
	req, q := withPrompt(transcript(4, 4000), "retry") // ≈ 4,100 tokens estimated
	m := llm.NewCompactor(10_000, &summarizer{text: "summary"}, "m", llm.CompactionOptions{})
	if fit, _ := m.Fit(context.Background(), req, q); fit.Compaction != nil {
		t.Fatal("compacted below the threshold")
	}
	m.Observe(req, llm.EstimateTokens(llm.RequestSize(req))*2) // the tokenizer counts twice as many
	if fit, err := m.Fit(context.Background(), req, q); err != nil || fit.Compaction == nil {
		t.Fatalf("calibrated estimate should exceed the threshold: %+v %v", fit.Compaction, err)
	}
}

func TestFactoryUsesTheTableOrTheConfiguredWindow(t *testing.T) {
	ctx := context.Background()
	m := &summarizer{text: "s"}
	if cm, err := llm.CompactionFactory(llm.CompactionOptions{})(ctx, llm.Config{Provider: "openai", Model: "llama3.1:8b"}, m); err != nil || cm != nil {
		t.Fatalf("unknown window: %v %v", cm, err)
	}
	if cm, err := llm.CompactionFactory(llm.CompactionOptions{})(ctx, llm.Config{Provider: "anthropic", Model: "claude-haiku-4-5"}, m); err != nil || cm == nil {
		t.Fatalf("known model: %v %v", cm, err)
	}
	if cm, err := llm.CompactionFactory(llm.CompactionOptions{Window: 8192})(ctx, llm.Config{Provider: "openai", Model: "llama3.1:8b"}, m); err != nil || cm == nil {
		t.Fatalf("configured window: %v %v", cm, err)
	}
	_, err := llm.CompactionFactory(llm.CompactionOptions{Window: 8192, SummaryModel: "nosuch:model"})(ctx, llm.Config{Provider: "openai", Model: "x"}, m)
	var e *agenterr.Error
	if !errors.As(err, &e) || e.Code != agenterr.CodeUnknownProvider || !strings.Contains(err.Error(), "summaryModel") {
		t.Fatalf("bad summary model: %v", err)
	}
}

func TestKeepingNoToolResultsStubsTheNewestToo(t *testing.T) {
	req, q := withPrompt(transcript(10, 4000), "retry")
	fit, err := llm.NewCompactor(10_000, &summarizer{text: "s"}, "m", llm.CompactionOptions{KeepToolResults: -1, Target: 0.01}).Fit(context.Background(), req, q)
	if err != nil || fit.Compaction == nil {
		t.Fatalf("%+v %v", fit.Compaction, err)
	}
	if len(fit.Compaction.StubbedCalls) != 10 {
		t.Fatalf("stubbed %v, want all 10", fit.Compaction.StubbedCalls)
	}
}

func TestResultsTheModelHasNotSeenAreNeverStubbed(t *testing.T) {
	msgs := transcript(10, 4000)
	last := msgs[len(msgs)-2] // the last query's tool results, as if the answer were not in yet
	msgs = msgs[:len(msgs)-1]
	fit, err := llm.NewCompactor(10_000, &summarizer{text: "s"}, "m", llm.CompactionOptions{KeepToolResults: -1, Target: 0.01}).Fit(context.Background(), &llm.Request{Messages: msgs}, len(msgs)-3)
	if err != nil || fit.Compaction == nil {
		t.Fatalf("%+v %v", fit.Compaction, err)
	}
	if got := fit.Messages[len(fit.Messages)-1].ToolResults[0].Content; got != last.ToolResults[0].Content {
		t.Fatalf("the newest, unseen tool result was stubbed: %.80q", got)
	}
}

// TestSummaryIsRedacted: a summary model that writes a key it saw (in a
// prompt the user pasted it into) does not carry it into the compacted
// transcript or the journaled compaction event.
func TestSummaryIsRedacted(t *testing.T) {
	const key = "sk-summary-0123456789"
	var msgs []event.Message
	for i := 0; i < 200; i++ {
		msgs = append(msgs, event.Message{Role: event.RoleAssistant, Text: strings.Repeat("thinking aloud ", 10)},
			event.Message{Role: event.RoleUser, Text: fmt.Sprintf("retry %d %s", i, strings.Repeat("r", 100))})
	}
	s := &summarizer{text: "the key is " + key}
	cm, err := llm.CompactionFactory(llm.CompactionOptions{Window: 15_000})(context.Background(),
		llm.Config{Provider: "openai", Model: "x", Redact: func(t string) string { return strings.ReplaceAll(t, key, "[REDACTED]") }}, s)
	if err != nil || cm == nil {
		t.Fatalf("factory: %v %v", cm, err)
	}
	req, q := withPrompt(msgs, "NOW")
	fit, err := cm.Fit(context.Background(), req, q)
	if err != nil || fit.Compaction == nil {
		t.Fatalf("compaction = %+v, %v", fit.Compaction, err)
	}
	if strings.Contains(fmt.Sprint(fit.Messages), key) || strings.Contains(fit.Compaction.Summary, key) ||
		!strings.HasSuffix(fit.Compaction.Summary, "the key is [REDACTED]") {
		t.Errorf("summary carries the key: %q", fit.Compaction.Summary)
	}
}
