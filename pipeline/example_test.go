package pipeline_test

import (
	"context"
	"fmt"

	"github.com/capstan-dev/capstan/pipeline"
)

// MyCustomAgent is a minimal custom stage: it reads the intents and writes
// a count of them into the key it promises.
type MyCustomAgent struct{}

func (MyCustomAgent) AgentID() string          { return "my_custom_agent" }
func (MyCustomAgent) Preconditions() []string  { return []string{"reasoning.intents"} }
func (MyCustomAgent) Postconditions() []string { return []string{"custom.output"} }

func (MyCustomAgent) Execute(ctx context.Context, ac *pipeline.AgentContext) (*pipeline.AgentContext, error) {
	var intents []string
	if err := ac.Decode("reasoning.intents", &intents); err != nil {
		return nil, err
	}
	if err := ac.Set("custom.output", fmt.Sprintf("%d intents", len(intents))); err != nil {
		return nil, err
	}
	return ac, nil
}

func Example() {
	m := pipeline.NewReasoningManager(pipeline.Config{Options: pipeline.DefaultExecutionOptions()})
	_ = m.RegisterAgent(&pipeline.FuncAgent{
		ID:   "intent_detection",
		Post: []string{"reasoning.intents", "reasoning.entities"},
		Declared: []pipeline.KeySpec{
			{Name: "reasoning.entities", Type: pipeline.TypeObject, AllowEmpty: true},
		},
		Fn: func(ctx context.Context, ac *pipeline.AgentContext) error {
			if err := ac.Set("reasoning.intents", []string{"activity_summary"}); err != nil {
				return err
			}
			return ac.Set("reasoning.entities", map[string]any{})
		},
	})
	_ = m.RegisterAgent(MyCustomAgent{})

	in := pipeline.NewAgentContext("session-1", "trace-1")
	_ = in.SetInput("request", "summarize development activity")
	out, err := m.Execute(context.Background(), in)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.String("custom.output"), "/", out.String("metadata.status"))
	// Output: 1 intents / completed
}

// A stage that writes outside its postconditions is stopped, with seed
// 003's wording.
func Example_namespaceViolation() {
	m := pipeline.New(pipeline.Config{Options: pipeline.DefaultExecutionOptions()})
	_ = m.RegisterAgent(&pipeline.FuncAgent{
		ID:   "intent_detection",
		Post: []string{"reasoning.intents"},
		Fn: func(ctx context.Context, ac *pipeline.AgentContext) error {
			_ = ac.Set("reasoning.intents", []string{"x"})
			return ac.Set("enrichment.facts", []string{"forged"})
		},
	})
	_, err := m.Execute(context.Background(), nil)
	fmt.Println(err)
	// Output: NAMESPACE_VIOLATION: pipeline stopped: agent intent_detection: namespace violation: agent wrote to unauthorized key enrichment.facts; hint: see diagnostics.violations; run without fail_on_violation to continue past violations
}

// Broken key flow is reported before anything runs.
func Example_compileError() {
	m := pipeline.New(pipeline.Config{})
	_ = m.RegisterAgent(MyCustomAgent{})
	_, err := m.Compile()
	fmt.Println(err)
	// Output: PIPELINE_COMPILE: pipeline cannot run: stage my_custom_agent: precondition reasoning.intents is produced by no earlier stage or input; hint: fix the stage contracts or dependencies named above; nothing has run
}
