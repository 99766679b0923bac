// Package tool defines the tools a model can call and the policy that decides
// whether a call may run.
//
// A Tool is named as Claude Code names its tools (Read, Write, Edit, Bash,
// Glob, Grep; MCP tools as mcp__<server>__<tool>) so that allowedTools and
// permissionMode mean the same on every backend.
//
// Func makes a Tool from a Go function with a typed input, inferring the
// input schema from the Go type. Every call a tool loop handles passes a
// chain of Middleware (Enforce for the permission policy, Truncate for
// large results, journaling and streaming in package llm) ending in Invoke.
package tool

import (
	"context"
	"encoding/json"
)

// Spec is what a model is told about a tool.
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Kind classifies a tool for permission modes.
type Kind string

// Tool kinds. permissionMode "plan" allows only KindRead; "default" asks for
// KindEdit and KindExecute, which capstan (non-interactive) treats as denied
// unless allowedTools names the tool; "acceptEdits" allows KindEdit.
const (
	KindRead    Kind = "read"    // observes the work dir only (Read, Glob, Grep)
	KindEdit    Kind = "edit"    // changes files in the work dir (Write, Edit)
	KindExecute Kind = "execute" // runs processes or reaches outside (Bash, MCP tools)
)

// Tool is one callable tool.
type Tool interface {
	// Spec describes the tool to the model.
	Spec() Spec
	// Kind classifies the tool for permission modes.
	Kind() Kind
	// Run executes the call. A failure the model should see and react to
	// (bad input, file not found, command exit status) is returned as a
	// Result with IsError set, not as an error; a returned error means the
	// tool could not run at all and is also reported to the model as an
	// error result.
	Run(ctx context.Context, input json.RawMessage) (Result, error)
}

// Result is the outcome of a tool call as the model sees it.
type Result struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}
