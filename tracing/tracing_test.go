package tracing

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// recorder is an event.Emitter that keeps what it was given.
type recorder struct {
	events    []string
	data      []any
	positions []string
}

func (r *recorder) Emit(p event.Payload) {
	r.events = append(r.events, string(p.EventKind()))
	r.data = append(r.data, p)
}

// raw is an event of kind typ whose payload is the journal form (JSON) of
// data: how the tracer sees a payload it has no Go type for (a run.start
// of another package, an event read back from a journal).
func raw(typ string, data any) event.Raw {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	return event.Raw{Kind: event.Kind(typ), Data: b}
}
func (r *recorder) SetPosition(i int, s string) {
	r.positions = append(r.positions, fmt.Sprintf("%d/%s", i, s))
}

const secret = "sk-test-DO-NOT-EXPORT-1234567890"

// clock advances one second per reading.
func clock() func() time.Time {
	t := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

func newTraced(t *testing.T) (*Emitter, *tracetest.SpanRecorder, *recorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	next := &recorder{}
	return New(Config{Provider: tp, Next: next, Secrets: []string{secret}, Now: clock()}), sr, next
}

// runStart mimics agent.RunStartEvent (this package cannot import agent).
type runStart struct {
	RunID  string            `json:"runId"`
	Agent  string            `json:"agent"`
	Model  string            `json:"model"`
	Params map[string]string `json:"params"`
}

// emitRun plays the events of a two-tool iteration that ends the run with
// err (nil = completed).
func emitRun(e *Emitter, runErr map[string]any) {
	e.Emit(event.Warning("config warning before the run"))
	e.Emit(raw(journal.RunStart, runStart{RunID: "r1", Agent: "hello", Model: "anthropic:claude-x", Params: map[string]string{"token": secret}}))
	e.SetPosition(1, "")
	e.Emit(&event.IterationStartEvent{})
	e.SetPosition(1, "greet")
	e.Emit(event.PromptEvent{Source: "prompts/x.md", Text: "prompt text " + secret})
	e.Emit(event.QueryStartEvent{SessionID: "s1", Source: "prompts/x.md"})
	e.Emit(event.RetryEvent{Provider: "anthropic", Attempt: 1, DelayMs: 500, Code: "SDK_RATE_LIMIT", Status: 429, Message: "slow down " + secret})
	e.Emit(event.ModelTurnEvent{Turn: 1, StopReason: "tool_use", ToolCalls: 2, Usage: event.Usage{InputTokens: 10, OutputTokens: 5}, DurationMs: 300})
	e.Emit(event.ToolUse{ID: "c1", Name: "Write", Input: json.RawMessage(`{"content":"` + secret + `"}`), Output: "wrote " + secret, DurationMs: 250})
	e.Emit(event.ToolUse{ID: "c2", Name: "Bash", Input: json.RawMessage(`{}`), Output: "permission denied", IsError: true, Denied: true})
	e.Emit(event.SessionMessagesEvent{SessionID: "s1"})
	e.Emit(&event.QueryResult{SessionID: "s1", Responses: []string{"done " + secret}, Usage: event.Usage{InputTokens: 10, OutputTokens: 5}, Turns: 1, StopReason: "end_turn",
		ToolUses: []event.ToolUse{{Name: "Write"}, {Name: "Bash"}}})
	e.Emit(event.ValidatorEvent{Validator: "tests", Type: "command", Valid: false, Pattern: "test-failed", ExitCode: 1, DurationMs: 2000})
	e.Emit(raw(journal.CompletionCheck, event.CompletionResult{Declared: true, Validation: &event.ValidationResult{Validator: "tests", Pattern: "test-failed"}}))
	e.Emit(raw(journal.RetryPrompt, map[string]any{"kind": "completion", "step": "greet", "pattern": "test-failed", "validator": "tests", "attempt": 1, "maxAttempts": 3, "text": "retry " + secret, "params": map[string]any{"out": secret}}))
	e.Emit(event.StepMove{From: "greet", To: "greet", Kind: "retry", Reason: "because " + secret})
	e.Emit(event.Warning("undefined variable; value was " + secret))
	e.Emit(event.IterationEvent{Summary: &event.IterationSummary{Iteration: 1, StepID: "greet", Usage: event.Usage{InputTokens: 10, OutputTokens: 5}}})
	end := map[string]any{"success": runErr == nil, "completionReason": "completed", "iterations": 1, "runId": "r1",
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5}, "cost": 0.25, "reason": "done " + secret}
	if runErr != nil {
		end["completionReason"] = "max_iterations"
		end["error"] = runErr
	}
	e.Emit(raw(journal.RunEnd, end))
	e.Emit(event.LifecycleEvent{State: "stopped"})
}

func byName(spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	m := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		m[s.Name()] = s
	}
	return m
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestSpanTree(t *testing.T) {
	e, sr, _ := newTraced(t)
	emitRun(e, nil)
	spans := sr.Ended()
	got := byName(spans)
	want := []string{SpanRun, SpanIteration, "chat claude-x", "execute_tool Write", "execute_tool Bash", "validator tests"}
	if len(spans) != len(want) {
		t.Fatalf("%d spans, want %d: %v", len(spans), len(want), got)
	}
	parent := map[string]string{SpanIteration: SpanRun, "chat claude-x": SpanIteration, "execute_tool Write": "chat claude-x",
		"execute_tool Bash": "chat claude-x", "validator tests": SpanIteration}
	for _, name := range want {
		s, ok := got[name]
		if !ok {
			t.Fatalf("no span %q", name)
		}
		if p := parent[name]; p != "" && s.Parent().SpanID() != got[p].SpanContext().SpanID() {
			t.Errorf("%s: parent is not %s", name, p)
		}
		if s.SpanContext().TraceID() != got[SpanRun].SpanContext().TraceID() {
			t.Errorf("%s: other trace", name)
		}
	}
	if got[SpanRun].Parent().IsValid() {
		t.Error("run span has a parent without a Parent context")
	}

	run := attrs(got[SpanRun])
	for k, v := range map[attribute.Key]any{AttrRunID: "r1", AttrAgentName: "hello", AttrModel: "anthropic:claude-x", AttrGenAIRequestModel: "claude-x",
		AttrGenAIProviderName: "anthropic", AttrSuccess: true, AttrCompletionReason: "completed", AttrIterations: int64(1),
		AttrGenAIInputTokens: int64(10), AttrGenAIOutputTokens: int64(5), AttrCostUSD: 0.25} {
		if run[k].AsInterface() != v {
			t.Errorf("run %s = %v, want %v", k, run[k].AsInterface(), v)
		}
	}
	if got[SpanRun].Status().Code != codes.Ok {
		t.Errorf("run status %v", got[SpanRun].Status())
	}
	if it := attrs(got[SpanIteration]); it[AttrIteration].AsInt64() != 1 || it[AttrStep].AsString() != "greet" {
		t.Errorf("iteration attrs %v", it)
	}

	q := got["chat claude-x"]
	qa := attrs(q)
	for k, v := range map[attribute.Key]any{AttrGenAIOperationName: "chat", AttrGenAIProviderName: "anthropic", AttrGenAISystem: "anthropic",
		AttrGenAIRequestModel: "claude-x", AttrGenAIInputTokens: int64(10), AttrGenAIOutputTokens: int64(5), AttrToolCalls: int64(2),
		AttrGenAIConversationID: "s1", AttrResponseBytes: int64(len("done " + secret))} {
		if qa[k].AsInterface() != v {
			t.Errorf("query %s = %v, want %v", k, qa[k].AsInterface(), v)
		}
	}
	var evNames []string
	for _, ev := range q.Events() {
		evNames = append(evNames, ev.Name)
	}
	if strings.Join(evNames, ",") != "model.retry,model.turn" {
		t.Errorf("query events %v", evNames)
	}

	w := got["execute_tool Write"]
	wa := attrs(w)
	if wa[AttrGenAIToolName].AsString() != "Write" || wa[AttrGenAIToolCallID].AsString() != "c1" || wa[AttrGenAIOperationName].AsString() != "execute_tool" {
		t.Errorf("tool attrs %v", wa)
	}
	if d := w.EndTime().Sub(w.StartTime()); d != 250*time.Millisecond {
		t.Errorf("tool span lasts %v, want its duration_ms", d)
	}
	if w.Status().Code != codes.Unset {
		t.Errorf("successful tool status %v", w.Status())
	}
	if b := got["execute_tool Bash"]; b.Status().Code != codes.Error || !attrs(b)[AttrToolDenied].AsBool() {
		t.Errorf("denied tool: status %v attrs %v", b.Status(), attrs(b))
	}
	v := got["validator tests"]
	if v.Status().Code != codes.Error || attrs(v)[AttrPattern].AsString() != "test-failed" || v.EndTime().Sub(v.StartTime()) != 2*time.Second {
		t.Errorf("validator: status %v attrs %v", v.Status(), attrs(v))
	}
	evNames = nil
	for _, ev := range got[SpanIteration].Events() {
		evNames = append(evNames, ev.Name)
	}
	if strings.Join(evNames, ",") != "completion.check,retry.prompt,step.transition,warning" {
		t.Errorf("iteration events %v", evNames)
	}
}

func TestRunErrorStatus(t *testing.T) {
	e, sr, _ := newTraced(t)
	emitRun(e, map[string]any{"code": "BUDGET_EXCEEDED", "message": "budget used: " + secret, "recoverable": true})
	run := byName(sr.Ended())[SpanRun]
	a := attrs(run)
	if run.Status().Code != codes.Error || run.Status().Description != "BUDGET_EXCEEDED" ||
		a[AttrErrorType].AsString() != "BUDGET_EXCEEDED" || !a[AttrErrorRecoverable].AsBool() || a[AttrSuccess].AsBool() {
		t.Fatalf("status %v attrs %v", run.Status(), a)
	}
}

func TestErrorEventEndsQueryWithCode(t *testing.T) {
	e, sr, _ := newTraced(t)
	e.Emit(raw(journal.RunStart, runStart{RunID: "r1", Model: "script:s.yaml"}))
	e.Emit(&event.IterationStartEvent{})
	e.Emit(event.QueryStartEvent{Model: "openai:gpt-x"})
	e.Emit(event.ErrorEvent{Code: "SDK_AUTH", Message: "prompt was " + secret, Recoverable: false})
	e.Emit(event.IterationEvent{Outcome: event.OutcomeEvent{Stop: true}})
	got := byName(sr.Ended())
	q, ok := got["chat gpt-x"]
	if !ok {
		t.Fatalf("no query span named after the step model: %v", got)
	}
	if q.Status().Code != codes.Error || q.Status().Description != "SDK_AUTH" || attrs(q)[AttrErrorType].AsString() != "SDK_AUTH" {
		t.Errorf("query status %v attrs %v", q.Status(), attrs(q))
	}
	if it := got[SpanIteration]; it.Status().Code != codes.Error {
		t.Errorf("iteration status %v", it.Status())
	}
	e.Close()
	if _, ok := byName(sr.Ended())[SpanRun]; !ok {
		t.Error("Close did not end the open run span")
	}
	assertNoSecret(t, sr.Ended())
}

// TestForwardsUnchanged: the journal gets every event, with the very value
// emitted, and the run position.
func TestForwardsUnchanged(t *testing.T) {
	e, _, next := newTraced(t)
	emitRun(e, nil)
	if len(next.events) != 19 || next.events[0] != journal.Warning || next.events[18] != journal.LifecycleChange {
		t.Fatalf("forwarded %d events: %v", len(next.events), next.events)
	}
	if _, ok := next.data[10].(*event.QueryResult); !ok {
		t.Errorf("query.result forwarded as %T", next.data[10])
	}
	if strings.Join(next.positions, " ") != "1/ 1/greet" {
		t.Errorf("positions %v", next.positions)
	}
}

// TestConsumesAStream: as one of a Stream's consumers the Emitter traces
// each event at the Stream's position (the iteration span carries the
// step the Stream stamped) and forwards nothing to Next.
func TestConsumesAStream(t *testing.T) {
	e, sr, next := newTraced(t)
	s := event.NewStream(clock(), e)
	s.Emit(raw(journal.RunStart, runStart{RunID: "r1", Agent: "hello", Model: "anthropic:claude-x"}))
	s.Emit(&event.IterationStartEvent{Iteration: 1})
	s.Emit(event.PromptEvent{Iteration: 1, Step: "greet", Source: "prompts/x.md"})
	s.Emit(event.QueryStartEvent{SessionID: "s1"})
	s.Emit(&event.QueryResult{SessionID: "s1", Turns: 1, StopReason: "end_turn"})
	s.Emit(event.IterationEvent{Summary: &event.IterationSummary{Iteration: 1, StepID: "greet"}})
	s.Emit(&event.RunResult{Success: true, CompletionReason: "completed", Iterations: 1, RunID: "r1"})
	got := byName(sr.Ended())
	if len(got) != 3 || got[SpanRun] == nil || got["chat claude-x"] == nil {
		t.Fatalf("spans %v", got)
	}
	if it := attrs(got[SpanIteration]); it[AttrIteration].AsInt64() != 1 || it[AttrStep].AsString() != "greet" {
		t.Errorf("iteration attrs %v", it)
	}
	if run := attrs(got[SpanRun]); !run[AttrSuccess].AsBool() || run[AttrCompletionReason].AsString() != "completed" {
		t.Errorf("run attrs %v", run)
	}
	if len(next.events) != 0 || len(next.positions) != 0 {
		t.Errorf("a Stream's consumer forwarded %v at %v", next.events, next.positions)
	}
}

// TestNothingSensitiveExported: prompts, responses, tool input and output,
// params, error messages and retry texts stay out of spans; the one free
// text exported (warnings) has secrets redacted.
func TestNothingSensitiveExported(t *testing.T) {
	e, sr, _ := newTraced(t)
	emitRun(e, map[string]any{"code": "X", "message": secret})
	assertNoSecret(t, sr.Ended())
	var warned bool
	for _, s := range sr.Ended() {
		for _, ev := range s.Events() {
			if ev.Name == journal.Warning {
				for _, kv := range ev.Attributes {
					if strings.Contains(kv.Value.Emit(), "[redacted]") {
						warned = true
					}
				}
			}
		}
	}
	if !warned {
		t.Error("the warning with a secret was not exported redacted")
	}
}

func assertNoSecret(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		b, _ := json.Marshal(tracetest.SpanStubFromReadOnlySpan(s))
		for _, bad := range []string{secret, "prompt text", "wrote ", "done "} {
			if strings.Contains(string(b), bad) {
				t.Errorf("span %s exports %q: %s", s.Name(), bad, b)
			}
		}
	}
}

// spanContent is what a span exports, timestamps and ids aside.
func spanContent(s sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s parent=%v status=%v attrs=%v\n", s.Name(), s.Parent().IsValid(), s.Status(), s.Attributes())
	for _, ev := range s.Events() {
		fmt.Fprintf(&b, "  event %s %v\n", ev.Name, ev.Attributes)
	}
	return b.String()
}

// With the real clock the SDK stamps spans that start or end now; the
// spans, their attributes (built in a reused buffer) and events are the
// same as under a test clock, and every time is set and in order.
func TestRealClockSameSpans(t *testing.T) {
	var contents [2][]string
	for i, now := range []func() time.Time{clock(), nil} {
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		before := time.Now()
		emitRun(New(Config{Provider: tp, Secrets: []string{secret}, Now: now}), nil)
		after := time.Now()
		for _, s := range sr.Ended() {
			contents[i] = append(contents[i], spanContent(s))
			if now != nil {
				continue
			}
			if s.EndTime().Before(s.StartTime()) || s.EndTime().Before(before) || s.EndTime().After(after) {
				t.Errorf("%s: %v .. %v, run %v .. %v", s.Name(), s.StartTime(), s.EndTime(), before, after)
			}
			for _, ev := range s.Events() {
				if ev.Time.Before(before) || ev.Time.After(after) {
					t.Errorf("%s: event %s at %v", s.Name(), ev.Name, ev.Time)
				}
			}
		}
		got := byName(sr.Ended())
		if d := got["execute_tool Write"].EndTime().Sub(got["execute_tool Write"].StartTime()); d != 250*time.Millisecond {
			t.Errorf("clock %d: tool span lasts %v, want the journaled 250ms", i, d)
		}
		if d := got["validator tests"].EndTime().Sub(got["validator tests"].StartTime()); d != 2*time.Second {
			t.Errorf("clock %d: validator span lasts %v, want the journaled 2s", i, d)
		}
	}
	if a, b := strings.Join(contents[0], ""), strings.Join(contents[1], ""); a != b {
		t.Fatalf("test clock:\n%s\nreal clock:\n%s", a, b)
	}
}

// pipeline.stage carries a fractional duration_ms; the stage span is
// back-dated by it.
func TestPipelineStageSpan(t *testing.T) {
	e, sr, _ := newTraced(t)
	e.Emit(raw(journal.RunStart, map[string]any{"command": "pipeline run", "request": "the request " + secret}))
	e.Emit(raw("pipeline.stage", map[string]any{"agent_id": "a", "status": "succeeded", "attempts": 1, "keys_written": []string{"k.a", "k.b"}, "duration_ms": 12.5}))
	e.Emit(raw("pipeline.stage", map[string]any{"agent_id": "b", "status": "violated", "attempts": 2, "duration_ms": 0.25, "error": "custom.x is empty: " + secret}))
	e.Emit(raw("pipeline.violation", map[string]any{"agent_id": "b", "kind": "postcondition", "key": "custom.x", "message": secret}))
	e.Emit(raw(journal.RunEnd, map[string]any{"success": false, "status": "stopped", "error": "CONTRACT_VIOLATION: " + secret, "errorCode": "CONTRACT_VIOLATION"}))
	got := byName(sr.Ended())
	if run := got[SpanRun]; run == nil || run.Status().Code != codes.Error || run.Status().Description != "CONTRACT_VIOLATION" ||
		attrs(run)[AttrErrorType].AsString() != "CONTRACT_VIOLATION" || attrs(run)[AttrPipelineStatus].AsString() != "stopped" {
		t.Errorf("pipeline run span %v", run)
	}
	a, b := got["pipeline.stage a"], got["pipeline.stage b"]
	if a == nil || b == nil {
		t.Fatalf("stage spans %v", got)
	}
	if d := a.EndTime().Sub(a.StartTime()); d != 12500*time.Microsecond {
		t.Errorf("stage a lasts %v", d)
	}
	if aa := attrs(a); aa[AttrStageKeysWritten].AsInt64() != 2 || aa[AttrAttempt].AsInt64() != 1 || a.Status().Code == codes.Error {
		t.Errorf("stage a %v %v", aa, a.Status())
	}
	if b.Status().Code != codes.Error || b.Status().Description != "violated" {
		t.Errorf("stage b status %v", b.Status())
	}
	for _, s := range sr.Ended() {
		if strings.Contains(spanContent(s), secret) {
			t.Errorf("exported: %s", spanContent(s))
		}
	}
}

// A skill run's tool calls (skill.evidence) become execute_tool spans,
// back-dated by their time, without their reasons, digests or errors.
func TestSkillEvidenceSpans(t *testing.T) {
	e, sr, _ := newTraced(t)
	e.Emit(raw(journal.RunStart, runStart{RunID: "r1", Agent: "skill:s", Model: "script:x.yaml"}))
	e.Emit(event.SkillEvidence{Step: 1, Seq: 1, Tool: "readSkillMd", OK: true, ReasonShort: "read " + secret,
		InputsDigest: "sha256:" + secret, Cost: event.SkillCost{Tokens: 120, TimeMs: 40}, Disclosure: "L2"})
	e.Emit(&event.SkillEvidence{Step: 2, Seq: 2, Tool: "runScript", OK: false, Error: "exit 1: " + secret,
		Stderr: secret, DiffSummary: secret, FileIDs: []string{secret}, Cached: true})
	e.Emit(raw(journal.RunEnd, map[string]any{"success": true, "completionReason": "validated"}))
	got := byName(sr.Ended())
	read, run := got["execute_tool readSkillMd"], got["execute_tool runScript"]
	if read == nil || run == nil || read.Parent().SpanID() != got[SpanRun].SpanContext().SpanID() {
		t.Fatalf("spans %v", got)
	}
	if d := read.EndTime().Sub(read.StartTime()); d != 40*time.Millisecond {
		t.Errorf("readSkillMd lasts %v", d)
	}
	if a := attrs(read); a[AttrSkillStep].AsInt64() != 1 || a[AttrSkillTokens].AsInt64() != 120 || a[AttrSkillDisclosure].AsString() != "L2" || read.Status().Code == codes.Error {
		t.Errorf("readSkillMd %v %v", a, read.Status())
	}
	if a := attrs(run); run.Status().Code != codes.Error || a[AttrErrorType].AsString() != "tool_error" || !a[AttrSkillCached].AsBool() {
		t.Errorf("runScript %v %v", a, run.Status())
	}
	for _, s := range sr.Ended() {
		if strings.Contains(spanContent(s), secret) {
			t.Errorf("exported: %s", spanContent(s))
		}
	}
}
