// Package llm is where a model call happens: the Bridge interface the
// loop talks to, the message types of a chat transcript, the Model
// interface of one API turn, the provider registry, capstan's own tool
// loop, the retry policy and request timeouts, model prices and limits, and
// context compaction.
//
// Providers register themselves like database/sql drivers (in an init
// function of their package) and are chosen with a "provider:model" string,
// e.g. "anthropic:claude-sonnet-4-5", "openai:gpt-4.1", "script:script.yaml",
// "claude-code".
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/capstan-dev/capstan/event"

	"github.com/capstan-dev/capstan/tool"
)

// ToolInput makes a model's tool-call arguments a JSON value: "{}" when
// there are none, the arguments when they are JSON, and otherwise the
// arguments as a JSON string. Models (local ones especially, or one cut
// off at the output token limit) sometimes write arguments that are not
// JSON; kept as a string, the transcript and the journal stay valid JSON
// and the tool answers with an input error the model can correct.
func ToolInput(args json.RawMessage) json.RawMessage {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		return json.RawMessage(`{}`)
	}
	if json.Valid(args) {
		return args
	}
	b, _ := json.Marshal(string(args))
	return b
}

// BilledError is the error of a model turn that was billed although it
// failed: a provider whose attempts failed after the model had started
// answering (a stream that broke after its first event) reports their
// usage this way, so that budgets and the run's totals count it. It
// unwraps to Err, whose code and message it keeps.
type BilledError struct {
	Err   error
	Usage event.Usage
	// Unreported counts the attempts the provider billed without
	// reporting their usage (Response.UnreportedAttempts).
	Unreported int
}

func (e *BilledError) Error() string { return e.Err.Error() }
func (e *BilledError) Unwrap() error { return e.Err }

// WithBilled adds billed, the usage of a turn's failed attempts, and
// unreported, how many of them were billed without a usage report, to
// the outcome of the turn: to the answer, or, when every attempt failed,
// to the error (a BilledError), so that what the provider billed is
// counted either way.
func WithBilled(resp *Response, err error, billed event.Usage, unreported int) (*Response, error) {
	switch {
	case err == nil:
		resp.Usage.Add(billed)
		resp.UnreportedAttempts += unreported
	case billed != (event.Usage{}) || unreported > 0:
		err = &BilledError{Err: err, Usage: billed, Unreported: unreported}
	}
	return resp, err
}

// BilledUnreported returns how many billed attempts without a usage
// report err carries (a BilledError in its chain), or zero.
func BilledUnreported(err error) int {
	var b *BilledError
	if errors.As(err, &b) {
		return b.Unreported
	}
	return 0
}

// BilledUsage returns the usage err carries (a BilledError in its chain),
// or zero.
func BilledUsage(err error) event.Usage {
	var b *BilledError
	if errors.As(err, &b) {
		return b.Usage
	}
	return event.Usage{}
}

// Request is one model turn.
type Request struct {
	Model    string
	System   string
	Messages []event.Message
	Tools    []tool.Spec
	// OutputSchema, when set, asks the model for a final answer that is JSON
	// matching this (self-contained) schema.
	OutputSchema     json.RawMessage
	OutputSchemaName string
	MaxTokens        int
	// Temperature, when set, is the sampling temperature (skill runs ask
	// for 0 so their answers repeat). nil leaves the provider's default.
	Temperature *float64
	// Seed, when set, asks for deterministic sampling where the provider
	// supports it (OpenAI-compatible servers); providers without seeds
	// ignore it.
	Seed *int64
	// Summary marks a request that asks for a summary of older turns
	// (context compaction, Compactor). API providers send it like any
	// other; the script provider answers it itself instead of using up a
	// scripted turn, since scripts describe the agent's turns.
	Summary bool
}

// Response is the model's answer to one Request.
type Response struct {
	Message          event.Message   // RoleAssistant: text and/or tool calls
	StructuredOutput json.RawMessage // set when the provider returned schema-constrained JSON
	StopReason       string          // "end_turn", "tool_use", "max_tokens", ...
	Usage            event.Usage
	Model            string
	// UnreportedAttempts counts the turn's failed attempts before this
	// answer that the provider billed without reporting their usage: an
	// OpenAI-compatible stream that broke after its first chunk and
	// before its usage chunk (the server reports a response's usage only
	// there). Usage misses their input and output tokens.
	UnreportedAttempts int
}

// Model is one chat turn against a model API. Providers that speak an HTTP
// API (Anthropic, OpenAI) and the script provider implement Model; capstan's
// shared tool loop turns a Model into a Bridge.
type Model interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// QueryOptions are the options of one Bridge.Query.
type QueryOptions struct {
	// SessionID continues that session; "" starts a new one. The result
	// names the session the query ran in.
	SessionID    string
	SystemPrompt string
	AllowedTools []string // allowedTools patterns, e.g. "Read", "Bash(git log:*)"
	// DisallowedTools are patterns that deny calls whatever else allows
	// them (runner.boundaries.disallowedTools).
	DisallowedTools []string
	PermissionMode  string // default | acceptEdits | plan | bypassPermissions
	OutputSchema    json.RawMessage
	OutputName      string
	MaxTurns        int // model turns within this query; 0 = provider default
	// Boundary, when set, refuses Bash commands that perform GitHub
	// boundary actions (tool.BoundaryCommand); the text says why the
	// step may not (tool.Policy.Boundary).
	Boundary string
	// Instructions marks the prompt as the current step's instructions
	// (not a retry prompt): context compaction never removes the newest
	// such prompt of a session.
	Instructions bool
}

// Bridge sends one prompt to a model backend and returns its answer, tool
// calls, usage and session (climpt calls it SdkBridge).
//
// Query sends prompt within the session named by opts.SessionID (or a new
// one) and returns the session id to pass next time. SessionID returns the
// id of the last query, or "" before any query. Errors are *agenterr.Error
// with codes SDK_CONNECTION, SDK_RATE_LIMIT (both recoverable), SDK_AUTH,
// SDK_REQUEST, MAX_TURNS or SCRIPT_EXHAUSTED.
type Bridge interface {
	Query(ctx context.Context, prompt string, opts QueryOptions) (*event.QueryResult, error)
	SessionID() string
	Close() error
}
