package verdict_test

import (
	"context"
	"fmt"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verdict"
	"github.com/capstan-dev/capstan/verify"
)

func ExampleRenderRetryTemplate() {
	r, _ := verdict.RenderRetryTemplate("{{#each failedTests}}- {{this.name}}: {{this.error}}\n{{/each}}", map[string]any{
		"failedTests": []verify.TestFailure{{Name: "TestParse", Error: `got <nil>, want "a & b"`}},
	})
	fmt.Print(r.Text)
	// Output: - TestParse: got <nil>, want "a & b"
}

func ExampleCompletionFromConfig() {
	h, _ := verdict.CompletionFromConfig(agentdir.Completion{Type: "composite", Mode: "any", Conditions: []agentdir.Completion{
		{Type: "keyword", Name: "said-done", Keyword: "TASK_COMPLETE"},
		{Type: "iterationBudget", Name: "budget", MaxIterations: 5},
	}}, verdict.HandlerDeps{})
	s := &event.IterationSummary{Iteration: 2, AssistantResponses: []string{"All tests pass. TASK_COMPLETE"}}
	r, _ := h.Check(context.Background(), verdict.CompletionContext{Iteration: 2, Summary: s})
	fmt.Println(r.Complete, r.Reason)
	// Output: true any: said-done (completion keyword "TASK_COMPLETE" found in the response)
}
