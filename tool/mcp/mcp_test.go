package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/anthropic"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/mcp"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

// calcServer is a real go-sdk server with an "add" tool, a failing tool
// and a tool whose name needs sanitising.
func calcServer(calls *atomic.Int64) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "calc", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "adds a and b"}, func(ctx context.Context, req *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
		calls.Add(1)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail"}, func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("disk on fire")
	})
	sdk.AddTool(s, &sdk.Tool{Name: "files.list", Description: "lists"}, func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.ImageContent{MIMEType: "image/png", Data: []byte{1, 2}}}}, nil, nil
	})
	return s
}

func inMemory(t *testing.T, calls *atomic.Int64) sdk.Transport {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := calcServer(calls).Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return ct
}

func find(tools []tool.Tool, name string) tool.Tool {
	for _, t := range tools {
		if t.Spec().Name == name {
			return t
		}
	}
	return nil
}

func TestInMemoryServerToolsAndCalls(t *testing.T) {
	var calls atomic.Int64
	set, err := mcp.ConnectWith(context.Background(), nil, mcp.Options{Transports: map[string]sdk.Transport{"calc": inMemory(t, &calls)}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	tools := set.Tools()
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Spec().Name)
		if tl.Kind() != tool.KindExecute {
			t.Errorf("%s kind = %s", tl.Spec().Name, tl.Kind())
		}
	}
	if strings.Join(names, ",") != "mcp__calc__add,mcp__calc__fail,mcp__calc__files_list" {
		t.Fatalf("tools = %v", names)
	}
	add := find(tools, "mcp__calc__add")
	var schema map[string]any
	if err := json.Unmarshal(add.Spec().InputSchema, &schema); err != nil || schema["type"] != "object" || schema["properties"] == nil {
		t.Fatalf("schema = %s", add.Spec().InputSchema)
	}
	res, err := add.Run(context.Background(), json.RawMessage(`{"a":40,"b":2}`))
	if err != nil || res.Content != "42" || res.IsError {
		t.Fatalf("add = %+v, %v", res, err)
	}
	res, err = find(tools, "mcp__calc__fail").Run(context.Background(), json.RawMessage(`{}`))
	if err != nil || !res.IsError || !strings.Contains(res.Content, "disk on fire") {
		t.Fatalf("fail = %+v, %v", res, err)
	}
	res, err = find(tools, "mcp__calc__files_list").Run(context.Background(), nil)
	if err != nil || res.Content != "a\n[image image/png, 2 bytes]" {
		t.Fatalf("files.list = %+v, %v", res, err)
	}
	res, err = add.Run(context.Background(), json.RawMessage(`[1,2]`))
	if err != nil || !res.IsError {
		t.Fatalf("non-object input = %+v, %v", res, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("add ran %d times", calls.Load())
	}
}

func TestPolicyGovernsMCPTools(t *testing.T) {
	var calls atomic.Int64
	set, err := mcp.ConnectWith(context.Background(), nil, mcp.Options{Transports: map[string]sdk.Transport{"calc": inMemory(t, &calls)}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	add := find(set.Tools(), "mcp__calc__add")
	in := json.RawMessage(`{"a":1,"b":1}`)
	for _, tc := range []struct {
		p    tool.Policy
		want bool
	}{
		{tool.Policy{}, false},
		{tool.Policy{Mode: tool.ModePlan, Allowed: []string{"mcp__calc__*"}}, false},
		{tool.Policy{Allowed: []string{"mcp__calc__*"}}, true},
		{tool.Policy{Allowed: []string{"mcp__calc__add"}}, true},
		{tool.Policy{Allowed: []string{"mcp__other__*"}}, false},
		{tool.Policy{Mode: tool.ModeBypassPermissions, Disallowed: []string{"mcp__calc__add"}}, false},
	} {
		if got := tc.p.Decide(add, in).Allowed; got != tc.want {
			t.Errorf("%+v: allowed = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestToolLoopCallsMCPToolThroughARealClient(t *testing.T) {
	var calls atomic.Int64
	set, err := mcp.ConnectWith(context.Background(), nil, mcp.Options{Transports: map[string]sdk.Transport{"calc": inMemory(t, &calls)}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		if len(r.LastToolResults) > 0 {
			return fakellm.Reply{Text: "sum=" + r.LastToolResults[0]}
		}
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "mcp__calc__add", Input: json.RawMessage(`{"a":20,"b":22}`)}}}
	}})
	m, err := anthropic.New(anthropic.Config{APIKey: "k-test", BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	loop := llm.NewToolLoop(m, llm.Config{Tools: set.Tools()})
	res, err := loop.Query(context.Background(), "add", llm.QueryOptions{AllowedTools: []string{"mcp__calc__*"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Responses[len(res.Responses)-1] != "sum=42" || calls.Load() != 1 {
		t.Fatalf("res = %+v", res)
	}
	// Without the allow pattern the call is denied and never reaches the server.
	res, err = loop.Query(context.Background(), "add", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || len(srv.Requests()[2].Request.Tools) != 0 {
		t.Fatalf("denied tool was offered or ran: calls=%d tools=%v", calls.Load(), srv.Requests()[2].Request.Tools)
	}
}

func TestStreamableHTTPServerWithHeaders(t *testing.T) {
	var calls atomic.Int64
	server := calcServer(&calls)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	var badAuth atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			badAuth.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	set, err := mcp.ConnectWith(context.Background(), map[string]tooldecl.MCPServer{
		"web": {URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer tok"}},
	}, mcp.Options{HTTPClient: ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := find(set.Tools(), "mcp__web__add").Run(context.Background(), json.RawMessage(`{"a":2,"b":3}`))
	if err != nil || res.Content != "5" {
		t.Fatalf("add = %+v, %v", res, err)
	}
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
	if badAuth.Load() != 0 {
		t.Fatalf("%d requests without the configured header", badAuth.Load())
	}
	// Without the header the connection fails with a coded, located error.
	_, err = mcp.ConnectWith(context.Background(), map[string]tooldecl.MCPServer{"web": {URL: ts.URL}}, mcp.Options{HTTPClient: ts.Client()})
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeDependencyResolution || e.Pointer != "/runner/mcpServers/web" || e.Hint == "" {
		t.Fatalf("err = %v", err)
	}
}

func TestStdioServerBuiltByTheTest(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "stdioserver")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/stdioserver").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	work := filepath.Join(t.TempDir(), "workdir-x")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCP_TEST_API_KEY", "sk-mcp-secret-0123456789")
	t.Setenv("MCP_UNLISTED", "not-for-servers")
	set, err := mcp.ConnectWith(context.Background(), map[string]tooldecl.MCPServer{
		"greeter": {Command: bin, Env: map[string]string{"GREETING": "Hej"}},
	}, mcp.Options{WorkDir: work, Env: []string{"MCP_TEST_API_KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Servers(); len(got) != 1 || got[0] != "greeter" {
		t.Fatalf("servers = %v", got)
	}
	res, err := find(set.Tools(), "mcp__greeter__greet").Run(context.Background(), json.RawMessage(`{"name":"Ada"}`))
	if err != nil || res.Content != "Hej, Ada from workdir-x" {
		t.Fatalf("greet = %+v, %v", res, err)
	}
	// The server gets the minimal base plus the allow-list; a secret it
	// was given on purpose and echoes back is redacted in the result.
	res, err = find(set.Tools(), "mcp__greeter__env").Run(context.Background(), json.RawMessage(`{}`))
	if err != nil || !strings.Contains(res.Content, "MCP_TEST_API_KEY=[REDACTED]") || strings.Contains(res.Content, "sk-mcp-secret") ||
		strings.Contains(res.Content, "MCP_UNLISTED") || !strings.Contains(res.Content, "GREETING=Hej") {
		t.Fatalf("env = %+v, %v", res, err)
	}
	// A server that dies mid-call fails the call with an error the model
	// reads, without hanging; it is restarted once, so its tools work
	// again; a second crash leaves its tools failing; Notes say which.
	die := func() tool.Result {
		t.Helper()
		done := make(chan tool.Result, 1)
		go func() {
			res, err := find(set.Tools(), "mcp__greeter__die").Run(context.Background(), json.RawMessage(`{}`))
			if err != nil {
				t.Errorf("a crash is a Go error, not a result the model sees: %v", err)
			}
			done <- res
		}()
		select {
		case res := <-done:
			return res
		case <-time.After(20 * time.Second):
			t.Fatal("call to a dying server hangs")
		}
		return tool.Result{}
	}
	if res := die(); !res.IsError || !strings.Contains(res.Content, "stopped during this call") || !strings.Contains(res.Content, "was restarted") {
		t.Fatalf("first crash: %+v", res)
	}
	if res, err := find(set.Tools(), "mcp__greeter__greet").Run(context.Background(), json.RawMessage(`{"name":"Bo"}`)); err != nil || res.Content != "Hej, Bo from workdir-x" {
		t.Fatalf("greet after the restart = %+v, %v", res, err)
	}
	if res := die(); !res.IsError || !strings.Contains(res.Content, "unavailable") {
		t.Fatalf("second crash: %+v", res)
	}
	if res, err := find(set.Tools(), "mcp__greeter__greet").Run(context.Background(), json.RawMessage(`{"name":"Bo"}`)); err != nil || !res.IsError || !strings.Contains(res.Content, "could not be restarted") {
		t.Fatalf("greet after the second crash = %+v, %v", res, err)
	}
	if notes := set.Notes(); len(notes) != 2 || !strings.Contains(notes[0], "was restarted once") || !strings.Contains(notes[1], "not restarted twice") {
		t.Fatalf("notes %q", notes)
	}
	_ = set.Close()
	if _, err := find(set.Tools(), "mcp__greeter__greet").Run(context.Background(), json.RawMessage(`{"name":"x"}`)); err == nil {
		t.Fatal("call after Close succeeded")
	}
}

func TestBadServerConfigs(t *testing.T) {
	for name, cfg := range map[string]tooldecl.MCPServer{
		"empty":     {},
		"both":      {Command: "x", URL: "http://127.0.0.1:1"},
		"bad__name": {Command: "x"},
		"missing":   {Command: filepath.Join(t.TempDir(), "no-such-server")},
	} {
		_, err := mcp.Connect(context.Background(), map[string]tooldecl.MCPServer{name: cfg})
		e := agenterr.From(err)
		if e == nil || e.Code != agenterr.CodeDependencyResolution || e.Pointer != "/runner/mcpServers/"+name || e.File != agentdir.AgentFile {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestToolNameSanitised(t *testing.T) {
	if got := mcp.ToolName("s", "a.b/c d"); got != "mcp__s__a_b_c_d" {
		t.Fatal(got)
	}
	if got := mcp.ToolName("s", strings.Repeat("x", 100)); len(got) != 64 {
		t.Fatal(len(got))
	}
}

func TestCollidingToolNamesStayDistinct(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "dup", Version: "1"}, nil)
	for _, n := range []string{"a.b", "a_b", "a b"} {
		n := n
		sdk.AddTool(srv, &sdk.Tool{Name: n}, func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: n}}}, nil, nil
		})
	}
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	set, err := mcp.ConnectWith(context.Background(), nil, mcp.Options{Transports: map[string]sdk.Transport{"dup": ct}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	seen := map[string]string{}
	for _, tl := range set.Tools() {
		res, err := tl.Run(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[tl.Spec().Name]; ok {
			t.Fatalf("%s names both %s and %s", tl.Spec().Name, prev, res.Content)
		}
		seen[tl.Spec().Name] = res.Content
	}
	if len(seen) != 3 {
		t.Fatalf("tools = %v", seen)
	}
	remotes := map[string]bool{}
	for _, v := range seen {
		remotes[v] = true
	}
	if len(remotes) != 3 {
		t.Fatalf("a remote tool is unreachable: %v", seen)
	}
}

func TestHangingToolHonoursCancellation(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "slow", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "wait"}, func(ctx context.Context, req *sdk.CallToolRequest, in struct{}) (*sdk.CallToolResult, any, error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	set, err := mcp.ConnectWith(context.Background(), nil, mcp.Options{Transports: map[string]sdk.Transport{"slow": ct}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := find(set.Tools(), "mcp__slow__wait").Run(ctx, json.RawMessage(`{}`)); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("cancellation did not reach the call")
	}
}
