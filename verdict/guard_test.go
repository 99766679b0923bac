package verdict_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

// flag is a guard whose state a test sets.
type flag struct{ broken bool }

func (f *flag) Name() string { return "flag" }

func (f *flag) Check(context.Context) (event.ValidationResult, error) {
	if f.broken {
		return event.ValidationResult{Validator: "flag", Pattern: verify.PatternProtectedChanged,
			Params: map[string]any{"protectedFiles": []string{"modified: a_test.go"}}}, nil
	}
	return event.ValidationResult{Valid: true, Validator: "flag"}, nil
}

// A guard verifies a claim even when no validator is configured, and
// onFailure skip does not let its failure stand.
func TestGuardFailsVerificationAndIsNeverSkipped(t *testing.T) {
	ctx := context.Background()
	reg := agentdir.Registry{EntryStep: "work", Steps: map[string]agentdir.Step{
		"work": {StepID: "work", C2: "work", C3: "main", OnFailure: &agentdir.OnFailure{Action: "skip"}},
	}}
	m, err := verdict.NewMachine(new(reg), verdict.MachineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := &flag{broken: true}
	s, err := verdict.New(verdict.Config{Machine: m, Checker: verdict.NewChecker(verdict.CheckerConfig{}),
		Handler: &verdict.Keyword{Keyword: "DONE"}, Retries: verdict.NewRetryHandler(verdict.RetryConfig{}),
		Guards: []verdict.Guard{g}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Decide(ctx, verdict.Input{Iteration: 1, Summary: summary(1, "DONE", "")})
	if err != nil || v.Action != verdict.Retry || v.Retry.Pattern != verify.PatternProtectedChanged || v.Validation.Checked[0] != "flag" {
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

// runs is a verifier whose validator passes and prints out.
type runs struct{ out string }

func (r *runs) Validate(_ context.Context, conds []agentdir.CompletionCondition) (event.ValidationResult, error) {
	return event.ValidationResult{Valid: true, Checked: []string{conds[0].Validator},
		Runs: []event.ValidatorRun{{Validator: conds[0].Validator, Command: "go test -v ./...", Output: event.ValidatorOutput{Stdout: r.out}}}}, nil
}

// lost fails when the test validator printed no test result.
type lost struct{ seen []event.ValidatorRun }

func (l *lost) Name() string { return "lost" }

func (l *lost) CheckOutputs(_ context.Context, rs []event.ValidatorRun) (event.ValidationResult, error) {
	l.seen = rs
	for _, r := range rs {
		if !strings.Contains(r.Output.Stdout, "--- PASS") {
			return event.ValidationResult{Validator: "lost", Pattern: verify.PatternTestsNoneRun}, nil
		}
	}
	return event.ValidationResult{Valid: true, Validator: "lost"}, nil
}

// An output guard reads what the validators printed once they passed, and
// like a guard its failure is never let stand by onFailure skip.
func TestOutputGuardRunsAfterTheValidators(t *testing.T) {
	ctx := context.Background()
	reg := agentdir.Registry{EntryStep: "work", Steps: map[string]agentdir.Step{
		"work": {StepID: "work", C2: "work", C3: "main", OnFailure: &agentdir.OnFailure{Action: "skip"}},
	}}
	m, err := verdict.NewMachine(new(reg), verdict.MachineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := &runs{out: "ok  \texample.com/app\t0.001s\n"}
	g := &lost{}
	s, err := verdict.New(verdict.Config{Machine: m, Checker: verdict.NewChecker(verdict.CheckerConfig{}),
		Handler: &verdict.Keyword{Keyword: "DONE"}, Retries: verdict.NewRetryHandler(verdict.RetryConfig{}),
		Verifier: v, Validators: []string{"tests"}, OutputGuards: []verdict.OutputGuard{g}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Decide(ctx, verdict.Input{Iteration: 1, Summary: summary(1, "DONE", "")})
	if err != nil || d.Action != verdict.Retry || d.Retry.Pattern != verify.PatternTestsNoneRun ||
		!slices.Equal(d.Validation.Checked, []string{"tests", "lost"}) || len(g.seen) != 1 || g.seen[0].Validator != "tests" {
		t.Fatalf("%+v %v %+v", d, err, g.seen)
	}
	v.out = "--- PASS: TestAdd (0.00s)\nok  \texample.com/app\t0.001s\n"
	d, err = s.Decide(ctx, verdict.Input{Iteration: 2, Summary: summary(2, "DONE", "")})
	if err != nil || d.Action != verdict.Complete || !strings.HasSuffix(d.Reason, "verified by tests, lost") {
		t.Fatalf("%+v %v", d, err)
	}
}

// idle is an output guard with nothing to check.
type idle struct{}

func (idle) Name() string { return "idle" }

func (idle) CheckOutputs(context.Context, []event.ValidatorRun) (event.ValidationResult, error) {
	return event.ValidationResult{Valid: true}, nil
}

// An output guard that had nothing to check is not listed as verified.
func TestIdleOutputGuardIsNotListed(t *testing.T) {
	reg := agentdir.Registry{EntryStep: "work", Steps: map[string]agentdir.Step{"work": {StepID: "work", C2: "work", C3: "main"}}}
	m, err := verdict.NewMachine(new(reg), verdict.MachineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := verdict.New(verdict.Config{Machine: m, Checker: verdict.NewChecker(verdict.CheckerConfig{}),
		Handler: &verdict.Keyword{Keyword: "DONE"}, Retries: verdict.NewRetryHandler(verdict.RetryConfig{}),
		Verifier: &runs{out: "--- PASS: TestAdd (0.00s)\n"}, Validators: []string{"tests"}, OutputGuards: []verdict.OutputGuard{idle{}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Decide(context.Background(), verdict.Input{Iteration: 1, Summary: summary(1, "DONE", "")})
	if err != nil || d.Action != verdict.Complete || !strings.HasSuffix(d.Reason, "verified by tests") {
		t.Fatalf("%+v %v", d, err)
	}
}
