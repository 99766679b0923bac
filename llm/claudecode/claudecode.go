// Package claudecode drives the Claude Code CLI (`claude`) as a capstan
// model backend. The CLI runs its own tool loop; capstan starts it once per
// query in headless stream-json mode, sends the prompt as a stream-json
// user message, and reads the NDJSON frames it prints:
//
//	claude -p --output-format stream-json --verbose --input-format stream-json \
//	  [--resume ID] [--model M] [--json-schema S] [--allowedTools ...] \
//	  [--disallowedTools ...] [--permission-mode M] [--max-turns N] \
//	  [--mcp-config JSON] [--append-system-prompt S] [--include-partial-messages]
//
// With a llm.StreamSink in the query's context the driver adds
// --include-partial-messages and passes the text deltas of the CLI's
// stream_event frames to the sink. A CLI too old to know that option
// rejects it on stderr ("error: unknown option '--include-partial-messages'")
// and exits before printing any frame; when a query fails that way the
// driver runs it once more without the option and remembers, for the rest
// of the Bridge's life, that this CLI lacks it, so later queries do not ask
// for it. Any other failure is reported as before. Without partial messages
// each assistant frame's text goes to the sink whole as the frame arrives;
// the same holds for an assistant frame no deltas came for.
// Tool calls reach the sink as their tool_use and tool_result frames
// arrive. Text of sub-agents (frames with a parent_tool_use_id) is not
// streamed; their tool calls are, like the ToolUses of the result.
//
// It registers the "claude-code" provider: spec "claude-code" or
// "claude-code:<model>".
package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

// Environment variables the driver reads through Config.Getenv.
const (
	// EnvBinary names the claude executable to run instead of "claude" on
	// PATH.
	EnvBinary = "CAPSTAN_CLAUDE_PATH"
	// InstallHint tells the user how to get the CLI.
	InstallHint = "install Claude Code with `npm install -g @anthropic-ai/claude-code` (or set " + EnvBinary + " to the claude binary)"
)

// passEnv are variables forwarded to the CLI from Config.Getenv when set
// there (on top of the process environment).
var passEnv = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
	"CLAUDE_CONFIG_DIR", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
	"DISABLE_NON_ESSENTIAL_MODEL_CALLS", "HOME", "PATH"}

// secretEnv are variables whose values are redacted from error messages.
var secretEnv = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}

func init() {
	llm.Register("claude-code", func(ctx context.Context, c llm.Config) (llm.Bridge, error) {
		return New(Config{Model: c.Model, BaseURL: c.BaseURL, WorkDir: c.WorkDir, Getenv: c.Getenv, Events: c.Events,
			MaxTurns: c.MaxTurns, MCPServers: c.MCPServers, Redact: c.Redact, Sandbox: c.Sandbox, CommandEnv: c.CommandEnv})
	})
}

// Config configures a Bridge.
type Config struct {
	// Binary is the claude executable ("" = Getenv(EnvBinary), else
	// "claude" looked up on Getenv("PATH")).
	Binary string
	// Model is passed as --model when set.
	Model string
	// BaseURL, when set, is the CLI's ANTHROPIC_BASE_URL (--base-url,
	// runner.baseUrl), over the environment's.
	BaseURL string
	// WorkDir is the CLI's working directory ("" = current).
	WorkDir string
	// Getenv reads the environment (nil = os.Getenv). Variables in
	// passEnv set here are passed to the CLI.
	Getenv func(string) string
	// Env adds KEY=VALUE entries to the CLI's environment.
	Env []string
	// CommandEnv is what the model's commands (the CLI's Bash) get
	// besides the minimal base, in proc.ForCommands' allow-list form
	// ("NAME", "PREFIX*", "NAME=value"): runner.boundaries.env.
	CommandEnv []string
	// Events receives journal events (nil = discard).
	Events event.Emitter
	// MaxTurns is --max-turns when QueryOptions.MaxTurns is 0.
	MaxTurns int
	// DisallowedTools is passed as --disallowedTools.
	DisallowedTools []string
	// MCPServers are handed to the CLI with --mcp-config.
	MCPServers map[string]tooldecl.MCPServer
	// Redact replaces secret values in everything the CLI reports before
	// the result, the journal or the stream sink sees it: the model's text,
	// the tool inputs it wrote, the results of the tools the CLI ran and the
	// structured output (nil = nothing to redact).
	Redact llm.Redactor
	// Sandbox, when set, is where the CLI runs (see the package
	// documentation): every tool it runs is confined with it. nil runs
	// the CLI with the caller's rights.
	Sandbox tool.ProgramSandbox
	// KillGrace is how long a cancelled CLI gets between SIGTERM and
	// SIGKILL (0 = 2s).
	KillGrace time.Duration
}

// Bridge is an llm.Bridge over the claude CLI. It is safe for concurrent
// use; each Query runs its own CLI process.
type Bridge struct {
	cfg Config
	// binary is the CLI program and, for a script run through env, its
	// interpreter first (both resolved outside the work dir).
	binary []string
	mcp    string

	mu   sync.Mutex
	last string

	// noPartial is set once the CLI has rejected
	// --include-partial-messages as an unknown option.
	noPartial atomic.Bool

	// schemas keeps the output schemas compiled, one per distinct
	// schema, instead of compiling each query's anew.
	schemas *schema.Cache

	// home is the CLI's private configuration folder (CLAUDE_CONFIG_DIR)
	// of a sandboxed Bridge, removed by Close; "" unsandboxed.
	home string
	// keys is the key proxy of a sandboxed Bridge whose CLI has an API
	// key or auth token (under mu; stopped by Close).
	keys *keyProxy
}

// New resolves the claude binary and returns a Bridge. A missing binary is
// an SDK_CONNECTION error with the install hint.
func New(cfg Config) (*Bridge, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 2 * time.Second
	}
	bin, err := findBinary(cfg)
	if err != nil {
		return nil, err
	}
	b := &Bridge{cfg: cfg, binary: bin, schemas: schema.NewCache(0)}
	if cfg.Sandbox != nil {
		if b.home, err = privateHome(cfg.Getenv); err != nil {
			return nil, err
		}
	}
	if len(cfg.MCPServers) > 0 {
		j, err := MCPConfigJSON(cfg.MCPServers)
		if err != nil {
			return nil, err
		}
		b.mcp = j
	}
	return b, nil
}

func findBinary(cfg Config) ([]string, error) {
	name := cfg.Binary
	if name == "" {
		name = cfg.Getenv(EnvBinary)
	}
	if name == "" {
		name = "claude"
	}
	missing := func(cause error) error {
		e := agenterr.Wrap(cause, agenterr.CodeSdkConnection, agenterr.LayerSDKBridge, false, "claude CLI not found (%s)", name)
		e.Hint = InstallHint
		return e
	}
	// The CLI runs with the key: one the model could have written (a PATH
	// entry inside the work dir) is refused, and so is its interpreter.
	var workDirs []string
	if cfg.WorkDir != "" {
		workDirs = append(workDirs, cfg.WorkDir)
	} else if wd, err := os.Getwd(); err == nil {
		workDirs = append(workDirs, wd)
	}
	p, err := proc.LookPath(name, cfg.Getenv("PATH"), workDirs...)
	if proc.IsProgramNotFound(err) || agenterr.CodeOf(err) == agenterr.CodeDependencyResolution && !strings.Contains(err.Error(), "inside the work dir") {
		return nil, missing(err)
	}
	if err != nil {
		return nil, err
	}
	argv := []string{p}
	if interp, ok := envInterpreter(p); ok {
		ip, err := proc.LookPath(interp, cfg.Getenv("PATH"), workDirs...)
		if err != nil && !proc.IsProgramNotFound(err) {
			return nil, err
		}
		if err == nil {
			argv = []string{ip, p}
		}
	}
	return argv, nil
}

// envInterpreter returns the program a script at p names with an
// "#!/usr/bin/env NAME" line (how npm installs the claude CLI): env would
// look NAME up on PATH when the CLI starts, so capstan resolves it itself.
func envInterpreter(p string) (string, bool) {
	f := sandbox.ShebangFields(p)
	if len(f) != 2 || filepath.Base(f[0]) != "env" || strings.HasPrefix(f[1], "-") {
		return "", false
	}
	return f[1], true
}

// MCPConfigJSON renders MCP servers in the CLI's --mcp-config format.
func MCPConfigJSON(servers map[string]tooldecl.MCPServer) (string, error) {
	out := map[string]any{}
	for name, s := range servers {
		switch {
		case s.Command != "":
			e := map[string]any{"type": "stdio", "command": s.Command}
			if len(s.Args) > 0 {
				e["args"] = s.Args
			}
			if len(s.Env) > 0 {
				e["env"] = s.Env
			}
			out[name] = e
		case s.URL != "":
			e := map[string]any{"type": "http", "url": s.URL}
			if len(s.Headers) > 0 {
				e["headers"] = s.Headers
			}
			out[name] = e
		default:
			e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerConfiguration, false,
				"MCP server %q has neither command nor url", name)
			e.Pointer = "/runner/mcpServers/" + name
			e.Hint = "give it a command (stdio) or a url (streamable HTTP)"
			return "", e
		}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": out})
	return string(b), err
}

// SessionID returns the session of the last query.
func (b *Bridge) SessionID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// Close implements llm.Bridge: a sandboxed Bridge removes the CLI's
// private configuration folder (its sessions with it) and stops its key
// proxy.
func (b *Bridge) Close() error {
	b.mu.Lock()
	kp := b.keys
	b.keys = nil
	b.mu.Unlock()
	var err error
	if kp != nil {
		err = kp.Close()
	}
	if b.home != "" {
		err = errors.Join(err, os.RemoveAll(b.home))
	}
	return err
}

// Args returns the CLI arguments for a query (without the binary). Every
// value that comes from configuration or a model is passed in the
// "--flag=value" form, so a value starting with "-" (a hostile model name
// or system prompt) can never be read as a flag of its own.
func (b *Bridge) Args(opts llm.QueryOptions, resume string) []string {
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
		// The work dir's .claude/settings.json and settings.local.json
		// (the CLI's project and local settings) and .mcp.json are files
		// the model can write: read, their permission rules would allow
		// tools the agent does not, their env would set the CLI's
		// environment, their MCP servers would start. Only the user's
		// settings and capstan's own flags count.
		"--setting-sources=user", "--strict-mcp-config"}
	add := func(flag, value string) { args = append(args, flag+"="+value) }
	if resume != "" {
		add("--resume", resume)
	}
	if b.cfg.Model != "" {
		add("--model", b.cfg.Model)
	}
	if len(opts.OutputSchema) > 0 {
		add("--json-schema", string(opts.OutputSchema))
	}
	if len(opts.AllowedTools) > 0 {
		add("--allowedTools", strings.Join(opts.AllowedTools, ","))
	}
	deny := append(append([]string(nil), b.cfg.DisallowedTools...), opts.DisallowedTools...)
	if opts.Boundary != "" {
		deny = append(deny, tool.BoundaryDenyPatterns(slices.Sorted(maps.Keys(b.cfg.MCPServers))...)...)
	}
	if len(deny) > 0 {
		add("--disallowedTools", strings.Join(deny, ","))
	}
	if opts.PermissionMode != "" {
		add("--permission-mode", opts.PermissionMode)
	}
	maxTurns := opts.MaxTurns
	if maxTurns <= 0 {
		maxTurns = b.cfg.MaxTurns
	}
	if maxTurns > 0 {
		add("--max-turns", strconv.Itoa(maxTurns))
	}
	if b.mcp != "" {
		add("--mcp-config", b.mcp)
	}
	if opts.SystemPrompt != "" {
		add("--append-system-prompt", opts.SystemPrompt)
	}
	if b.cfg.Sandbox != nil {
		// The CLI's own sandbox too, where it has one; capstan's
		// confinement does not depend on it.
		add("--settings", cliSandboxSettings)
	}
	return args
}

// Query implements llm.Bridge. A resume of a session the CLI does not know
// is retried once as a new session, with SessionRenewed set.
func (b *Bridge) Query(ctx context.Context, prompt string, opts llm.QueryOptions) (*event.QueryResult, error) {
	if strings.TrimSpace(prompt) == "" {
		return nil, agenterr.New(agenterr.CodeSdkRequest, agenterr.LayerSDKBridge, false, "query prompt is empty")
	}
	res, err := b.run(ctx, prompt, opts, opts.SessionID)
	if err != nil && opts.SessionID != "" && errors.Is(err, agenterr.ErrSdkSessionNotFound) {
		b.cfg.Events.Emit(event.Warning("claude-code session " + opts.SessionID + " not found; starting a new session"))
		res, err = b.run(ctx, prompt, opts, "")
		if res != nil {
			res.SessionRenewed = true
		}
	}
	if res != nil && res.SessionID != "" {
		b.mu.Lock()
		b.last = res.SessionID
		b.mu.Unlock()
	}
	return res, err
}

// partialFlag asks the CLI for stream_event frames.
const partialFlag = "--include-partial-messages"

// run runs the query in one CLI process, or in two when the CLI turns out
// not to know partialFlag: it then runs again without it.
func (b *Bridge) run(ctx context.Context, prompt string, opts llm.QueryOptions, resume string) (*event.QueryResult, error) {
	sink := llm.StreamSinkFrom(ctx)
	partial := sink != nil && !b.noPartial.Load()
	res, err := b.runOnce(ctx, prompt, opts, resume, sink, partial)
	var unsupported *partialUnsupported
	if errors.As(err, &unsupported) {
		b.noPartial.Store(true)
		b.cfg.Events.Emit(event.Warning("the claude CLI does not know " + partialFlag +
			"; its text is streamed a whole message at a time (update the CLI for live text)"))
		res, err = b.runOnce(ctx, prompt, opts, resume, sink, false)
	}
	return res, err
}

// partialUnsupported is runOnce's error when the CLI rejected partialFlag
// as an unknown option before printing any frame.
type partialUnsupported struct{ err error }

func (e *partialUnsupported) Error() string { return e.err.Error() }
func (e *partialUnsupported) Unwrap() error { return e.err }

// runOnce is one CLI process; partial adds partialFlag.
func (b *Bridge) runOnce(ctx context.Context, prompt string, opts llm.QueryOptions, resume string, sink llm.StreamSink, partial bool) (*event.QueryResult, error) {
	args := b.Args(opts, resume)
	if partial {
		args = append(args, partialFlag)
	}
	proc, err := b.start(ctx, args)
	if err != nil {
		if agenterr.From(err) != nil && b.cfg.Sandbox != nil {
			return nil, err
		}
		e := agenterr.Wrap(err, agenterr.CodeSdkConnection, agenterr.LayerSDKBridge, false, "claude CLI could not start")
		e.Hint = InstallHint
		return nil, e
	}
	stdin, stdout := proc.Stdin(), proc.Stdout()
	b.cfg.Events.Emit(event.ClaudeCodeProcessEvent{Resume: resume, Args: len(args), Confinement: proc.Describe()})

	// Cancellation ends the CLI and everything it started: SIGTERM (or
	// its input closed, in the sandbox), then SIGKILL.
	done := make(chan struct{})
	var killed sync.WaitGroup
	killed.Add(1)
	go func() {
		defer killed.Done()
		select {
		case <-done:
		case <-ctx.Done():
			proc.Stop(false)
		}
	}()

	msg, _ := json.Marshal(map[string]any{"type": "user", "session_id": resume,
		"message": map[string]any{"role": "user", "content": prompt}, "parent_tool_use_id": nil})
	_, werr := stdin.Write(append(msg, '\n'))

	st := &state{res: &event.QueryResult{}, uses: map[string]int{}, requested: resume, events: b.cfg.Events,
		redact: b.cfg.Redact, abort: func() { proc.Stop(true) }, sink: sink}
	readErr := st.read(stdout, func() { _ = stdin.Close() })
	if st.partialText {
		// Deltas of a message whose assistant frame never came.
		st.sink.TextDiscarded("claude CLI output ended in the middle of a message")
	}
	_ = stdin.Close()
	// Drain whatever is left so the process can exit.
	_, _ = io.Copy(io.Discard, stdout)
	waitErr := proc.Wait()
	close(done)
	killed.Wait()
	stderr := proc.Stderr()

	if ctx.Err() != nil {
		return nil, agenterr.Wrap(ctx.Err(), agenterr.CodeCanceled, agenterr.LayerSDKBridge, false, "claude-code query canceled")
	}
	if st.aborted != nil {
		return nil, st.aborted
	}
	if st.result == nil {
		err := b.noResult(resume, stderr, readErr, werr, waitErr)
		if partial && st.frames == 0 && unknownOption(stderr, partialFlag) {
			return nil, &partialUnsupported{err}
		}
		return nil, err
	}
	if err := b.resultError(st); err != nil {
		return st.res, err
	}
	if len(opts.OutputSchema) > 0 {
		if err := b.structured(st, opts.OutputSchema); err != nil {
			return st.res, err
		}
	}
	return st.res, nil
}

func (b *Bridge) env() []string {
	environ := os.Environ()
	for _, k := range passEnv {
		if v := b.cfg.Getenv(k); v != "" {
			environ = append(environ, k+"="+v)
		}
	}
	// The CLI's own settings and key, and what the model's commands get
	// (its Bash runs them) — not the rest of capstan's environment.
	env := proc.ForClaudeCLI(environ, b.cfg.CommandEnv)
	if b.cfg.BaseURL != "" {
		// The last of a duplicated variable wins.
		env = append(env, "ANTHROPIC_BASE_URL="+b.cfg.BaseURL)
	}
	env = append(env, "CLAUDE_CODE_ENTRYPOINT=sdk-capstan")
	return append(env, b.cfg.Env...)
}

func (b *Bridge) redact(s string) string {
	s = b.cfg.Redact.Text(s)
	for _, k := range secretEnv {
		if v := b.cfg.Getenv(k); len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
		if v := os.Getenv(k); len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}

// noResult explains a CLI that ended without a result frame.
func (b *Bridge) noResult(resume, stderr string, readErr, writeErr, waitErr error) error {
	tail := strings.TrimSpace(b.redact(stderr))
	if resume != "" && sessionMissing(tail) {
		return agenterr.New(agenterr.CodeSdkSessionNotFound, agenterr.LayerSDKBridge, true, "claude-code has no session %s", resume)
	}
	var why []string
	if waitErr != nil {
		why = append(why, waitErr.Error())
	}
	if readErr != nil && !errors.Is(readErr, io.EOF) {
		why = append(why, "reading output: "+readErr.Error())
	}
	if writeErr != nil {
		why = append(why, "writing prompt: "+writeErr.Error())
	}
	if tail != "" {
		why = append(why, "stderr: "+lastLines(tail, 5))
	}
	e := agenterr.New(agenterr.CodeSdkConnection, agenterr.LayerSDKBridge, true, "claude CLI ended without a result: %s", strings.Join(why, "; "))
	e.Hint = "run the same claude command by hand to see the problem; check the CLI is logged in or ANTHROPIC_API_KEY is set"
	return e
}

// unknownOption reports whether a CLI's stderr says it does not know the
// option flag: a line that says "unknown option" and names flag exactly
// (commander prints "error: unknown option '--flag'", and may suggest a
// known option on the next line, which must not count).
func unknownOption(stderr, flag string) bool {
	flag = strings.ToLower(flag)
	for _, line := range strings.Split(strings.ToLower(stderr), "\n") {
		if !strings.Contains(line, "unknown option") {
			continue
		}
		for rest := line; ; {
			i := strings.Index(rest, flag)
			if i < 0 {
				break
			}
			rest = rest[i+len(flag):]
			if rest == "" || !isOptionChar(rest[0]) {
				return true
			}
		}
	}
	return false
}

func isOptionChar(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

func sessionMissing(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "no conversation found") || strings.Contains(s, "session not found") ||
		(strings.Contains(s, "session") && strings.Contains(s, "not found"))
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// resultError maps an error result frame to a coded error.
func (b *Bridge) resultError(st *state) error {
	r := st.result
	if !r.IsError && !strings.HasPrefix(r.Subtype, "error") {
		return nil
	}
	text := b.redact(strings.TrimSpace(r.Result))
	if text == "" && len(r.Errors) > 0 {
		text = b.redact(string(r.Errors))
	}
	if st.requested != "" && sessionMissing(text) {
		return agenterr.New(agenterr.CodeSdkSessionNotFound, agenterr.LayerSDKBridge, true, "claude-code has no session %s", st.requested)
	}
	mk := func(code string, recoverable bool, hint, format string, args ...any) error {
		e := agenterr.New(code, agenterr.LayerSDKBridge, recoverable, format, args...)
		e.Hint = hint
		return e
	}
	switch r.Subtype {
	case "error_max_turns":
		return mk(agenterr.CodeMaxTurns, true, "raise runner.boundaries.maxTurns or give the model a narrower task",
			"claude-code used its %d turns without a final answer", r.NumTurns)
	case "error_max_budget_usd":
		return mk(agenterr.CodeBudgetExceeded, false, "raise the budget or narrow the task", "claude-code reached its cost budget ($%.4f)", r.TotalCostUSD)
	case "error_max_structured_output_retries":
		return mk(agenterr.CodeSchemaValidation, true, "check the output schema is satisfiable", "claude-code could not produce output matching the schema: %s", text)
	}
	status := r.APIErrorStatus
	kind := st.apiError
	switch {
	case status == 429 || kind == "rate_limit":
		return mk(agenterr.CodeSdkRateLimit, true, "the API is rate limiting this account; wait and resume the run", "claude-code hit a rate limit: %s", text)
	case status == 401 || status == 403 || kind == "authentication_failed" || kind == "billing_error":
		return mk(agenterr.CodeSdkAuth, false, "log in with `claude` or set ANTHROPIC_API_KEY", "claude-code authentication failed: %s", text)
	case status == 529 || status >= 500 || kind == "overloaded" || kind == "server_error":
		return mk(agenterr.CodeSdkConnection, true, "the API is failing; resume the run later", "claude-code API error: %s", text)
	case status >= 400 || kind == "invalid_request" || kind == "model_not_found":
		return mk(agenterr.CodeSdkRequest, false, "check --model and the request options", "claude-code request rejected: %s", text)
	case r.Subtype == "error_during_execution":
		return mk(agenterr.CodeSdkConnection, true, "see the CLI's error above; resume the run to retry", "claude-code failed during execution: %s", text)
	}
	return mk(agenterr.CodeSdkRequest, false, "", "claude-code returned an error (%s): %s", r.Subtype, text)
}

// authRetryLimit is how many api_retry frames for a rejected key (401/403)
// the driver lets the CLI make before stopping it: the CLI retries them
// for minutes, but a rejected API key does not heal.
const authRetryLimit = 2

var _ llm.Bridge = (*Bridge)(nil)
