package verdict

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

type emitted struct {
	typ  string
	data json.RawMessage
}

type recorder struct {
	mu     sync.Mutex
	events []emitted
}

func (r *recorder) Emit(p event.Payload) {
	typ, data := string(p.EventKind()), any(p)
	b, _ := json.Marshal(data)
	r.mu.Lock()
	r.events = append(r.events, emitted{typ, b})
	r.mu.Unlock()
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.typ)
	}
	return out
}

func registry(t *testing.T, js string) agentdir.Registry {
	t.Helper()
	var r agentdir.Registry
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func machine(t *testing.T, js string, opts MachineOptions) *Machine {
	t.Helper()
	m, err := NewMachine(new(registry(t, js)), opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var ctx = context.Background()

func step(t *testing.T, m *Machine, passed bool) event.StepMove {
	t.Helper()
	mv, err := m.Transition(ctx, StepOutcome{Passed: passed, Iteration: 1})
	if err != nil {
		t.Fatal(err)
	}
	return mv
}

func cur(m *Machine) string { id, _ := m.Current(); return id }

const linear = `{"agentId":"a","entryStep":"plan","steps":{
	"plan":{"stepId":"plan","c2":"initial","c3":"plan","check":{"type":"keyword","keywords":["PLANNED"],
		"onPass":{"next":"build"},"onFail":{"retry":true}}},
	"build":{"stepId":"build","c2":"initial","c3":"build","check":{"type":"keyword","keywords":["BUILT"],
		"onPass":{"complete":true},"onFail":{"next":"plan"}}}}}`

func TestLinearFlowAndLoops(t *testing.T) {
	rec := &recorder{}
	m := machine(t, linear, MachineOptions{Emitter: rec})
	if cur(m) != "plan" || m.IsTerminal() {
		t.Fatal("not at entry")
	}
	if mv := step(t, m, true); mv.Kind != MoveNext || mv.From != "plan" || mv.To != "build" {
		t.Fatalf("move = %+v", mv)
	}
	// A → B → A loops are allowed and counted.
	if mv := step(t, m, false); mv.To != "plan" {
		t.Fatalf("move = %+v", mv)
	}
	step(t, m, true)
	mv := step(t, m, true)
	if !mv.Complete || mv.Kind != MoveComplete || !m.Completed() || !m.IsTerminal() {
		t.Fatalf("move = %+v", mv)
	}
	if v := m.Visits(); v["plan"] != 2 || v["build"] != 2 {
		t.Fatalf("visits = %v", v)
	}
	if _, err := m.Transition(ctx, StepOutcome{Passed: true}); err == nil {
		t.Fatal("transition after completion")
	}
	if got := strings.Join(rec.types(), ","); got != "step.transition,step.transition,step.transition,step.transition" {
		t.Fatalf("events = %s", got)
	}
	var first event.StepMove
	json.Unmarshal(rec.events[0].data, &first)
	if first.From != "plan" || first.To != "build" || !first.Passed {
		t.Fatalf("event = %+v", first)
	}
}

func TestStepLoopLimit(t *testing.T) {
	const self = `{"agentId":"a","entryStep":"poll","stepLoopLimit":%d,"steps":{
		"poll":{"stepId":"poll","c2":"c","c3":"poll","check":{"type":"keyword","keywords":["X"],"onPass":{"complete":true},"onFail":{"next":"poll"}}}}}`
	for _, limit := range []int{0, 3} {
		m := machine(t, strings.Replace(self, "%d", jsonInt(limit), 1), MachineOptions{})
		want := limit
		if want == 0 {
			want = DefaultLoopLimit
		}
		runs := 1 // the entry
		var err error
		for err == nil && runs < 100 {
			if _, err = m.Transition(ctx, StepOutcome{}); err == nil {
				runs++
			}
		}
		if !errors.Is(err, agenterr.ErrStepLoopLimit) {
			t.Fatalf("limit %d: err = %v", limit, err)
		}
		if e := agenterr.From(err); e.Layer != agenterr.LayerLoop {
			t.Fatalf("STEP_LOOP_LIMIT must be a LoopError, layer %s", e.Layer)
		}
		if runs != want {
			t.Fatalf("limit %d: ran %d times in a row, want %d", limit, runs, want)
		}
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestRetriesDoNotCountTowardLoopLimit(t *testing.T) {
	m := machine(t, `{"agentId":"a","entryStep":"s","stepLoopLimit":2,"steps":{
		"s":{"stepId":"s","c2":"c","c3":"s","retry":{"maxRetries":5},
			"check":{"type":"keyword","keywords":["X"],"onPass":{"complete":true},"onFail":{"retry":true}}}}}`, MachineOptions{})
	for i := 0; i < 5; i++ {
		mv := step(t, m, false)
		if mv.Kind != MoveRetry || mv.To != "s" {
			t.Fatalf("retry %d: %+v", i, mv)
		}
	}
	_, err := m.Transition(ctx, StepOutcome{})
	if !errors.Is(err, agenterr.ErrStepRetryExhausted) {
		t.Fatalf("6th retry: %v", err)
	}
}

func TestRetryPolicy(t *testing.T) {
	const tpl = `{"agentId":"a","entryStep":"s","steps":{
		"s":{"stepId":"s","c2":"c","c3":"s",RETRY"check":{"type":"keyword","keywords":["X"],"onPass":{"next":"next"},"onFail":{"retry":true}}},
		"next":{"stepId":"next","c2":"c","c3":"n"},
		"rescue":{"stepId":"rescue","c2":"c","c3":"r"}}}`
	cases := []struct {
		retry    string
		retries  int
		wantKind string
		wantStep string
		wantErr  error
	}{
		{"", 3, "", "", agenterr.ErrStepRetryExhausted},
		{`"retry":{"maxRetries":1},`, 1, "", "", agenterr.ErrStepRetryExhausted},
		{`"retry":{"maxRetries":0,"onExhausted":"fallback","fallbackStep":"rescue"},`, 0, MoveFallback, "rescue", nil},
		{`"retry":{"maxRetries":2,"onExhausted":"skip"},`, 2, MoveSkip, "next", nil},
	}
	for _, c := range cases {
		m := machine(t, strings.Replace(tpl, "RETRY", c.retry, 1), MachineOptions{})
		for i := 0; i < c.retries; i++ {
			if mv := step(t, m, false); mv.Kind != MoveRetry {
				t.Fatalf("%s: retry %d = %+v", c.retry, i, mv)
			}
		}
		mv, err := m.Transition(ctx, StepOutcome{})
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("%s: err = %v", c.retry, err)
			}
			continue
		}
		if err != nil || mv.Kind != c.wantKind || cur(m) != c.wantStep {
			t.Fatalf("%s: %+v at %s, %v", c.retry, mv, cur(m), err)
		}
	}
}

func TestStepWithoutCheckStays(t *testing.T) {
	m := machine(t, `{"agentId":"a","entryStep":"work","steps":{"work":{"stepId":"work","c2":"c","c3":"w"}}}`, MachineOptions{})
	for i := 0; i < 3*DefaultLoopLimit; i++ {
		if mv := step(t, m, i%2 == 0); mv.Kind != MoveStay || mv.To != "work" {
			t.Fatalf("%+v", mv)
		}
	}
}

const gateways = `{"agentId":"a","entryStep":"work","steps":{
	"work":{"stepId":"work","c2":"c","c3":"w","check":{"type":"keyword","keywords":["READY"],"onPass":{"next":"route"},"onFail":{"retry":true}}},
	"route":{"stepId":"route","type":"gateway","c2":"c","c3":"g","check":{"type":"keyword","keywords":["BUG"],"onPass":{"next":"fix"},"onFail":{"next":"ship"}}},
	"fix":{"stepId":"fix","c2":"c","c3":"f"},
	"ship":{"stepId":"ship","c2":"c","c3":"s"}}}`

func TestGatewayRoutesWithoutModelCall(t *testing.T) {
	checker := NewChecker(CheckerConfig{})
	for resp, want := range map[string]string{"READY, found a BUG": "fix", "READY": "ship"} {
		m := machine(t, gateways, MachineOptions{})
		ev, err := m.Evaluate(ctx, checker, CheckInput{Responses: []string{resp}}, StepOutcome{Iteration: 1})
		if err != nil {
			t.Fatal(err)
		}
		if cur(m) != want || len(ev.Moves) != 2 || ev.Moves[1].From != "route" {
			t.Fatalf("%q: at %s, moves %+v", resp, cur(m), ev.Moves)
		}
	}
	// Gateways pointing at each other never reach a model step.
	m := machine(t, `{"agentId":"a","entryStep":"g1","steps":{
		"g1":{"stepId":"g1","type":"gateway","c2":"c","c3":"a","check":{"type":"keyword","keywords":["X"],"onPass":{"next":"g2"},"onFail":{"next":"g2"}}},
		"g2":{"stepId":"g2","type":"gateway","c2":"c","c3":"b","check":{"type":"keyword","keywords":["X"],"onPass":{"next":"g1"},"onFail":{"next":"g1"}}}}}`, MachineOptions{})
	if !m.IsGateway() {
		t.Fatal("entry gateway not detected")
	}
	if _, err := m.RouteGateways(ctx, checker, CheckInput{}, 0); !errors.Is(err, agenterr.ErrStepLoopLimit) {
		t.Fatalf("gateway cycle: %v", err)
	}
}

const subSteps = `{"agentId":"a","entryStep":"start","steps":{
	"start":{"stepId":"start","c2":"c","c3":"s","check":{"type":"keyword","keywords":["GO"],"onPass":{"next":"cook"},"onFail":{"retry":true}}},
	"cook":{"stepId":"cook","c2":"c","c3":"cook","subSteps":["prep","fry"],"sequential":true,
		"check":{"type":"keyword","keywords":["unused"],"onPass":{"next":"serve"},"onFail":{"next":"start"}}},
	"prep":{"stepId":"prep","type":"subStep","c2":"c","c3":"prep","check":{"type":"keyword","keywords":["PREPPED"],"onPass":{},"onFail":{"retry":true}},"retry":{"maxRetries":1}},
	"fry":{"stepId":"fry","type":"subStep","c2":"c","c3":"fry","check":{"type":"keyword","keywords":["FRIED"],"onPass":{},"onFail":{}}},
	"serve":{"stepId":"serve","c2":"c","c3":"serve","check":{"type":"keyword","keywords":["X"],"onPass":{"complete":true},"onFail":{"retry":true}}}}}`

func TestSubStepsRunInOrder(t *testing.T) {
	m := machine(t, subSteps, MachineOptions{})
	step(t, m, true) // start → cook, which runs prep first
	if cur(m) != "prep" || m.Parent() != "cook" {
		t.Fatalf("at %s (parent %q)", cur(m), m.Parent())
	}
	if mv := step(t, m, false); mv.Kind != MoveRetry || cur(m) != "prep" {
		t.Fatalf("sub-step retry: %+v", mv)
	}
	if mv := step(t, m, true); mv.Kind != MoveSubStep || cur(m) != "fry" {
		t.Fatalf("to fry: %+v", mv)
	}
	// All sub-steps passed: the parent passes.
	if mv := step(t, m, true); mv.Kind != MoveNext || cur(m) != "serve" || m.Parent() != "" {
		t.Fatalf("parent onPass: %+v at %s", mv, cur(m))
	}

	// One sub-step failing fails the parent.
	m = machine(t, subSteps, MachineOptions{})
	step(t, m, true)
	step(t, m, true) // prep passes
	if mv := step(t, m, false); cur(m) != "start" || mv.From != "fry" {
		t.Fatalf("fry fails → parent onFail: %+v at %s", mv, cur(m))
	}
	if v := m.Visits(); v["cook"] != 1 || v["prep"] != 1 || v["fry"] != 1 || v["start"] != 2 {
		t.Fatalf("visits = %v", v)
	}
	// prep exhausts its retries (maxRetries 1, onExhausted error).
	m = machine(t, subSteps, MachineOptions{})
	step(t, m, true)
	step(t, m, false)
	if _, err := m.Transition(ctx, StepOutcome{}); !errors.Is(err, agenterr.ErrStepRetryExhausted) {
		t.Fatalf("err = %v", err)
	}
}

const escalation = `{"agentId":"a","entryStep":"intro","steps":{
	"intro":{"stepId":"intro","c2":"c","c3":"i","check":{"type":"keyword","keywords":["X"],"onPass":{"next":"work"},"onFail":{"next":"work"}}},
	"work":{"stepId":"work","c2":"c","c3":"w","escalation":ESC,
		"check":{"type":"keyword","keywords":["OK"],"onPass":{"complete":true},"onFail":{"escalate":true}}},
	"help":{"stepId":"help","c2":"c","c3":"h","check":{"type":"keyword","keywords":["HELPED"],"onPass":{"next":"intro"},"onFail":{"retry":true}}}}}`

func TestInAgentEscalation(t *testing.T) {
	cases := []struct {
		flow     string
		wantKind string
		wantStep string
	}{
		{"resume", MoveResume, "work"},
		{"restart", MoveRestart, "intro"},
		{"abort", MoveAbort, "help"},
	}
	for _, c := range cases {
		rec := &recorder{}
		m := machine(t, strings.Replace(escalation, "ESC", `{"escalateTo":"help","notificationMethod":"in_agent","returnFlow":"`+c.flow+`"}`, 1), MachineOptions{Emitter: rec})
		step(t, m, true) // intro → work
		if mv := step(t, m, false); mv.Kind != MoveEscalate || cur(m) != "help" {
			t.Fatalf("%s: escalate: %+v", c.flow, mv)
		}
		if mv := step(t, m, false); mv.Kind != MoveRetry || cur(m) != "help" {
			t.Fatalf("%s: retry inside the escalation step: %+v", c.flow, mv)
		}
		mv := step(t, m, true) // help's own onPass (intro) is replaced by the return flow
		if mv.Kind != c.wantKind || cur(m) != c.wantStep {
			t.Fatalf("%s: after help: %+v at %s", c.flow, mv, cur(m))
		}
		if c.flow == "abort" != m.Aborted() || (c.flow == "abort") != mv.Aborted {
			t.Fatalf("%s: aborted = %v", c.flow, m.Aborted())
		}
		if c.flow == "restart" && m.Visits()["work"] != 1 {
			t.Fatalf("restart lost visit counts: %v", m.Visits())
		}
		if !strings.Contains(strings.Join(rec.types(), ","), "escalation") {
			t.Fatalf("%s: no escalation event: %v", c.flow, rec.types())
		}
	}
}

func TestWebhookEscalationRetries(t *testing.T) {
	var calls atomic.Int32
	var got Notification
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s", r.Method, r.Header.Get("Content-Type"))
		}
		if n <= 2 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &got)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	esc := `{"escalateTo":"oncall","notificationMethod":"webhook","returnFlow":"resume","webhookUrl":"` + srv.URL + `"}`
	m := machine(t, strings.Replace(escalation, "ESC", esc, 1), MachineOptions{AgentName: "fixer", RunID: "run-1",
		Notifier: &WebhookNotifier{Backoff: time.Millisecond}})
	step(t, m, true)
	mv, err := m.Transition(ctx, StepOutcome{Passed: false, Reason: "tests keep failing", Iteration: 4})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 {
		t.Fatalf("webhook called %d times, want 3 (two failures, then success)", calls.Load())
	}
	want := Notification{Agent: "fixer", RunID: "run-1", Step: "work", EscalateTo: "oncall", Reason: "tests keep failing", Iteration: 4}
	if got != want {
		t.Fatalf("payload = %+v", got)
	}
	if mv.Kind != MoveResume || cur(m) != "work" {
		t.Fatalf("resume after webhook: %+v at %s", mv, cur(m))
	}
}

func TestWebhookEscalationFails(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	esc := `{"escalateTo":"oncall","notificationMethod":"webhook","returnFlow":"abort","maxAttempts":2,"webhookUrl":"` + srv.URL + `"}`
	m := machine(t, strings.Replace(escalation, "ESC", esc, 1), MachineOptions{Notifier: &WebhookNotifier{Backoff: time.Millisecond}})
	step(t, m, true)
	_, err := m.Transition(ctx, StepOutcome{})
	if !errors.Is(err, agenterr.ErrEscalation) || calls.Load() != 2 || !strings.Contains(err.Error(), "502") {
		t.Fatalf("err = %v after %d calls", err, calls.Load())
	}
	// A 4xx other than 408/429 is not retried.
	calls.Store(0)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer bad.Close()
	err = (&WebhookNotifier{Backoff: time.Millisecond}).Notify(ctx, agentdir.Escalation{WebhookURL: bad.URL}, Notification{Step: "s"})
	if !errors.Is(err, agenterr.ErrEscalation) || calls.Load() != 1 {
		t.Fatalf("403: %v after %d calls", err, calls.Load())
	}
	// Per-attempt timeout.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	start := time.Now()
	err = (&WebhookNotifier{Backoff: time.Millisecond}).Notify(ctx, agentdir.Escalation{WebhookURL: slow.URL, TimeoutSeconds: 1, MaxAttempts: 1}, Notification{})
	if !errors.Is(err, agenterr.ErrEscalation) || time.Since(start) > 4*time.Second {
		t.Fatalf("slow receiver: %v after %v", err, time.Since(start))
	}
}

func TestLogEscalation(t *testing.T) {
	rec := &recorder{}
	m := machine(t, strings.Replace(escalation, "ESC", `{"escalateTo":"ops","notificationMethod":"log","returnFlow":"abort"}`, 1), MachineOptions{Emitter: rec})
	step(t, m, true)
	mv, err := m.Transition(ctx, StepOutcome{Reason: "stuck", Iteration: 2})
	if err != nil || mv.Kind != MoveAbort || !m.Aborted() {
		t.Fatalf("%+v %v", mv, err)
	}
	var ev event.EscalationEvent
	for _, e := range rec.events {
		if e.typ == "escalation" {
			json.Unmarshal(e.data, &ev)
		}
	}
	if ev.Step != "work" || ev.Method != "log" || ev.Reason != "stuck" || ev.EscalateTo != "ops" {
		t.Fatalf("event = %+v", ev)
	}
}

func TestSnapshotRestore(t *testing.T) {
	m := machine(t, subSteps, MachineOptions{})
	step(t, m, true)
	step(t, m, false) // prep retry
	snap := m.Snapshot()
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var back event.StepState
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	m2 := machine(t, subSteps, MachineOptions{})
	if err := m2.Restore(back); err != nil {
		t.Fatal(err)
	}
	// Both machines now behave identically: prep has used its one retry.
	_, err1 := m.Transition(ctx, StepOutcome{})
	_, err2 := m2.Transition(ctx, StepOutcome{})
	if !errors.Is(err1, agenterr.ErrStepRetryExhausted) || !errors.Is(err2, agenterr.ErrStepRetryExhausted) {
		t.Fatalf("%v / %v", err1, err2)
	}
	// Snapshot is a copy.
	snap.Visits["start"] = 99
	if m.Visits()["start"] == 99 {
		t.Fatal("snapshot shares visits")
	}
	if err := m2.Restore(event.StepState{Current: "gone"}); err == nil {
		t.Fatal("restored an unknown step")
	}
	if err := m2.Restore(event.StepState{Current: "prep", Parent: &event.ParentState{Step: "cook", Index: 7}}); err == nil {
		t.Fatal("restored an out-of-range sub-step")
	}
}

func TestNewMachineValidates(t *testing.T) {
	cases := []struct{ js, pointer string }{
		{`{"entryStep":"x","steps":{}}`, "/steps"},
		{`{"entryStep":"x","steps":{"a":{"stepId":"a"}}}`, "/entryStep"},
		{`{"entryStep":"a","steps":{"a":{"check":{"type":"keyword","keywords":["k"],"onPass":{"next":"nowhere"}}}}}`, "/steps/a/check/onPass/next"},
		{`{"entryStep":"a","steps":{"a":{"check":{"type":"keyword","keywords":["k"],"onFail":{"escalate":true}}}}}`, "/steps/a/check/onFail/escalate"},
		{`{"entryStep":"a","steps":{"a":{"retry":{"onExhausted":"fallback"}}}}`, "/steps/a/retry/fallbackStep"},
		{`{"entryStep":"a","steps":{"a":{"retry":{"onExhausted":"fallback","fallbackStep":"z"}}}}`, "/steps/a/retry/fallbackStep"},
		{`{"entryStep":"a","steps":{"a":{"retry":{"onExhausted":"panic"}}}}`, "/steps/a/retry/onExhausted"},
		{`{"entryStep":"a","steps":{"a":{"escalation":{"escalateTo":"z"}}}}`, "/steps/a/escalation/escalateTo"},
		{`{"entryStep":"a","steps":{"a":{"escalation":{"escalateTo":"x","notificationMethod":"webhook"}}}}`, "/steps/a/escalation/webhookUrl"},
		{`{"entryStep":"a","steps":{"a":{"escalation":{"escalateTo":"x","notificationMethod":"pager"}}}}`, "/steps/a/escalation/notificationMethod"},
		{`{"entryStep":"a","steps":{"a":{"escalation":{"escalateTo":"a","returnFlow":"later"}}}}`, "/steps/a/escalation/returnFlow"},
		{`{"entryStep":"a","steps":{"a":{"type":"gateway"}}}`, "/steps/a"},
		{`{"entryStep":"a","steps":{"a":{"type":"fancy"}}}`, "/steps/a/type"},
		{`{"entryStep":"a","steps":{"a":{"subSteps":["b"]},"b":{}}}`, "/steps/a/subSteps/0"},
		{`{"entryStep":"b","steps":{"a":{"subSteps":["b"]},"b":{"type":"subStep"}}}`, "/entryStep"},
		{`{"entryStep":"a","steps":{"a":{"subSteps":["b"],"sequential":false},"b":{"type":"subStep"}}}`, "/steps/a/sequential"},
		{`{"entryStep":"a","steps":{"a":{"subSteps":["b"]},"c":{"subSteps":["b"]},"b":{"type":"subStep"}}}`, "/steps/c/subSteps/0"},
	}
	for _, c := range cases {
		_, err := NewMachine(new(registry(t, c.js)), MachineOptions{})
		e := agenterr.From(err)
		if e == nil || e.Code != agenterr.CodeConfigurationValidation || e.File != "steps_registry.json" || e.Hint == "" {
			t.Errorf("%s: err = %v", c.js, err)
			continue
		}
		if e.Pointer != c.pointer {
			t.Errorf("%s: pointer %q, want %q", c.js, e.Pointer, c.pointer)
		}
	}
}

// phaseRecorder is a completion handler that records what the verdict
// told it about the step flow.
type phaseRecorder struct {
	sawDone bool
	inner   CompletionHandler
}

func (p *phaseRecorder) Check(ctx context.Context, c CompletionContext) (event.CompletionResult, error) {
	p.sawDone = c.StepComplete
	return p.inner.Check(ctx, c)
}
func (p *phaseRecorder) IsComplete() bool { return p.inner.IsComplete() }
func (p *phaseRecorder) Reason() string   { return p.inner.Reason() }

// TestDecideKeywordPriority: the step check and its transition come
// before the completion handler, which is told whether they completed the
// flow; the same keyword in the step check and the completion config
// makes both react.
func TestDecideKeywordPriority(t *testing.T) {
	const js = `{"agentId":"a","entryStep":"write","steps":{
		"write":{"stepId":"write","c2":"c","c3":"w","check":{"type":"keyword","keywords":["DONE"],"onPass":{"next":"review"},"onFail":{"retry":true}}},
		"review":{"stepId":"review","c2":"c","c3":"r","check":{"type":"keyword","keywords":["LGTM"],"onPass":{"complete":true},"onFail":{"next":"write"}}}}}`
	decide := func(m *Machine, h CompletionHandler, i int, text string) Verdict {
		t.Helper()
		s, err := New(Config{Machine: m, Checker: NewChecker(CheckerConfig{}), Handler: h, Retries: NewRetryHandler(RetryConfig{})})
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.Decide(ctx, Input{Iteration: i, Summary: &event.IterationSummary{Iteration: i, AssistantResponses: []string{text}}})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	m := machine(t, js, MachineOptions{})
	h := &phaseRecorder{inner: &Keyword{Keyword: "DONE"}}
	v := decide(m, h, 1, "Wrote it. DONE")
	// The same keyword in the step check and the completion config: both react.
	if !v.Check.Passed || !v.Completion.Complete || cur(m) != "review" {
		t.Fatalf("check %+v, completion %+v, at %s", v.Check, v.Completion, cur(m))
	}
	// The completion handler was told the flow is not complete (write → review).
	if h.sawDone {
		t.Fatal("completion saw stepComplete after write → review")
	}
	// A step-flow completion reaches the completion context.
	h2 := &phaseRecorder{inner: &StepFlow{}}
	v = decide(m, h2, 2, "LGTM")
	if !h2.sawDone || !v.Completion.Complete || v.Action != Complete {
		t.Fatalf("%+v (handler saw stepComplete %v)", v, h2.sawDone)
	}
}

// The example registry of docs/steps.md is valid and behaves as described.
func TestDocsExample(t *testing.T) {
	b, err := os.ReadFile("../docs/steps.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "```json\n")
	js, _, _ := strings.Cut(rest, "```")
	m := machine(t, js, MachineOptions{})
	checker := NewChecker(CheckerConfig{})
	eval := func(text string, actions ...event.ActionResult) StepEvaluation {
		t.Helper()
		ev, err := m.Evaluate(ctx, checker, CheckInput{Responses: []string{text}, ActionResults: actions}, StepOutcome{Iteration: 1})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	eval("PLAN_READY")
	if cur(m) != "fix" {
		t.Fatalf("at %s", cur(m))
	}
	eval("tried", event.ActionResult{Action: "Edit", Success: true}) // Bash missing → escalate to ask
	if cur(m) != "ask" {
		t.Fatalf("at %s", cur(m))
	}
	eval("UNBLOCKED") // resume: back to fix
	if cur(m) != "fix" {
		t.Fatalf("at %s", cur(m))
	}
	ev := eval("done", event.ActionResult{Action: "Edit", Success: true}, event.ActionResult{Action: "Bash", Success: true})
	if !ev.StepComplete() || !m.Completed() || len(ev.Moves) != 2 {
		t.Fatalf("gateway did not complete: %+v", ev.Moves)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	reg := agentdir.Registry{}
	json.Unmarshal([]byte(linear), &reg)
	checker := NewChecker(CheckerConfig{})
	in := CheckInput{Responses: []string{"working on it", "PLANNED and BUILT? not yet"}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m, _ := NewMachine(new(reg), MachineOptions{})
		if _, err := m.Evaluate(ctx, checker, in, StepOutcome{Iteration: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestParentRetryRerunsSubSteps(t *testing.T) {
	js := strings.Replace(subSteps, `"onFail":{"next":"start"}}}`, `"onFail":{"retry":true}},"retry":{"maxRetries":1}}`, 1)
	m := machine(t, js, MachineOptions{})
	step(t, m, true) // → cook/prep
	step(t, m, true) // prep → fry
	mv := step(t, m, false)
	if mv.Kind != MoveRetry || cur(m) != "prep" || m.Parent() != "cook" || mv.To != "prep" {
		t.Fatalf("parent retry: %+v at %s", mv, cur(m))
	}
	step(t, m, true)
	if _, err := m.Transition(ctx, StepOutcome{}); !errors.Is(err, agenterr.ErrStepRetryExhausted) {
		t.Fatalf("parent retries exhausted: %v", err)
	}
	// A parent whose transition stays runs its sub-steps again.
	js = strings.Replace(subSteps, `"onFail":{"next":"start"}}}`, `"onFail":{}}}`, 1)
	m = machine(t, js, MachineOptions{})
	step(t, m, true)
	step(t, m, true)  // prep passes
	step(t, m, false) // fry fails → parent fails → stays
	if cur(m) != "prep" || m.Parent() != "cook" || m.Visits()["prep"] != 2 {
		t.Fatalf("at %s, parent %q, visits %v", cur(m), m.Parent(), m.Visits())
	}
}

func TestTransitionAfterEnd(t *testing.T) {
	m := machine(t, linear, MachineOptions{})
	step(t, m, true)
	step(t, m, true)
	if _, err := m.Transition(ctx, StepOutcome{}); !errors.Is(err, agenterr.ErrStepFlowEnded) {
		t.Fatalf("after completion: %v", err)
	}
	m = machine(t, strings.Replace(escalation, "ESC", `{"escalateTo":"ops","notificationMethod":"log","returnFlow":"abort"}`, 1), MachineOptions{})
	step(t, m, true)
	step(t, m, false)
	if !m.Aborted() || !errors.Is(m.AbortError(), agenterr.ErrStepAborted) {
		t.Fatal("abort not reported")
	}
	if _, err := m.Transition(ctx, StepOutcome{}); !errors.Is(err, agenterr.ErrStepAborted) {
		t.Fatalf("after abort: %v", err)
	}
}

// TestNewMachineReportsEveryProblem: the step graph's broken rules are
// reported together, each with its problem code.
func TestNewMachineReportsEveryProblem(t *testing.T) {
	_, err := NewMachine(new(registry(t, `{"entryStep":"x","steps":{"a":{"check":{"type":"keyword","keywords":["k"],"onPass":{"next":"nowhere"}}},
		"g":{"type":"gateway"}}}`)), MachineOptions{})
	var codes []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var re *agentdir.RuleError
		if !errors.As(e, &re) || !errors.Is(e, agenterr.ErrConfigurationValidation) {
			t.Fatalf("%v is not a coded configuration error", e)
		}
		codes = append(codes, re.Rule)
	}
	if want := "SR-ENTRY-STEP SR-TRANSITION-TARGET SR-GATEWAY-CHECK"; strings.Join(codes, " ") != want {
		t.Fatalf("codes %v, want %s", codes, want)
	}
}
