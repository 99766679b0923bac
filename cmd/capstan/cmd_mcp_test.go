package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcp list connects to a real (loopback, streamable HTTP) MCP server the
// agent declares and lists its tools under the names the model sees.
func TestMCPListShowsEachServersTools(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "search", Description: "finds notes by text"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{}, nil, nil
	})
	sdk.AddTool(server, &sdk.Tool{Name: "notes.read", Description: "reads one note"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{}, nil, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	defer ts.Close()

	dir := copyHelloWithoutModel(t)
	p := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(p)
	s := strings.Replace(string(b), `"runner": {`, `"runner": {"mcpServers": {"notes": {"url": "`+ts.URL+`"}},`, 1)
	os.WriteFile(p, []byte(s), 0o644)

	code, out, errOut := captureConfigCLI(t, "mcp", "list", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"notes: 2 tools", "mcp__notes__search", "finds notes by text", "mcp__notes__notes_read", "reads one note"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q:\n%s", want, out)
		}
	}
	// An unreachable server is an internal error naming it.
	ts.Close()
	code, _, errOut = captureConfigCLI(t, "mcp", "list", dir)
	if code != exitInternal || !strings.Contains(errOut, "notes") {
		t.Fatalf("unreachable server: exit %d\n%s", code, errOut)
	}
	// An agent without servers says so.
	code, _, errOut = captureConfigCLI(t, "mcp", "list", "../../examples/hello")
	if code != 0 || !strings.Contains(errOut, "declares no MCP servers") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
}
