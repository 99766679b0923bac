// Command stdioserver is a tiny MCP server over stdio for tool/mcp's tests:
// "greet" returns a greeting that includes the GREETING env variable and
// the working directory's base name; "env" prints its environment; "die"
// exits mid-call; "read" returns a file's text; "dial" connects to a TCP
// address and returns what it reads; "fetch" GETs a URL through the proxy
// of HTTP_PROXY (even a loopback one, which Go's default client would
// reach directly).
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type pathIn struct {
	Path string `json:"path"`
}

type addrIn struct {
	Addr string `json:"addr"`
}

type urlIn struct {
	URL string `json:"url"`
}

// text is a tool result of one text.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "stdioserver", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "greets someone"}, func(ctx context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
		wd, _ := os.Getwd()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: os.Getenv("GREETING") + ", " + in.Name + " from " + filepath.Base(wd)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "prints the server's environment"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "die", Description: "exits the server mid-call"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "reads a file"}, func(ctx context.Context, req *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, any, error) {
		b, err := os.ReadFile(in.Path)
		if err != nil {
			return text("read failed: " + err.Error()), nil, nil
		}
		return text(string(b)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "dial", Description: "connects to a TCP address"}, func(ctx context.Context, req *mcp.CallToolRequest, in addrIn) (*mcp.CallToolResult, any, error) {
		c, err := net.DialTimeout("tcp", in.Addr, 5*time.Second)
		if err != nil {
			return text("dial failed: " + err.Error()), nil, nil
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", in.Addr)
		b, _ := io.ReadAll(c)
		return text(string(b)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fetch", Description: "GETs a URL through HTTP_PROXY"}, func(ctx context.Context, req *mcp.CallToolRequest, in urlIn) (*mcp.CallToolResult, any, error) {
		client := &http.Client{Timeout: 10 * time.Second}
		if p := os.Getenv("HTTP_PROXY"); p != "" {
			u, err := url.Parse(p)
			if err != nil {
				return text("bad HTTP_PROXY: " + err.Error()), nil, nil
			}
			client.Transport = &http.Transport{Proxy: http.ProxyURL(u)}
		}
		resp, err := client.Get(in.URL)
		if err != nil {
			return text("fetch failed: " + err.Error()), nil, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return text(resp.Status + ": " + string(b)), nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
