package verdict_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

// recorder keeps the stage's events.
type recorder struct{ types []string }

func (r *recorder) Emit(p event.Payload) {
	typ, _ := string(p.EventKind()), any(p)
	r.types = append(r.types, typ)
}

// schemas serves one compiled schema.
type schemas struct{ raw json.RawMessage }

func (s schemas) OutputSchema(agentdir.SchemaRef) (json.RawMessage, verify.SchemaValidator, error) {
	v, err := schema.Compile(s.raw)
	return s.raw, v, err
}

// stage builds a verdict stage over a two-step registry: "work" (keyword
// check WORKED → next "finish") and "finish" (outputSchemaRef), with the
// file validator out-exists verifying every completion in dir.
func stage(t *testing.T, dir string, ev *recorder) (*verdict.Stage, *verdict.Machine) {
	t.Helper()
	reg := agentdir.Registry{EntryStep: "work", Steps: map[string]agentdir.Step{
		"work": {StepID: "work", C2: "work", C3: "main", Check: &agentdir.StepCheck{Type: "keyword", Keywords: []string{"WORKED"},
			OnPass: agentdir.Transition{Next: "finish"}, OnFail: agentdir.Transition{Retry: true}}},
		"finish": {StepID: "finish", C2: "finish", C3: "main", OutputSchemaRef: &agentdir.SchemaRef{File: "f.json", Schema: "f"},
			OnFailure: &agentdir.OnFailure{Action: "retry", MaxAttempts: 2}},
	}, Validators: map[string]agentdir.Validator{"out-exists": {Type: "file", Path: "out.txt", FailurePattern: "file-not-exists"}}}
	m, err := verdict.NewMachine(new(reg), verdict.MachineOptions{Emitter: ev})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := verify.NewCompletionValidator(verify.ValidatorConfig{Validators: reg.Validators, WorkDir: dir, Emitter: ev})
	if err != nil {
		t.Fatal(err)
	}
	s, err := verdict.New(verdict.Config{
		Machine:    m,
		Checker:    verdict.NewChecker(verdict.CheckerConfig{}),
		Handler:    &verdict.Keyword{Keyword: "DONE"},
		Verifier:   verifier,
		Validators: []string{"out-exists"},
		Format:     verdict.NewFormatValidator(verdict.FormatConfig{Extract: schema.ExtractJSON}),
		Schemas:    schemas{json.RawMessage(`{"type":"object","required":["done"],"properties":{"done":{"type":"boolean"}}}`)},
		Retries:    verdict.NewRetryHandler(verdict.RetryConfig{}),
		Events:     ev,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

func summary(i int, text, structured string) *event.IterationSummary {
	return &event.IterationSummary{Iteration: i, AssistantResponses: []string{text}, StructuredOutput: json.RawMessage(structured)}
}

// TestDecideInOrder walks the four stages: a step check that moves on, a
// claim the world refutes (the step stays, the retry prompt is built, the
// transition is not committed), a format failure that stops before the
// step check and the validators run, and a verified completion.
func TestDecideInOrder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ev := &recorder{}
	s, m := stage(t, dir, ev)

	// 1. Step check passes: work → finish, nothing claimed, nothing verified.
	v, err := s.Decide(ctx, verdict.Input{Iteration: 1, Summary: summary(1, "WORKED", "")})
	if err != nil || v.Action != verdict.Continue || v.Validation != nil {
		t.Fatalf("%+v %v", v, err)
	}
	if id, _ := m.Current(); id != "finish" {
		t.Fatalf("step %s after a passing check", id)
	}

	// 2. Format first: invalid structured output is a format retry; the
	// claim in the text is not even looked at, no validator runs.
	ev.types = nil
	v, err = s.Decide(ctx, verdict.Input{Iteration: 2, Summary: summary(2, "DONE", `{"done":"yes"}`)})
	if err != nil || v.Action != verdict.Retry || v.Retry.Kind != "format" || v.Retry.Attempt != 1 || v.Retry.Max != 2 {
		t.Fatalf("%+v %v", v, err)
	}
	if strings.Join(ev.types, ",") != journal.RetryPrompt {
		t.Fatalf("events %v", ev.types)
	}

	// 3. A valid format and a claim, but out.txt is missing: retry with the
	// failure pattern's prompt, attempt 1 of 2.
	ev.types = nil
	v, err = s.Decide(ctx, verdict.Input{Iteration: 3, Summary: summary(3, "DONE", `{"done":true}`)})
	if err != nil || v.Action != verdict.Retry || v.Retry.Kind != "completion" || v.Retry.Pattern != "file-not-exists" ||
		v.Validation == nil || v.Validation.Valid || !strings.Contains(v.Reason, "attempt 1 of 2 failed") {
		t.Fatalf("%+v %v", v, err)
	}
	if strings.Join(ev.types, ",") != "validator.result,completion.check,retry.prompt" {
		t.Fatalf("events %v", ev.types)
	}

	// 4. The world agrees: complete, verified.
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err = s.Decide(ctx, verdict.Input{Iteration: 4, Summary: summary(4, "DONE", `{"done":true}`)})
	if err != nil || v.Action != verdict.Complete || !strings.Contains(v.Reason, "verified by out-exists") {
		t.Fatalf("%+v %v", v, err)
	}
}

// TestFailedVerificationLeavesTheStepAlone: a step check that would move
// the machine is not committed when the claim of the same iteration fails
// verification.
func TestFailedVerificationLeavesTheStepAlone(t *testing.T) {
	ev := &recorder{}
	s, m := stage(t, t.TempDir(), ev)
	before := m.Snapshot()
	v, err := s.Decide(context.Background(), verdict.Input{Iteration: 1, Summary: summary(1, "WORKED and DONE", "")})
	if err != nil || v.Action != verdict.Retry || len(v.Moves) != 1 || v.Moves[0].To != "finish" {
		t.Fatalf("%+v %v", v, err)
	}
	after := m.Snapshot()
	if after.Current != before.Current || after.Visits["finish"] != 0 {
		t.Fatalf("the machine moved: %+v", after)
	}
	for _, typ := range ev.types {
		if typ == journal.StepTransition {
			t.Fatal("an uncommitted transition was journaled")
		}
	}
}
