package agent_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	_ "github.com/capstan-dev/capstan/llm/script" // the offline script provider
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
)

// shoutInput is the input of the custom Go tool "shout"; its JSON Schema
// is inferred from the type.
type shoutInput struct {
	Text string `json:"text" jsonschema:"the text to shout"`
}

// An agent built from Go values, without an agent folder: one step (its
// inline prompt), a custom Go tool, and a command validator that checks
// the world. The scripted model replies (an offline stand-in for a real
// model) are an in-memory file. The model says DONE; capstan completes the
// run only when the command agrees.
func Example_embedding() {
	sandbox.Init() // first in main: sandboxed commands re-execute the program
	ctx := context.Background()
	shout := tool.Func("shout", "Upper-case a text.", func(_ context.Context, in shoutInput) (string, error) {
		return strings.ToUpper(in.Text), nil
	}).WithKind(tool.KindRead)
	work, _ := os.MkdirTemp("", "greeter-work")
	defer os.RemoveAll(work)

	res := agent.Run(ctx, agent.Config{
		Definition: &agentdir.Definition{Name: "greeter", Runner: agentdir.Runner{
			Completion: agentdir.Completion{Type: "keyword", Keyword: "DONE", Validators: []string{"loud"}},
			Boundaries: agentdir.Boundaries{AllowedTools: []string{"shout", "Write"}, PermissionMode: "acceptEdits"},
		}},
		Registry: &agentdir.Registry{Validators: map[string]agentdir.Validator{"loud": {Type: "command",
			Command: "grep -qx 'HELLO ADA' greeting.txt", FailurePattern: "file-not-exists"}}},
		Prompts: agent.Prompts{Steps: map[string]string{
			"greet": "Shout a greeting to Ada with the shout tool, write it to greeting.txt, then say DONE."}},
		Tools: []tool.Tool{shout},
		Model: "script:replies.yaml",
		Files: fstest.MapFS{"replies.yaml": {Data: []byte(`turns:
  - tool_calls: [{name: shout, input: {text: "hello ada"}}]
  - tool_calls: [{name: Write, input: {file_path: greeting.txt, content: "HELLO ADA"}}]
  - text: DONE
`)}},
		WorkDir: work,
	})
	// A Config that does not build says every problem, at its Go field.
	fmt.Println(res.Success, res.CompletionReason, res.Reason)
	// Output:
	// true completed completion keyword "DONE" found in the response; verified by loud
}
