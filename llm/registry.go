package llm

import (
	"context"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm/modelspec"
	"github.com/capstan-dev/capstan/tool/tooldecl"

	"github.com/capstan-dev/capstan/tool"
)

// Config is what a provider factory receives to build a Bridge.
type Config struct {
	// Provider and Model come from the "provider:model" spec.
	Provider string
	Model    string
	// BaseURL overrides the provider's endpoint ("" = provider default or
	// its environment variable).
	BaseURL string
	// AgentDir is the agent definition folder; relative provider arguments
	// (the script provider's file) resolve against it.
	AgentDir string
	// AgentFS, when set, holds the agent definition's files (a pinned
	// snapshot, paths relative to AgentDir); relative provider arguments
	// are read from it instead of the disk.
	AgentFS fs.FS
	// WorkDir is where the agent acts; file tools are confined to it.
	WorkDir string
	// Tools are the tools the model may call (built-in and MCP). Whether a
	// call may run is decided per query by QueryOptions.AllowedTools and
	// PermissionMode.
	Tools []tool.Tool
	// Events receives journal events (model turns, tool calls, denials,
	// session transcripts). Never nil once built by Open.
	Events event.Emitter
	// Transcripts seeds known sessions for resume: session id → messages.
	Transcripts map[string][]event.Message
	// Ledger, when set, is the run's tool-effect ledger: capstan's tool
	// loop journals every turn's answer and every call's intent, and an
	// iteration run again after a kill continues from the record (see
	// Ledger). Providers that run their own tool loop (claude-code)
	// ignore it.
	Ledger *Ledger
	// HTTPClient is used by HTTP providers (nil = http.DefaultClient).
	HTTPClient *http.Client
	// Timeouts bound each request of HTTP providers (zero fields =
	// defaults, see Timeouts).
	Timeouts Timeouts
	// Retry is the retry policy of HTTP providers (zero = defaults).
	Retry RetryPolicy
	// Getenv reads environment variables (nil = os.Getenv). API keys come
	// only from here, never from files or the journal.
	Getenv func(string) string
	// MaxTurns bounds model turns per query when QueryOptions.MaxTurns is 0.
	MaxTurns int
	// MaxToolCallsPerTurn bounds the tool calls run of one model turn
	// where capstan runs the tool loop (0 = DefaultMaxToolCallsPerTurn).
	MaxToolCallsPerTurn int
	// Redact replaces secret values in what the model writes (its text,
	// tool-call inputs, structured output; for claude-code also the tool
	// results it reports) before a transcript, the journal or a later
	// request sees it. nil = nothing to redact.
	Redact Redactor
	// MCPServers are the agent's MCP servers (runner.mcpServers). Providers
	// that run their own tool loop (claude-code) hand them to the backend;
	// for the others their tools arrive in Tools (see tool/mcp).
	MCPServers map[string]tooldecl.MCPServer
	// CommandEnv is what the model's commands get besides the minimal
	// base (the allow list of proc.ForCommands: runner.boundaries.env,
	// and, in a sandbox, the user's git identity), for a provider whose
	// backend runs the commands itself (the claude CLI's Bash).
	CommandEnv []string
	// Sandbox, when set, confines the programs a provider that runs its
	// own tool loop starts (the claude CLI and every tool it runs) in the
	// agent's sandbox; nil runs them with the caller's rights (the run
	// opted out of the sandbox).
	Sandbox tool.ProgramSandbox
	// Context, when set, keeps the tool loop's requests within the model's
	// context window (NewToolLoop); nil sends transcripts as they are.
	Context ContextManager
	// NewContext, when set and Context is nil, builds the Context of a
	// tool loop that Open creates, for the model it opened
	// (CompactionFactory); nil = none.
	NewContext func(ctx context.Context, cfg Config, m Model) (ContextManager, error)
}

// Factory builds a Bridge for a provider that runs its own tool loop (the
// Claude Code CLI).
type Factory func(ctx context.Context, cfg Config) (Bridge, error)

// ModelFactory builds a Model for a provider whose turns capstan drives
// (Anthropic, OpenAI, script). Open wraps such a Model in capstan's shared
// tool loop (NewToolLoop).
type ModelFactory func(ctx context.Context, cfg Config) (Model, error)

type provider struct {
	bridge Factory
	model  ModelFactory
}

var (
	registryMu sync.RWMutex
	registry   = map[string]provider{}
)

// Register makes a Bridge provider available by name. It panics if name is
// empty, f is nil or name is already registered, as database/sql.Register
// does.
func Register(name string, f Factory) {
	if f == nil {
		panic("llm: Register with nil factory")
	}
	register(name, provider{bridge: f})
}

// RegisterModel makes a Model provider available by name; it panics like
// Register.
func RegisterModel(name string, f ModelFactory) {
	if f == nil {
		panic("llm: RegisterModel with nil factory")
	}
	register(name, provider{model: f})
}

func register(name string, p provider) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" {
		panic("llm: Register with empty name")
	}
	if _, dup := registry[name]; dup {
		panic("llm: Register called twice for provider " + name)
	}
	registry[name] = p
}

// Providers lists the registered provider names, sorted.
func Providers() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// HasModelProvider reports whether name is one of ModelProviders, without
// making the list.
func HasModelProvider(name string) bool {
	registryMu.RLock()
	defer registryMu.RUnlock()
	p, ok := registry[name]
	return ok && p.model != nil
}

func lookup(spec string, cfg *Config) (provider, error) {
	name, model := modelspec.Parse(spec)
	registryMu.RLock()
	p, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		e := agenterr.New(agenterr.CodeUnknownProvider, agenterr.LayerSDKBridge, false,
			"unknown model provider %q in %q", name, spec)
		e.Hint = "use one of: " + strings.Join(Providers(), ", ") + " (as provider:model)"
		return provider{}, e
	}
	cfg.Provider, cfg.Model = name, model
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	return p, nil
}

// Open builds the Bridge named by spec ("provider:model"). A Model provider
// is wrapped in the shared tool loop. An unknown provider is an
// UNKNOWN_PROVIDER error listing the known ones.
func Open(ctx context.Context, spec string, cfg Config) (Bridge, error) {
	p, err := lookup(spec, &cfg)
	if err != nil {
		return nil, err
	}
	if p.bridge != nil {
		return p.bridge(ctx, cfg)
	}
	m, err := p.model(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Context == nil && cfg.NewContext != nil {
		if cfg.Context, err = cfg.NewContext(ctx, cfg, m); err != nil {
			return nil, err
		}
	}
	return NewToolLoop(m, cfg), nil
}

// OpenModel builds the Model named by spec, for callers that drive turns
// themselves (the skill runtime, pipeline model stages). Bridge-only
// providers (claude-code) return an UNKNOWN_PROVIDER error saying so.
func OpenModel(ctx context.Context, spec string, cfg Config) (Model, error) {
	p, err := lookup(spec, &cfg)
	if err != nil {
		return nil, err
	}
	if p.model == nil {
		e := agenterr.New(agenterr.CodeUnknownProvider, agenterr.LayerSDKBridge, false,
			"provider %q runs its own tool loop and cannot be driven turn by turn", cfg.Provider)
		e.Hint = "use a model provider here (" + strings.Join(ModelProviders(), ", ") + ")"
		return nil, e
	}
	return p.model(ctx, cfg)
}

// ModelProviders lists the registered providers that OpenModel accepts.
func ModelProviders() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	var names []string
	for n, p := range registry {
		if p.model != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
