package agentdir_test

import (
	"context"
	"fmt"

	"github.com/capstan-dev/capstan/agentdir"
)

func ExamplePromptResolver_Resolve() {
	r := agentdir.NewPromptResolver(agentdir.PromptConfig{AgentDir: "testdata/agent", SystemPath: "prompts/system.md"})
	ctx := context.Background()

	// prompts/steps/initial/issue/f_default.md
	res, err := r.Resolve(ctx, agentdir.PromptRef{C2: "initial", C3: "issue"}, map[string]string{"issue": "42"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(res.Text)
	fmt.Println(res.Frontmatter["stepId"], res.Variables)
	fmt.Println(res.Warnings)

	sys, _ := r.ResolveSystem(ctx, map[string]string{"agent_name": "iterator"})
	fmt.Print(sys.Text)

	_, err = r.Resolve(ctx, agentdir.PromptRef{C2: "../../etc", C3: "x"}, nil)
	fmt.Println(err != nil)
	// Output:
	// Work on issue #42 of {uv-repo}.
	// When every test passes, say TASK_COMPLETE.
	// initial.issue [issue repo]
	// [undefined variable {uv-repo} in prompts/steps/initial/issue/f_default.md left as-is]
	// You are iterator, an autonomous coding agent.
	// true
}

func ExamplePromptResolver_ResolveRetry() {
	r := agentdir.NewPromptResolver(agentdir.PromptConfig{AgentDir: "testdata/agent"})
	ctx := context.Background()

	rt, _ := r.ResolveRetry(ctx, "steps", "retry", "issue", "failed", "test-failed")
	fmt.Println(rt.Found, rt.Params)

	rt, _ = r.ResolveRetry(ctx, "steps", "retry", "issue", "failed", "git-dirty")
	fmt.Println(rt.Found, rt.Tried)
	fmt.Print(rt.Text)
	// Output:
	// true [failedTests errorOutput]
	// true [prompts/steps/retry/issue/f_failed_git-dirty.md prompts/steps/retry/issue/f_failed.md]
	// The last check failed ({{pattern}}). Fix the problem and try again.
}
