package completion_test

import (
	"context"
	"fmt"

	"github.com/capstan-dev/capstan/completion"
	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verify"
)

func ExampleRenderTemplate() {
	r, _ := completion.RenderTemplate("{{#each failedTests}}- {{this.name}}: {{this.error}}\n{{/each}}", map[string]any{
		"failedTests": []verify.TestFailure{{Name: "TestParse", Error: `got <nil>, want "a & b"`}},
	})
	fmt.Print(r.Text)
	// Output: - TestParse: got <nil>, want "a & b"
}

func ExampleFromConfig() {
	h, _ := completion.FromConfig(config.Completion{Type: "composite", Mode: "any", Conditions: []config.Completion{
		{Type: "keyword", Name: "said-done", Keyword: "TASK_COMPLETE"},
		{Type: "iterationBudget", Name: "budget", MaxIterations: 5},
	}}, completion.Deps{})
	s := &event.IterationSummary{Iteration: 2, AssistantResponses: []string{"All tests pass. TASK_COMPLETE"}}
	r, _ := h.Check(context.Background(), completion.Context{Iteration: 2, Summary: s})
	fmt.Println(r.Complete, r.Reason)
	// Output: true any: said-done (completion keyword "TASK_COMPLETE" found in the response)
}
