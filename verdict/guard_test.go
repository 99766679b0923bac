package verdict_test

import (
	"context"
	"testing"

	"github.com/capstan-dev/capstan/completion"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/step"
	"github.com/capstan-dev/capstan/verdict"
)

// flag is a guard whose state a test sets.
type flag struct{ broken bool }

func (f *flag) Name() string { return "flag" }

func (f *flag) Check(context.Context) (completion.ValidationResult, error) {
	if f.broken {
		return completion.ValidationResult{Validator: "flag", Pattern: completion.PatternProtectedChanged,
			Params: map[string]any{"protectedFiles": []string{"modified: a_test.go"}}}, nil
	}
	return completion.ValidationResult{Valid: true, Validator: "flag"}, nil
}

// A guard verifies a claim even when no validator is configured, and
// onFailure skip does not let its failure stand.
func TestGuardFailsVerificationAndIsNeverSkipped(t *testing.T) {
	ctx := context.Background()
	reg := config.Registry{EntryStep: "work", Steps: map[string]config.Step{
		"work": {StepID: "work", C2: "work", C3: "main", OnFailure: &config.OnFailure{Action: "skip"}},
	}}
	m, err := step.NewMachine(reg, step.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := &flag{broken: true}
	s, err := verdict.New(verdict.Config{Machine: m, Checker: step.NewChecker(step.CheckerConfig{}),
		Handler: &completion.Keyword{Keyword: "DONE"}, Retries: completion.NewRetryHandler(completion.RetryConfig{}),
		Guards: []verdict.Guard{g}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Decide(ctx, verdict.Input{Iteration: 1, Summary: summary(1, "DONE", "")})
	if err != nil || v.Action != verdict.Retry || v.Retry.Pattern != completion.PatternProtectedChanged || v.Validation.Checked[0] != "flag" {
		t.Fatalf("%+v %v", v, err)
	}
	// Nothing claimed: the guard does not run, the run goes on.
	if v, err := s.Decide(ctx, verdict.Input{Iteration: 2, Summary: summary(2, "working", "")}); err != nil || v.Action != verdict.Continue || v.Validation != nil {
		t.Fatalf("%+v %v", v, err)
	}
	g.broken = false
	v, err = s.Decide(ctx, verdict.Input{Iteration: 3, Summary: summary(3, "DONE", "")})
	if err != nil || v.Action != verdict.Complete || v.Reason != "completion keyword \"DONE\" found in the response; verified by flag" {
		t.Fatalf("%+v %v", v, err)
	}
}

// CANNOT_COMPLETE stops the run before the format check and the step
// check read the output.
func TestCannotCompleteStopsBeforeTheFormatCheck(t *testing.T) {
	ev := &recorder{}
	s, m := stage(t, t.TempDir(), ev)
	// Move to "finish", the step with an output schema.
	if _, err := s.Decide(context.Background(), verdict.Input{Iteration: 1, Summary: summary(1, "WORKED", "")}); err != nil {
		t.Fatal(err)
	}
	v, err := s.Decide(context.Background(), verdict.Input{Iteration: 2, Summary: summary(2, "CANNOT_COMPLETE: the schema cannot describe the answer\nsee f.json", "")})
	if err != nil || v.Action != verdict.Stop || v.CompletionReason != verdict.ReasonCannotComplete || v.CannotComplete == nil ||
		v.CannotComplete.Evidence != "see f.json" || v.Err == nil {
		t.Fatalf("%+v %v", v, err)
	}
	if id, _ := m.Current(); id != "finish" {
		t.Fatalf("step %s", id)
	}
}
