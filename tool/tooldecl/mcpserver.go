package tooldecl

// MCPServer declares one MCP server.
type MCPServer struct {
	Command string            `json:"command,omitempty"` // stdio transport
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"` // streamable HTTP transport
	Headers map[string]string `json:"headers,omitempty"`
	// Idempotent declares that every tool of the server may be called
	// again with the same input without harm: a call a killed run had
	// started is run again on resume instead of being reported to the
	// model as interrupted.
	Idempotent bool `json:"idempotent,omitempty"`
}
