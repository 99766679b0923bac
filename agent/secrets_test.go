package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/config"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/builtin"
)

// keyInput is the input of the test tool that reads a variable.
type keyInput struct {
	Name string `json:"name"`
}

// TestCustomToolResultsAreRedacted: a Go tool from Config.Tools that hands
// back a secret variable's value (or fails with it, or panics with it)
// does not carry the value to the model, the journal or the result: its
// results pass the redaction of the built-in, MCP and skill tools.
func TestCustomToolResultsAreRedacted(t *testing.T) {
	const key = "sk-custom-tool-0123456789abcdef"
	t.Setenv("CUSTOM_TOOL_API_KEY", key)
	getenv := tool.Func("getenv", "Read a variable.", func(_ context.Context, in keyInput) (string, error) {
		return "value: " + os.Getenv(in.Name), nil
	}).WithKind(tool.KindRead)
	failing := tool.Func("fail", "Fail with a variable.", func(_ context.Context, in keyInput) (string, error) {
		return "", &probeError{os.Getenv(in.Name)}
	}).WithKind(tool.KindRead)
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE"}`, "", `turns:
  - tool_calls: [{name: getenv, input: {name: CUSTOM_TOOL_API_KEY}}, {name: fail, input: {name: CUSTOM_TOOL_API_KEY}}]
  - text: DONE
`)
	agentJSON := filepath.Join(dir, config.AgentFile)
	b, err := os.ReadFile(agentJSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agentJSON, []byte(strings.Replace(string(b), `["Write"]`, `["getenv", "fail"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(dir, goValues(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir, cfg.Tools = t.TempDir(), []tool.Tool{getenv, failing}
	res := runToEnd(t, cfg.Agent, cfg)
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	b, err = os.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), key) {
		t.Errorf("the journal holds the key")
	}
	if !strings.Contains(string(b), "value: "+builtin.Redacted) || !strings.Contains(string(b), "probe "+builtin.Redacted+" unreachable") {
		t.Errorf("the journal lacks the redacted result or error:\n%s", b)
	}
}
