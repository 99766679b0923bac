package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
)

// echoModel answers every prompt with "echo: <prompt>" and counts tokens by
// words, so usage is a function of the transcript.
type echoModel struct {
	block bool // wait for ctx instead of answering
}

func (m echoModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if m.block {
		<-ctx.Done()
		return nil, agenterr.Wrap(ctx.Err(), agenterr.CodeSdkConnection, agenterr.LayerSDKBridge, true, "request aborted")
	}
	last := req.Messages[len(req.Messages)-1]
	words := 0
	for _, msg := range req.Messages {
		words += len(strings.Fields(msg.Text))
	}
	return &llm.Response{Message: event.Message{Text: "echo: " + last.Text}, StopReason: "end_turn",
		Usage: event.Usage{InputTokens: int64(words), OutputTokens: 2}}, nil
}

// untilFlow completes once an iteration's response contains done.
type untilFlow struct {
	doneAt int // iteration at which the prompt asks to finish; 0 = never
}

func (f untilFlow) Next(_ context.Context, rc *RuntimeContext) (Turn, error) {
	p := fmt.Sprintf("iteration %d", rc.Iteration)
	if rc.Iteration == f.doneAt {
		p += " DONE"
	}
	return Turn{StepID: "work", Prompt: p, Source: "test"}, nil
}

func (f untilFlow) After(_ context.Context, _ *RuntimeContext, s *event.IterationSummary) (Outcome, error) {
	if strings.Contains(s.Text(), "DONE") {
		return Outcome{Complete: true, Reason: "saw DONE"}, nil
	}
	return Outcome{}, nil
}

func newLoop(t *testing.T, m llm.Model, f Flow, b Budgets, ev event.Emitter) *Loop {
	t.Helper()
	l, err := NewLoop(LoopConfig{Bridge: llm.NewToolLoop(m, llm.Config{}), Flow: f, Budgets: b, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func checkInvariant(t *testing.T, rc *RuntimeContext, res *LoopResult) {
	t.Helper()
	if len(rc.Summaries) != rc.Iteration || res.Iterations != rc.Iteration {
		t.Fatalf("invariant broken: iteration=%d summaries=%d result.iterations=%d", rc.Iteration, len(rc.Summaries), res.Iterations)
	}
	for i, s := range rc.Summaries {
		if s.Iteration != i+1 {
			t.Fatalf("summary %d has iteration %d", i, s.Iteration)
		}
	}
	// A run succeeds, or an error says why it did not.
	if res.Success == (res.Err != nil) {
		t.Fatalf("success=%v with err=%v", res.Success, res.Err)
	}
}

func TestCompletesWhenFlowSaysSo(t *testing.T) {
	rc := &RuntimeContext{}
	res := newLoop(t, echoModel{}, untilFlow{doneAt: 3}, Budgets{}, nil).Run(context.Background(), rc)
	checkInvariant(t, rc, res)
	if !res.Success || res.CompletionReason != ReasonCompleted || res.Iterations != 3 || res.Reason != "saw DONE" {
		t.Fatalf("got %+v", res)
	}
	if rc.Carry.PreviousResponse != "echo: iteration 3 DONE" {
		t.Fatalf("carry = %q", rc.Carry.PreviousResponse)
	}
	if got := rc.Carry.AccumulatedContext["lastToolsUsed"]; got == nil {
		t.Fatalf("carry lacks lastToolsUsed: %#v", rc.Carry.AccumulatedContext)
	}
	if res.Usage.OutputTokens != 6 {
		t.Fatalf("usage not summed: %+v", res.Usage)
	}
}

func TestSessionIsContinuedAcrossIterations(t *testing.T) {
	rc := &RuntimeContext{}
	res := newLoop(t, echoModel{}, untilFlow{doneAt: 3}, Budgets{}, nil).Run(context.Background(), rc)
	if res.SessionID == "" {
		t.Fatal("no session id")
	}
	for _, s := range rc.Summaries {
		if s.SessionID != res.SessionID {
			t.Fatalf("iteration %d ran in session %q, want %q", s.Iteration, s.SessionID, res.SessionID)
		}
	}
	// The third query saw the whole transcript: input tokens grow.
	if !(rc.Summaries[2].Usage.InputTokens > rc.Summaries[0].Usage.InputTokens) {
		t.Fatalf("transcript not carried: %+v", rc.Summaries)
	}
}

func TestHardLimitWinsOverConfiguration(t *testing.T) {
	rc := &RuntimeContext{}
	res := newLoop(t, echoModel{}, untilFlow{}, Budgets{MaxIterations: 1000}, nil).Run(context.Background(), rc)
	checkInvariant(t, rc, res)
	if res.Success || res.CompletionReason != ReasonEmergencyStop || res.Iterations != HardLimit {
		t.Fatalf("got reason=%s iterations=%d", res.CompletionReason, res.Iterations)
	}
	if !errors.Is(res.Err, agenterr.ErrHardLimit) {
		t.Fatalf("err = %v", res.Err)
	}
}

func TestMaxIterationsBudget(t *testing.T) {
	rc := &RuntimeContext{}
	res := newLoop(t, echoModel{}, untilFlow{}, Budgets{MaxIterations: 4}, nil).Run(context.Background(), rc)
	checkInvariant(t, rc, res)
	if res.Success || res.CompletionReason != ReasonMaxIterations || res.Iterations != 4 {
		t.Fatalf("got %+v", res)
	}
	if !errors.Is(res.Err, agenterr.ErrBudgetExceeded) || !agenterr.IsRecoverable(res.Err) {
		t.Fatalf("err = %v (a larger budget on resume can still complete: recoverable)", res.Err)
	}
}

func TestTokenBudget(t *testing.T) {
	rc := &RuntimeContext{}
	res := newLoop(t, echoModel{}, untilFlow{}, Budgets{MaxTokens: 20}, nil).Run(context.Background(), rc)
	checkInvariant(t, rc, res)
	if res.CompletionReason != ReasonTokenBudget || res.Usage.Total() < 20 {
		t.Fatalf("got %s usage=%d", res.CompletionReason, res.Usage.Total())
	}
	if !errors.Is(res.Err, agenterr.ErrBudgetExceeded) {
		t.Fatalf("err = %v", res.Err)
	}
}

func TestTimeBudgetStopsABlockedQuery(t *testing.T) {
	rc := &RuntimeContext{}
	res := newLoop(t, echoModel{block: true}, untilFlow{}, Budgets{Timeout: 50 * time.Millisecond}, nil).Run(context.Background(), rc)
	checkInvariant(t, rc, res)
	if res.CompletionReason != ReasonTimeBudget || !errors.Is(res.Err, agenterr.ErrTimeBudget) {
		t.Fatalf("got %s %v", res.CompletionReason, res.Err)
	}
	// The query never got an answer: the iteration does not count.
	if rc.Iteration != 0 || len(rc.Summaries) != 0 || res.Iterations != 0 {
		t.Fatalf("unanswered iteration counted: iteration %d, %d summaries", rc.Iteration, len(rc.Summaries))
	}
}

func TestCancelStopsCleanlyWithJournalIntact(t *testing.T) {
	dir := t.TempDir()
	w, err := journal.Create(dir, "run1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(30 * time.Millisecond); cancel() }()
	rc := &RuntimeContext{}
	res := newLoop(t, echoModel{block: true}, untilFlow{}, Budgets{}, event.Journal{Writer: w}).Run(ctx, rc)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if res.CompletionReason != ReasonCanceled || !errors.Is(res.Err, agenterr.ErrCanceled) {
		t.Fatalf("got %s %v", res.CompletionReason, res.Err)
	}
	events, err := journal.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	got := strings.Join(types, ",")
	for _, want := range []string{journal.IterationStart, journal.PromptResolved, journal.QueryStart, journal.Error, journal.IterationEnd} {
		if !strings.Contains(got, want) {
			t.Fatalf("journal lacks %s: %s", want, got)
		}
	}
}

// forgetfulBridge loses every session after each query, as a backend that
// restarted would; it reports SDK_SESSION_NOT_FOUND for unknown ids.
type forgetfulBridge struct {
	mu    sync.Mutex
	n     int
	calls []string
}

func (b *forgetfulBridge) Query(_ context.Context, prompt string, o llm.QueryOptions) (*event.QueryResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, o.SessionID)
	if o.SessionID != "" {
		return nil, agenterr.New(agenterr.CodeSdkSessionNotFound, agenterr.LayerSDKBridge, true, "no session %s", o.SessionID)
	}
	b.n++
	return &event.QueryResult{SessionID: fmt.Sprintf("s%d", b.n), Responses: []string{"echo: " + prompt}}, nil
}
func (b *forgetfulBridge) SessionID() string { return "" }
func (b *forgetfulBridge) Close() error      { return nil }

func TestLostSessionIsRenewedOnce(t *testing.T) {
	b := &forgetfulBridge{}
	l, err := NewLoop(LoopConfig{Bridge: b, Flow: untilFlow{doneAt: 2}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &RuntimeContext{}
	res := l.Run(context.Background(), rc)
	if !res.Success || res.SessionID != "s2" {
		t.Fatalf("got %+v", res)
	}
	if want := []string{"", "s1", ""}; fmt.Sprint(b.calls) != fmt.Sprint(want) {
		t.Fatalf("calls = %q, want %q", b.calls, want)
	}
}

func TestNewRequiresBridgeAndFlow(t *testing.T) {
	if _, err := NewLoop(LoopConfig{}); !errors.Is(err, agenterr.ErrDependencyResolution) {
		t.Fatalf("err = %v", err)
	}
}
