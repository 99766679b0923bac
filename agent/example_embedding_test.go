package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	_ "github.com/capstan-dev/capstan/llm/script" // the offline script provider
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/verify"
)

// shoutInput is the input of the custom Go tool "shout"; its JSON Schema
// is inferred from the type.
type shoutInput struct {
	Text string `json:"text" jsonschema:"the text to shout"`
}

// shout is a custom Go tool: it upper-cases its input.
var shout = tool.Func("shout", "Upper-case a text.", func(_ context.Context, in shoutInput) (string, error) {
	return strings.ToUpper(in.Text), nil
}).WithKind(tool.KindRead)

// loudFile is a custom Go validator: greeting.txt must exist and be all
// upper case.
type loudFile struct{}

func (loudFile) Validate(_ context.Context, req verify.CustomRequest) (verify.CustomResult, error) {
	b, err := os.ReadFile(filepath.Join(req.WorkDir, "greeting.txt"))
	if err != nil || strings.ToUpper(string(b)) != string(b) {
		return verify.CustomResult{Output: verify.ValidatorOutput{Stderr: "greeting.txt is missing or not loud", ExitCode: 1}}, nil
	}
	return verify.CustomResult{Valid: true}, nil
}

// An agent built from Go values, without an agent folder: the definition,
// its step, the step's prompt, a custom tool and a custom validator are Go
// values; the scripted model replies (an offline stand-in for a real
// model) are an in-memory file. The model says DONE; capstan completes the
// run only when the Go validator agrees.
func Example_embedding() {
	ctx := context.Background()
	cfg := agent.Config{
		Definition: &agentdir.Definition{Version: "1.0.0", Name: "greeter", Description: "greets loudly",
			Parameters: map[string]agentdir.Parameter{"who": {Type: "string", Required: true}},
			Runner: agentdir.Runner{
				Model:      "script:script.yaml",
				Completion: agentdir.Completion{Type: "keyword", Keyword: "DONE", Validators: []string{"loud"}},
				Boundaries: agentdir.Boundaries{AllowedTools: []string{"shout", "Write"}, PermissionMode: "acceptEdits"},
				Budgets:    agentdir.Budgets{MaxIterations: 3},
			}},
		Registry: &agentdir.Registry{AgentID: "greeter", EntryStep: "greet",
			Steps: map[string]agentdir.Step{"greet": {StepID: "greet", C2: "greet", C3: "main", UVVariables: []string{"who"}}},
			Validators: map[string]agentdir.Validator{
				"loud": {Type: "custom", Handler: "loud-file", FailurePattern: "file-not-exists"}},
		},
		Prompts: agent.Prompts{Steps: map[string]string{
			"greet": "Shout a greeting to {uv-who} with the shout tool, write it to greeting.txt, then say DONE.",
		}},
		Files: fstest.MapFS{"script.yaml": {Data: []byte(`turns:
  - tool_calls: [{name: shout, input: {text: "hello ada"}}]
  - tool_calls: [{name: Write, input: {file_path: greeting.txt, content: "HELLO ADA"}}]
  - text: DONE
`)}},
		Tools:      []tool.Tool{shout},
		Validators: map[string]verify.CustomValidator{"loud-file": loudFile{}},
		Params:     map[string]string{"who": "Ada"},
	}
	cfg.WorkDir, _ = os.MkdirTemp("", "greeter-work")
	defer os.RemoveAll(cfg.WorkDir)

	a, err := agent.New(ctx, cfg) // validates the Go values: every problem, located
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := a.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	a.Run(ctx)
	res := a.Stop()
	fmt.Println(res.Success, res.CompletionReason, res.Reason)
	if err := res.Err(); errors.Is(err, agenterr.ErrValidationExhausted) {
		fmt.Println("the model said DONE but the greeting is not loud")
	}
	// Output:
	// true completed completion keyword "DONE" found in the response; verified by loud
}
