// Package script is capstan's offline model provider: it replays a YAML file
// of scripted turns (text, tool calls, structured output, simulated errors)
// behind the same llm.Model interface as the API providers. It makes agent
// examples, tests and demos deterministic and runnable without a network or
// an API key.
//
// Importing the package registers the provider "script": the spec
// "script:<file>" names a file relative to the agent dir (absolute paths are
// allowed) and a bare "script" means "script.yaml".
//
// The file format:
//
//	turns:                     # consumed in order, one per model call
//	  - text: "I'll write the file."
//	    tool_calls:
//	      - name: Write
//	        input: {file_path: hello.txt, content: "hi\n"}
//	  - text: "Done. TASK_COMPLETE"
//	    usage: {input_tokens: 120, output_tokens: 8}
//	  - structured: {status: completed}
//	  - expect: {prompt_contains: ["test-failed"]}
//	    text: "fixing"
//	  - error: {type: rate_limit, retry_after_seconds: 1, message: "slow down"}
//
// Every problem in the file (unknown keys, a tool call without a name, an
// unknown error type) is reported when the file is loaded, with its
// line:column, before any model call.
package script

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
)

// DefaultFile is the script file used by a bare "script" model spec.
const DefaultFile = "script.yaml"

// MaxFileSize bounds the size of a script file.
const MaxFileSize = 8 << 20

// MaxExpandedNodes bounds the number of YAML nodes a script may have once
// its aliases are expanded.
const MaxExpandedNodes = yamlsafe.MaxNodes

// Simulated error types accepted in a turn's error.type.
const (
	ErrorRateLimit       = "rate_limit"
	ErrorOverloaded      = "overloaded"
	ErrorConnection      = "connection"
	ErrorAuth            = "auth"
	ErrorSessionNotFound = "session_not_found"
	ErrorServer          = "server"
)

// errorTypes lists the accepted simulated error types.
var errorTypes = []string{ErrorRateLimit, ErrorOverloaded, ErrorConnection, ErrorAuth, ErrorSessionNotFound, ErrorServer}

// Script is a parsed, validated script file.
type Script struct {
	// File is the name the script was loaded from (used in messages).
	File  string
	Turns []Turn
}

// Turn is one scripted model reply.
type Turn struct {
	Text      string
	ToolCalls []ToolCall
	// Structured is the JSON of the final answer's structured output, or nil.
	Structured json.RawMessage
	// Usage, when non-nil, is reported instead of an estimate.
	Usage *Usage
	// PromptContains are strings the last user message of the request must
	// contain.
	PromptContains []string
	// SystemContains are strings the request's system prompt must contain.
	SystemContains []string
	// Error, when non-nil, makes the call fail instead of replying.
	Error *SimulatedError
	// Line and Column locate the turn in File.
	Line, Column int
}

// ToolCall is one scripted tool call.
type ToolCall struct {
	Name  string
	Input json.RawMessage // a JSON object
}

// Usage is scripted token usage.
type Usage struct {
	InputTokens      int64 `yaml:"input_tokens"`
	OutputTokens     int64 `yaml:"output_tokens"`
	CacheReadTokens  int64 `yaml:"cache_read_tokens"`
	CacheWriteTokens int64 `yaml:"cache_write_tokens"`
}

// SimulatedError is a scripted provider failure.
type SimulatedError struct {
	Type              string  `yaml:"type"`
	RetryAfterSeconds float64 `yaml:"retry_after_seconds"`
	Message           string  `yaml:"message"`
}

// The raw YAML shapes, decoded strictly (unknown keys are errors).
type rawFile struct {
	Turns []rawTurn `yaml:"turns"`
}

type rawTurn struct {
	Text       *string         `yaml:"text"`
	ToolCalls  []rawToolCall   `yaml:"tool_calls"`
	Usage      *Usage          `yaml:"usage"`
	Structured any             `yaml:"structured"`
	Expect     *rawExpect      `yaml:"expect"`
	Error      *SimulatedError `yaml:"error"`
}

type rawToolCall struct {
	Name  string `yaml:"name"`
	Input any    `yaml:"input"`
}

type rawExpect struct {
	PromptContains []string `yaml:"prompt_contains"`
	SystemContains []string `yaml:"system_contains"`
}

// Load reads and parses a script file. name is the path shown in messages.
func Load(path, name string) (*Script, error) {
	return LoadFS(os.DirFS(filepath.Dir(path)), filepath.Base(path), name)
}

// LoadFS reads and parses the script file p of fsys (such as a pinned agent
// definition snapshot). name is the path shown in messages.
func LoadFS(fsys fs.FS, p, name string) (*Script, error) {
	st, err := fs.Stat(fsys, p)
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeConfigurationNotFound, agenterr.LayerConfiguration, false,
			"script file not found")
		e.File = name
		e.Hint = "create the file or point --model script:<file> at an existing one (relative to the agent dir)"
		return nil, e
	}
	if st.IsDir() {
		e := agenterr.New(agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false, "script path is a directory")
		e.File = name
		e.Hint = "name a YAML file: --model script:<file>"
		return nil, e
	}
	if st.Size() > MaxFileSize {
		e := agenterr.New(agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false,
			"script file is %d bytes; the limit is %d", st.Size(), MaxFileSize)
		e.File = name
		return nil, e
	}
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		e := agenterr.Wrap(err, agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false, "cannot read script file")
		e.File = name
		return nil, e
	}
	return Parse(name, data)
}

// Parse parses and validates script YAML. name is used in messages.
func Parse(name string, data []byte) (*Script, error) {
	if len(data) > MaxFileSize {
		return nil, parseErr(name, 0, 0, "script is %d bytes; the limit is %d", len(data), MaxFileSize)
	}
	tree, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlErr(name, err)
	}
	// Aliases are expanded when decoding; refuse documents whose expansion
	// would explode ("billion laughs") before decoding them.
	if err := yamlsafe.CheckTree(tree); err != nil {
		return nil, parseErr(name, 1, 1, "script expands to more than %d YAML nodes through aliases", MaxExpandedNodes)
	}
	var raw rawFile
	if err := decodeStrict(tree, &raw); err != nil {
		return nil, yamlErr(name, err)
	}
	pos := func(p string, args ...any) (int, int) { return position(tree, fmt.Sprintf(p, args...)) }

	if len(raw.Turns) == 0 {
		return nil, parseErr(name, 1, 1, "script has no turns; expected a top-level \"turns:\" list")
	}
	s := &Script{File: name, Turns: make([]Turn, 0, len(raw.Turns))}
	for i, rt := range raw.Turns {
		t, err := parseTurn(name, pos, i, rt)
		if err != nil {
			return nil, err
		}
		s.Turns = append(s.Turns, t)
	}
	return s, nil
}

// parseTurn checks and reads turn i of a script: its reply (text, tool
// calls, structured output) or the error it makes the model return.
func parseTurn(name string, pos func(p string, args ...any) (int, int), i int, rt rawTurn) (Turn, error) {
	line, col := pos("$.turns[%d]", i)
	t := Turn{Line: line, Column: col}
	n := i + 1
	if rt.Text != nil {
		t.Text = *rt.Text
	}
	if rt.Usage != nil {
		u := *rt.Usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 {
			l, c := pos("$.turns[%d].usage", i)
			return Turn{}, parseErr(name, l, c, "turn %d: usage token counts must not be negative", n)
		}
		t.Usage = &u
	}
	if rt.Expect != nil {
		for _, want := range rt.Expect.PromptContains {
			if want == "" {
				l, c := pos("$.turns[%d].expect", i)
				return Turn{}, parseErr(name, l, c, "turn %d: expect.prompt_contains has an empty string", n)
			}
		}
		for _, want := range rt.Expect.SystemContains {
			if want == "" {
				l, c := pos("$.turns[%d].expect", i)
				return Turn{}, parseErr(name, l, c, "turn %d: expect.system_contains has an empty string", n)
			}
		}
		t.PromptContains = rt.Expect.PromptContains
		t.SystemContains = rt.Expect.SystemContains
	}
	if rt.Error != nil {
		l, c := pos("$.turns[%d].error", i)
		if rt.Text != nil || len(rt.ToolCalls) > 0 || rt.Structured != nil || rt.Usage != nil {
			return Turn{}, parseErr(name, l, c, "turn %d: a turn with error cannot also reply (text, tool_calls, structured, usage)", n)
		}
		if !contains(errorTypes, rt.Error.Type) {
			return Turn{}, parseErr(name, l, c, "turn %d: unknown error type %q; expected one of %s", n, rt.Error.Type, strings.Join(errorTypes, ", "))
		}
		if rt.Error.RetryAfterSeconds < 0 {
			return Turn{}, parseErr(name, l, c, "turn %d: error.retry_after_seconds must not be negative", n)
		}
		e := *rt.Error
		t.Error = &e
		return t, nil
	}
	if rt.Text == nil && len(rt.ToolCalls) == 0 && rt.Structured == nil {
		return Turn{}, parseErr(name, line, col, "turn %d has no reply; give it text, tool_calls, structured or error", n)
	}
	if rt.Structured != nil {
		if len(rt.ToolCalls) > 0 {
			l, c := pos("$.turns[%d].structured", i)
			return Turn{}, parseErr(name, l, c, "turn %d: structured output is a final answer and cannot be combined with tool_calls", n)
		}
		js, err := toJSON(rt.Structured)
		if err != nil {
			l, c := pos("$.turns[%d].structured", i)
			return Turn{}, parseErr(name, l, c, "turn %d: structured is not representable as JSON: %v", n, err)
		}
		t.Structured = js
	}
	calls, err := parseToolCalls(name, pos, i, rt.ToolCalls)
	if err != nil {
		return Turn{}, err
	}
	t.ToolCalls = calls
	return t, nil
}

// parseToolCalls reads the tool calls of turn i: each has a name, and its
// input is a mapping.
func parseToolCalls(name string, pos func(p string, args ...any) (int, int), i int, raw []rawToolCall) ([]ToolCall, error) {
	n := i + 1
	var calls []ToolCall
	for j, rc := range raw {
		l, c := pos("$.turns[%d].tool_calls[%d]", i, j)
		if strings.TrimSpace(rc.Name) == "" {
			return nil, parseErr(name, l, c, "turn %d: tool call %d has no name", n, j+1)
		}
		input := json.RawMessage("{}")
		if rc.Input != nil {
			if _, ok := normalize(rc.Input).(map[string]any); !ok {
				return nil, parseErr(name, l, c, "turn %d: tool call %d (%s): input must be a mapping", n, j+1, rc.Name)
			}
			js, err := toJSON(rc.Input)
			if err != nil {
				return nil, parseErr(name, l, c, "turn %d: tool call %d (%s): input is not representable as JSON: %v", n, j+1, rc.Name, err)
			}
			input = js
		}
		calls = append(calls, ToolCall{Name: rc.Name, Input: input})
	}
	return calls, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// toJSON converts a decoded YAML value to JSON.
func toJSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(normalize(v))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// normalize turns YAML maps with non-string keys into JSON-compatible maps.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = normalize(val)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[fmt.Sprint(k)] = normalize(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = normalize(val)
		}
		return out
	default:
		return v
	}
}

// decodeStrict decodes the first document of tree (already parsed, so the
// text is not parsed twice) into v, rejecting unknown keys. The YAML
// decoder can panic on some malformed documents (found by FuzzScript, e.g.
// a tag on a value of the wrong kind); such a panic becomes an error.
func decodeStrict(tree *ast.File, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed YAML (decoder failure: %v)", r)
		}
	}()
	if len(tree.Docs) == 0 || tree.Docs[0].Body == nil {
		return nil
	}
	return yaml.NodeToValue(tree.Docs[0].Body, v, yaml.Strict())
}

// position returns the line and column of the node at a YAML path, or 0, 0.
func position(tree *ast.File, path string) (int, int) {
	if tree == nil {
		return 0, 0
	}
	p, err := yaml.PathString(path)
	if err != nil {
		return 0, 0
	}
	node, err := p.FilterFile(tree)
	if err != nil || node == nil {
		return 0, 0
	}
	// A mapping's own token is its first ':'; point at its first key.
	switch m := node.(type) {
	case *ast.MappingNode:
		if len(m.Values) > 0 && m.Values[0].Key != nil {
			node = m.Values[0].Key
		}
	case *ast.MappingValueNode:
		if m.Key != nil {
			node = m.Key
		}
	}
	tk := node.GetToken()
	if tk == nil || tk.Position == nil {
		return 0, 0
	}
	return tk.Position.Line, tk.Position.Column
}

func parseErr(name string, line, col int, format string, args ...any) error {
	e := agenterr.New(agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false, format, args...)
	e.File, e.Line, e.Column = name, line, col
	e.Hint = "see docs/script-provider.md for the script format"
	return e
}

// yamlErr converts a goccy/go-yaml error into a located CONFIG_PARSE error.
func yamlErr(name string, err error) error {
	e := agenterr.Wrap(nil, agenterr.CodeConfigurationParse, agenterr.LayerConfiguration, false, "invalid script")
	e.File = name
	e.Hint = "see docs/script-provider.md for the script format"
	var ye yaml.Error
	if errors.As(err, &ye) {
		e.Message = "invalid script: " + ye.GetMessage()
		if tk := ye.GetToken(); tk != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
		return e
	}
	e.Message = "invalid script: " + err.Error()
	return e
}
