package tool

// MCPServer declares one MCP server.
type MCPServer struct {
	Command string            `json:"command,omitempty"` // stdio transport
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"` // streamable HTTP transport
	Headers map[string]string `json:"headers,omitempty"`
}
