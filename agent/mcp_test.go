package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// runner.mcpServers: an agent calls a tool of a streamable-HTTP MCP server
// as mcp__<server>__<tool>, under the same allowedTools rules.
func TestAgentCallsMCPTools(t *testing.T) {
	var calls atomic.Int64
	server := sdk.NewServer(&sdk.Implementation{Name: "calc", Version: "1"}, nil)
	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	sdk.AddTool(server, &sdk.Tool{Name: "add", Description: "adds a and b"}, func(ctx context.Context, req *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
		calls.Add(1)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
	})
	sdk.AddTool(server, &sdk.Tool{Name: "wipe", Description: "dangerous"}, func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
		calls.Add(100)
		return &sdk.CallToolResult{}, nil, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	ts := httptest.NewServer(h)
	defer ts.Close()

	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "mcpuser", "description": "uses MCP",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "DONE"},
    "mcpServers": {"calc": {"url": "` + ts.URL + `"}},
    "boundaries": {"allowedTools": ["mcp__calc__add"]}}}`,
		"steps_registry.json":            `{"agentId": "mcpuser", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "w", "c3": "s"}}}`,
		"prompts/steps/w/s/f_default.md": "Add 2 and 3.",
		"script.yaml": `turns:
  - tool_calls: [{name: mcp__calc__add, input: {a: 2, b: 3}}, {name: mcp__calc__wipe, input: {}}]
  - text: "2 + 3 = 5. DONE"
`,
	})
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	if !res.Success {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	used := toolCalls(t, res.Journal)
	if len(used) != 2 || used[0].Output != "5" || used[0].IsError {
		t.Fatalf("mcp__calc__add: %+v", used)
	}
	if !used[1].Denied || !strings.Contains(used[1].Output, "allowedTools") {
		t.Fatalf("mcp__calc__wipe was not denied: %+v", used[1])
	}
	if calls.Load() != 1 {
		t.Fatalf("server saw %d calls (the denied tool must never reach it)", calls.Load())
	}
}
