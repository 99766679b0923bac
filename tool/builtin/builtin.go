// Package builtin provides capstan's built-in tools — Read, Write, Edit,
// Bash, Glob and Grep — named and shaped as Claude Code's tools, so that
// allowedTools patterns and permission modes mean the same on every backend.
//
// Every file tool is confined to the working directory: a path is resolved
// relative to it, and a ".." escape, an absolute path elsewhere or a
// symbolic link (to a file or through any parent directory) that leads
// outside is refused with a PATH_ESCAPE error result. File access goes
// through an os.Root opened at the working directory, so the confinement
// also holds against links swapped in between the check and the use.
// Writes are atomic (temporary file + rename) and keep the file's mode.
//
// Bash runs "bash -c" (or "sh -c") in the working directory through a
// tool.CommandRunner, with a scrubbed environment (no *_API_KEY, *_TOKEN,
// *_SECRET … variables unless Config.Env passes them), a timeout, and its
// whole process group killed on timeout, cancellation, or when the command
// returns.
package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// Defaults and limits.
const (
	// DefaultMaxOutputBytes caps a tool result when Config.MaxOutputBytes
	// is 0.
	DefaultMaxOutputBytes = 100 << 10
	// DefaultBashTimeout bounds a Bash command when Config.BashTimeout is 0
	// and the call gives no timeout.
	DefaultBashTimeout = 120 * time.Second
	// MaxBashTimeout is the longest a Bash command may run.
	MaxBashTimeout = 600 * time.Second
	// DefaultReadLimit is how many lines Read returns when no limit is given.
	DefaultReadLimit = 2000
	// MaxLineLength is how many bytes of one line Read and Grep show.
	MaxLineLength = 2000
	// MaxEditFileSize is the largest file Edit will change.
	MaxEditFileSize = 32 << 20
	// MaxGlobResults is how many paths Glob lists.
	MaxGlobResults = 100
)

// Tool names.
const (
	NameRead  = "Read"
	NameWrite = "Write"
	NameEdit  = "Edit"
	NameBash  = "Bash"
	NameGlob  = "Glob"
	NameGrep  = "Grep"
)

// toolNames lists the built-in tools in the order New returns them.
var toolNames = []string{NameRead, NameWrite, NameEdit, NameBash, NameGlob, NameGrep}

// Names lists the built-in tools in the order New returns them.
// It returns a copy: changing it changes nothing else.
func Names() []string {
	return slices.Clone(toolNames)
}

// Config configures the built-in tools.
type Config struct {
	// WorkDir is the directory the tools act in and are confined to. It
	// must exist.
	WorkDir string
	// Runner runs Bash commands; nil means ExecRunner (no sandbox).
	Runner tool.CommandRunner
	// MaxOutputBytes caps each tool result (0 = DefaultMaxOutputBytes).
	MaxOutputBytes int
	// BashTimeout is the default Bash timeout (0 = DefaultBashTimeout; at
	// most MaxBashTimeout).
	BashTimeout time.Duration
	// Env is the allow-list of variables passed to Bash commands besides
	// the minimal base (see BuildEnv): "KEY=value" sets a value, a bare
	// "KEY" passes the variable from capstan's own environment, "PREFIX*"
	// passes the non-secret variables starting with PREFIX. Secrets (see
	// IsSecretName) reach commands only by name. capstan's environment is
	// read when Bash runs its first command.
	Env []string
	// EnvLater, when set, is called once, before Bash's first command:
	// the "KEY=value" entries it returns are set in that command's
	// environment and every later one's (the user's git identity, which
	// takes git processes to read that an agent whose model runs no
	// command never needs).
	EnvLater func() []string
	// Protected reports whether a file (its resolved path relative to the
	// work dir, "/"-separated) is protected: Write and Edit refuse it with
	// a TOOL_INPUT error that names the file. nil protects nothing.
	Protected func(rel string) bool
}

// New returns the six built-in tools for cfg, in the order of Names.
func New(cfg Config) ([]tool.Tool, error) {
	ws, err := newWorkspace(cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	ws.maxOut = cfg.MaxOutputBytes
	ws.protected = cfg.Protected
	if ws.maxOut <= 0 {
		ws.maxOut = DefaultMaxOutputBytes
	}
	runner := cfg.Runner
	if runner == nil {
		runner = ExecRunner{}
	}
	timeout := cfg.BashTimeout
	if timeout <= 0 {
		timeout = DefaultBashTimeout
	}
	if timeout > MaxBashTimeout {
		timeout = MaxBashTimeout
	}
	bash := &bashTool{ws: ws, runner: runner, timeout: timeout, allow: cfg.Env, envLater: cfg.EnvLater}
	// A secret value a tool reads (a .env file, a command's output) is
	// replaced before the model or the journal sees it.
	return RedactTools([]tool.Tool{&readTool{ws}, &writeTool{ws}, &editTool{ws}, bash, &globTool{ws}, &grepTool{ws}}), nil
}

// specs caches the built specs: every agent of a process shares one copy
// of each description and compacted schema instead of building its own.
var specs sync.Map // specKey → tool.Spec

// specKey is what a built spec is made of. A struct rather than the three
// joined: a lookup then copies no description.
type specKey struct{ name, description, schema string }

// spec builds a tool.Spec; schema is the JSON Schema of the input object.
// The Spec is shared: callers must not modify its InputSchema.
func spec(name, description, schema string) tool.Spec {
	key := specKey{name, description, schema}
	if s, ok := specs.Load(key); ok {
		return s.(tool.Spec)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(schema)); err != nil {
		panic("builtin: bad schema for " + name + ": " + err.Error())
	}
	s, _ := specs.LoadOrStore(key, tool.Spec{Name: name, Description: description, InputSchema: buf.Bytes()})
	return s.(tool.Spec)
}

// decode parses a tool input strictly: unknown fields are errors, so a model
// that sends "path" for "file_path" learns the right name.
func decode(name string, input json.RawMessage, v any, fields ...string) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return inputErr(name, "invalid input: %v; expected a JSON object with fields %s", err, strings.Join(fields, ", "))
	}
	if dec.More() {
		return inputErr(name, "invalid input: trailing data after the JSON object")
	}
	return nil
}

func inputErr(name, format string, args ...any) *agenterr.Error {
	return agenterr.New(agenterr.CodeToolInput, agenterr.LayerTool, true, name+": "+format, args...)
}

// failure renders err as an error result the model reads.
func failure(err error) tool.Result {
	return tool.Result{Content: err.Error(), IsError: true}
}

// capOutput keeps the first max bytes of s (on a rune boundary) and says
// what was cut.
func capOutput(s string, max int, note string) string {
	if len(s) <= max {
		return s
	}
	cut := runeStart(s, max)
	msg := fmt.Sprintf("\n[output truncated: showing %d of %d bytes", cut, len(s))
	if note != "" {
		msg += "; " + note
	}
	return s[:cut] + msg + "]"
}

// runeStart moves i back to the start of the rune containing s[i].
func runeStart(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for j := 0; j < utf8.UTFMax && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	return i
}

// isBinary reports whether a file prefix looks binary: it has a NUL byte.
func isBinary(prefix []byte) bool {
	return bytes.IndexByte(prefix, 0) >= 0
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// displayPath renders a work-dir-relative path for messages.
func displayPath(rel string) string {
	if rel == "" || rel == "." {
		return "."
	}
	return filepath.ToSlash(rel)
}
