package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// TestRedactingCoversFailures: a wrapped tool's failure reaches the model
// and the journal as "tool X failed: <error>" (or the panic's value); a
// secret in that text is redacted like one in a result, and the error
// keeps its code.
func TestRedactingCoversFailures(t *testing.T) {
	const secret = "ghp_s3cr3t-value"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED]") }
	coded := agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true, "server said: bad credentials %s", secret)
	for name, run := range map[string]func(context.Context, json.RawMessage) (tool.Result, error){
		"error":       func(context.Context, json.RawMessage) (tool.Result, error) { return tool.Result{}, coded },
		"panic":       func(context.Context, json.RawMessage) (tool.Result, error) { panic("token " + secret) },
		"panic error": func(context.Context, json.RawMessage) (tool.Result, error) { panic(fmt.Errorf("token %s", secret)) },
		"result":      func(context.Context, json.RawMessage) (tool.Result, error) { return tool.Result{Content: secret}, nil },
	} {
		wrapped := tool.Redacting(fakeTool{name: "mcp_x", run: run}, redact)
		out := tool.Invoke(context.Background(), tool.Call{Name: "mcp_x", Input: json.RawMessage(`{}`), Tool: wrapped})
		if strings.Contains(out.Content, secret) || !strings.Contains(out.Content, "[REDACTED]") {
			t.Errorf("%s: %q", name, out.Content)
		}
	}
	_, err := tool.Redacting(fakeTool{name: "x", run: func(context.Context, json.RawMessage) (tool.Result, error) { return tool.Result{}, coded }}, redact).
		Run(context.Background(), nil)
	if !errors.Is(err, coded) || agenterr.CodeOf(err) != agenterr.CodeToolInput || strings.Contains(err.Error(), secret) {
		t.Errorf("err %v (code %s)", err, agenterr.CodeOf(err))
	}
}
