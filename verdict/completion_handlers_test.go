package verdict

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

func ctxAt(i int, responses ...string) CompletionContext {
	s := &event.IterationSummary{Iteration: i, AssistantResponses: responses}
	return CompletionContext{Iteration: i, Summary: s, Summaries: []event.IterationSummary{*s}}
}

// checkInvariants asserts every handler's contract after a Check: IsComplete
// reflects the result, Reason is non-empty exactly when complete.
func checkInvariants(t *testing.T, h CompletionHandler, r event.CompletionResult) {
	t.Helper()
	if h.IsComplete() != r.Complete {
		t.Fatalf("IsComplete()=%v but Check returned Complete=%v", h.IsComplete(), r.Complete)
	}
	if r.Complete && (r.Reason == "" || h.Reason() == "") {
		t.Fatalf("complete without a reason: result %q, Reason() %q", r.Reason, h.Reason())
	}
	if !r.Complete && h.Reason() != "" {
		t.Fatalf("not complete but Reason() = %q", h.Reason())
	}
}

func TestIterationBudgetCompletesAfterExactlyN(t *testing.T) {
	for _, max := range []int{1, 2, 5} {
		h := &IterationBudget{Max: max}
		completedAt := 0
		for i := 1; i <= max+2 && completedAt == 0; i++ {
			r, err := h.Check(context.Background(), ctxAt(i))
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, h, r)
			if r.Complete {
				completedAt = i
			}
		}
		if completedAt != max {
			t.Errorf("Max=%d: completed at iteration %d", max, completedAt)
		}
	}
}

// An iteration past the budget (a resumed run re-runs its stopped
// iteration) still completes, and the reason does not read "2 of 1".
func TestIterationBudgetPastTheBudget(t *testing.T) {
	h := &IterationBudget{Max: 1}
	r, err := h.Check(context.Background(), ctxAt(2))
	if err != nil || !r.Complete || r.Reason != "iteration budget reached: iteration 2 ran on resume, past the budget of 1 iteration" {
		t.Fatalf("%+v %v", r, err)
	}
	if r, _ := (&IterationBudget{Max: 2}).Check(context.Background(), ctxAt(2)); r.Reason != "iteration budget reached: 2 of 2 iterations" {
		t.Fatalf("at the budget: %q", r.Reason)
	}
}

func TestHandlersRejectIterationZero(t *testing.T) {
	hs := map[string]CompletionHandler{
		"budget":    &IterationBudget{Max: 1},
		"keyword":   &Keyword{Keyword: "DONE"},
		"stepflow":  &StepFlow{},
		"composite": &Composite{Mode: CompositeAny, Conditions: []CompositeCondition{{Name: "b", Handler: &IterationBudget{Max: 1}}}},
		"declared":  &Declared{Keyword: "DONE"},
		"external":  &ExternalState{Number: 1},
	}
	for name, h := range hs {
		for _, it := range []int{0, -1} {
			_, err := h.Check(context.Background(), CompletionContext{Iteration: it, Summary: &event.IterationSummary{}})
			if !errors.Is(err, agenterr.ErrCompletion) {
				t.Errorf("%s: iteration %d: err = %v, want COMPLETION", name, it, err)
			}
			if h.IsComplete() {
				t.Errorf("%s: complete after a rejected check", name)
			}
		}
	}
}

func TestKeywordOnlyAssistantText(t *testing.T) {
	h := &Keyword{Keyword: "TASK_COMPLETE"}
	c := ctxAt(1, "I read the file.")
	// The keyword appears in a tool's output (a file the model read): not a declaration.
	c.Summary.ToolsUsed = []event.ToolUse{{Name: "Read", Output: "notes: say TASK_COMPLETE when done"}}
	c.Summary.ActionResults = []event.ActionResult{{Action: "Read", Success: true, Output: "TASK_COMPLETE"}}
	r, err := h.Check(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, h, r)
	if r.Complete {
		t.Fatal("keyword in tool output completed the run")
	}
	r, err = h.Check(context.Background(), ctxAt(2, "working", "All done. TASK_COMPLETE"))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, h, r)
	if !r.Complete || !strings.Contains(r.Reason, "TASK_COMPLETE") {
		t.Fatalf("got %+v", r)
	}
	// The state reflects the last check only.
	r, _ = h.Check(context.Background(), ctxAt(3, "more work"))
	checkInvariants(t, h, r)
	if h.IsComplete() {
		t.Fatal("IsComplete kept a stale state")
	}
}

func TestKeywordNeedsSummary(t *testing.T) {
	_, err := (&Keyword{Keyword: "X"}).Check(context.Background(), CompletionContext{Iteration: 1})
	if !errors.Is(err, agenterr.ErrCompletion) {
		t.Fatalf("err = %v", err)
	}
}

// counting wraps a handler and counts Check calls, to observe short circuit.
type counting struct {
	CompletionHandler
	calls int
}

func (c *counting) Check(ctx context.Context, cc CompletionContext) (event.CompletionResult, error) {
	c.calls++
	return c.CompletionHandler.Check(ctx, cc)
}

func TestCompositeAnyShortCircuitsInOrder(t *testing.T) {
	first := &counting{CompletionHandler: &Keyword{Keyword: "DONE"}}
	second := &counting{CompletionHandler: &IterationBudget{Max: 1}}
	h := &Composite{Mode: CompositeAny, Conditions: []CompositeCondition{{"kw", first}, {"budget", second}}}
	r, err := h.Check(context.Background(), ctxAt(1, "DONE"))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, h, r)
	if !r.Complete || first.calls != 1 || second.calls != 0 {
		t.Fatalf("complete=%v calls=%d,%d; want short circuit after the first", r.Complete, first.calls, second.calls)
	}
	if got := h.ConditionStates(); !got["kw"] || got["budget"] {
		t.Fatalf("states = %v", got)
	}
	// Not declared: the budget (second in order) decides.
	r, err = h.Check(context.Background(), ctxAt(1, "working"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Complete || second.calls != 1 || !strings.Contains(r.Reason, "budget") {
		t.Fatalf("got %+v calls=%d", r, second.calls)
	}
	if got := h.ConditionStates(); got["kw"] || !got["budget"] {
		t.Fatalf("states = %v", got)
	}
}

func TestCompositeAllNeedsEvery(t *testing.T) {
	h := &Composite{Mode: CompositeAll, Conditions: []CompositeCondition{
		{"kw", &Keyword{Keyword: "DONE"}}, {"budget", &IterationBudget{Max: 2}}}}
	r, _ := h.Check(context.Background(), ctxAt(1, "DONE"))
	checkInvariants(t, h, r)
	if r.Complete {
		t.Fatal("all-mode completed with the budget unmet")
	}
	if got := h.ConditionStates(); !got["kw"] || got["budget"] {
		t.Fatalf("states = %v (all mode evaluates every condition)", got)
	}
	r, _ = h.Check(context.Background(), ctxAt(2, "DONE"))
	checkInvariants(t, h, r)
	if !r.Complete {
		t.Fatal("all-mode not complete with every condition met")
	}
	// ConditionStates is a copy.
	h.ConditionStates()["kw"] = false
	if !h.ConditionStates()["kw"] {
		t.Fatal("ConditionStates exposed internal state")
	}
}

func TestCompositeErrors(t *testing.T) {
	for _, h := range []*Composite{
		{Mode: "some", Conditions: []CompositeCondition{{"a", &StepFlow{}}}},
		{Mode: CompositeAll},
		{Mode: CompositeAll, Conditions: []CompositeCondition{{"k", &Keyword{}}}},
	} {
		if _, err := h.Check(context.Background(), ctxAt(1, "x")); !errors.Is(err, agenterr.ErrCompletion) {
			t.Errorf("%+v: err = %v", h, err)
		}
	}
}

func TestStepFlow(t *testing.T) {
	h := &StepFlow{}
	c := ctxAt(1)
	c.Summary.StepID = "finish"
	r, _ := h.Check(context.Background(), c)
	checkInvariants(t, h, r)
	if r.Complete {
		t.Fatal("complete without a completing transition")
	}
	c.StepComplete = true
	r, _ = h.Check(context.Background(), c)
	checkInvariants(t, h, r)
	if !r.Complete || !strings.Contains(r.Reason, "finish") {
		t.Fatalf("got %+v", r)
	}
}

// fileVerifier is a real Verifier over the file system: condition
// "validator" names a file that must exist under dir.
type fileVerifier struct{ dir string }

func (v fileVerifier) Validate(_ context.Context, conds []agentdir.CompletionCondition) (event.ValidationResult, error) {
	var checked []string
	for _, c := range conds {
		checked = append(checked, c.Validator)
		if _, err := os.Stat(filepath.Join(v.dir, c.Validator)); err != nil {
			return event.ValidationResult{Valid: false, Pattern: "file-not-exists", Validator: c.Validator,
				Params: map[string]any{"path": c.Validator}, Checked: checked}, nil
		}
	}
	return event.ValidationResult{Valid: true, Checked: checked}, nil
}

func structuredCtx(i int, so string, text ...string) CompletionContext {
	c := ctxAt(i, text...)
	c.Summary.StructuredOutput = json.RawMessage(so)
	return c
}

func TestDeclaredReportsTheClaimOnly(t *testing.T) {
	h := &Declared{}
	r, err := h.Check(context.Background(), structuredCtx(1, `{"status":"in_progress"}`))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, h, r)
	if r.Complete || r.Declared || r.Validation != nil {
		t.Fatalf("got %+v", r)
	}
	r, err = h.Check(context.Background(), structuredCtx(2, `{"next_action":{"action":"complete","reason":"all done"}}`))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, h, r)
	if !r.Complete || !r.Declared || r.Validation != nil || !strings.Contains(r.Reason, "declared") {
		t.Fatalf("got %+v", r)
	}
	if d := h.LastDeclaration(); d.NextAction != "complete" || d.NextActionReason != "all done" {
		t.Fatalf("declaration = %+v", d)
	}
}

func TestDetectDeclaration(t *testing.T) {
	cases := []struct {
		so, text, kw string
		fields       DeclarationFields
		want         bool
		source       string
	}{
		{`{"status":"completed"}`, "", "", DeclarationFields{}, true, "structured.status"},
		{`{"status":"Completed"}`, "", "", DeclarationFields{}, true, "structured.status"},
		{`{"next_action":"complete"}`, "", "", DeclarationFields{}, true, "structured.next_action"},
		{`{"next_action":{"action":"complete"}}`, "", "", DeclarationFields{}, true, "structured.next_action"},
		{`{"next_action":{"action":"continue"}}`, "", "", DeclarationFields{}, false, ""},
		{`{"status":"in_progress"}`, "all done DONE", "DONE", DeclarationFields{}, true, "keyword"},
		{`{"result":{"state":"completed"}}`, "", "", DeclarationFields{Status: "result.state"}, true, "structured.result.state"},
		{`not json {"status":"completed"}`, "", "", DeclarationFields{}, false, ""},
		{`["completed"]`, "", "", DeclarationFields{}, false, ""},
		{`{"status":{"nested":"completed"}}`, "", "", DeclarationFields{}, false, ""},
		{``, "DONE", "", DeclarationFields{}, false, ""},
	}
	for _, c := range cases {
		d := DetectDeclaration(json.RawMessage(c.so), []string{c.text}, c.kw, c.fields)
		if d.Declared != c.want || d.Source != c.source {
			t.Errorf("%s / %q: got %+v", c.so, c.text, d)
		}
	}
}

func TestSignals(t *testing.T) {
	h := &Keyword{Keyword: "DONE"}
	handled, err := ProcessSignal(h, Signal{Type: SignalComplete, Data: "operator"})
	if err != nil || !handled {
		t.Fatalf("handled=%v err=%v", handled, err)
	}
	if !h.IsComplete() || !strings.Contains(h.Reason(), "operator") {
		t.Fatalf("after complete signal: %v %q", h.IsComplete(), h.Reason())
	}
	// Forced completion is sticky across checks.
	r, _ := h.Check(context.Background(), ctxAt(2, "not done"))
	checkInvariants(t, h, r)
	if !r.Complete {
		t.Fatal("forced completion lost on the next check")
	}
	// Keyword has no phases: the signal is not handled, not an error.
	if handled, err := ProcessSignal(h, Signal{Type: SignalPhaseAdvance}); handled || err != nil {
		t.Fatalf("phase-advance on a phaseless handler: %v %v", handled, err)
	}
	if _, err := ProcessSignal(h, Signal{Type: "explode"}); !errors.Is(err, agenterr.ErrCompletion) {
		t.Fatalf("unknown signal: %v", err)
	}
	// Composite forwards phase-advance to phase-aware members.
	p := &phased{}
	c := &Composite{Mode: CompositeAny, Conditions: []CompositeCondition{{"p", p}, {"k", &Keyword{Keyword: "X"}}}}
	if handled, _ := ProcessSignal(c, Signal{Type: SignalPhaseAdvance}); !handled || p.phase != 1 {
		t.Fatalf("composite did not forward: handled=%v phase=%d", handled, p.phase)
	}
}

// phased completes after its third phase; a real PhaseAware handler.
type phased struct {
	phase int
	handlerState
}

func (p *phased) AdvancePhase() { p.phase++ }
func (p *phased) Check(_ context.Context, c CompletionContext) (event.CompletionResult, error) {
	if p.phase >= 2 {
		return p.set(event.CompletionResult{Complete: true, Reason: "last phase reached"}), nil
	}
	return p.set(event.CompletionResult{}), nil
}
