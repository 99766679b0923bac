package llm

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/journal"
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
	// WorkDir is where the agent acts; file tools are confined to it.
	WorkDir string
	// Tools are the tools the model may call (built-in and MCP). Whether a
	// call may run is decided per query by QueryOptions.AllowedTools and
	// PermissionMode.
	Tools []tool.Tool
	// Events receives journal events (model turns, tool calls, denials,
	// session transcripts). Never nil once built by Open.
	Events journal.Emitter
	// Transcripts seeds known sessions for resume: session id → messages.
	Transcripts map[string][]Message
	// HTTPClient is used by HTTP providers (nil = http.DefaultClient).
	HTTPClient *http.Client
	// Getenv reads environment variables (nil = os.Getenv). API keys come
	// only from here, never from files or the journal.
	Getenv func(string) string
	// MaxTurns bounds model turns per query when QueryOptions.MaxTurns is 0.
	MaxTurns int
}

// Factory builds a Bridge for one provider.
type Factory func(ctx context.Context, cfg Config) (Bridge, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a provider available by name. It panics if name is empty,
// f is nil or name is already registered, as database/sql.Register does.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || f == nil {
		panic("llm: Register with empty name or nil factory")
	}
	if _, dup := registry[name]; dup {
		panic("llm: Register called twice for provider " + name)
	}
	registry[name] = f
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

// ParseSpec splits "provider:model" into its parts. The model part may
// itself contain colons (e.g. "openai:llama3.1:8b"); a bare "provider" has
// an empty model.
func ParseSpec(spec string) (provider, model string) {
	provider, model, _ = strings.Cut(strings.TrimSpace(spec), ":")
	return provider, model
}

// Open builds the Bridge named by spec ("provider:model"). An unknown
// provider is an UNKNOWN_PROVIDER error listing the known ones.
func Open(ctx context.Context, spec string, cfg Config) (Bridge, error) {
	provider, model := ParseSpec(spec)
	registryMu.RLock()
	f, ok := registry[provider]
	registryMu.RUnlock()
	if !ok {
		e := agenterr.New(agenterr.CodeUnknownProvider, agenterr.LayerSDKBridge, false,
			"unknown model provider %q in %q", provider, spec)
		e.Hint = "use one of: " + strings.Join(Providers(), ", ") + " (as provider:model)"
		return nil, e
	}
	cfg.Provider, cfg.Model = provider, model
	if cfg.Events == nil {
		cfg.Events = journal.Discard
	}
	return f(ctx, cfg)
}
