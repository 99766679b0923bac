package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"
	"github.com/capstan-dev/capstan/llm/modelspec"
	"github.com/capstan-dev/capstan/proc"

	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/skill"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/builtin"
	"github.com/capstan-dev/capstan/tool/mcp"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

// newPromptResolver builds the prompt resolver of the agent in dir from
// runner.prompts and the registry's c1.
func newPromptResolver(dir string, def *agentdir.Definition, reg *agentdir.Registry) *agentdir.PromptResolver {
	r := def.Runner
	return agentdir.NewPromptResolver(agentdir.PromptConfig{
		AgentDir:    dir,
		Base:        r.Prompts.Base,
		C1:          reg.C1,
		FallbackDir: r.Prompts.FallbackDir,
		SystemPath:  r.SystemPromptPath,
		FS:          def.FS(),
	})
}

// buildTools makes the tools the model may call: the built-in file and
// shell tools confined to the work dir (Bash sandboxed when
// runner.boundaries.sandbox is enabled), the Go tools of Config.Tools and
// the tools of runner.skills. Every result passes proc.RedactSecrets.
// commandEnv is the allow list of Bash's environment (see buildBridge).
func (a *Agent) buildTools(ctx context.Context, commandEnv []string, identity func() []string) ([]tool.Tool, error) {
	b := a.spec.Runner.Boundaries
	protected, err := a.protectedFunc()
	if err != nil {
		return nil, err
	}
	cfg := builtin.Config{WorkDir: a.workDir, Env: commandEnv, EnvLater: identity, Protected: protected}
	var boxed *sandbox.Runner
	if a.sandbox != nil {
		// Bash's commands share a cache of their own; subprocess steps
		// and validators never see it.
		cfg.Runner, boxed = a.sandbox.WithCache(a.bashCache), a.sandbox.Runner
	}
	tools, err := builtin.New(cfg)
	if err != nil {
		return nil, err
	}
	if a.spec.Runner.Integrations.GitHub.On() {
		tools = append(tools, builtin.RedactTools([]tool.Tool{github.ReadTool(a.ghCLI(a.ghRepo.Repo))})...)
	}
	for _, t := range a.opts.Tools {
		name := t.Spec().Name
		for _, have := range tools {
			if have.Spec().Name == name {
				e := agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerTool, false,
					"Config.Tools: a tool named %q already exists", name)
				e.Hint = "give the custom tool another name"
				return nil, e
			}
		}
		// A Go tool's results, errors and panics pass the redaction of
		// the built-in, MCP and skill tools: a tool that hands back a
		// secret variable's value does not carry it to the model.
		tools = append(tools, tool.Redacting(t, proc.RedactSecrets))
	}
	if len(a.spec.Runner.Skills) == 0 {
		return tools, nil
	}
	// Skill scripts always run sandboxed; a machine that cannot sandbox
	// answers run_skill_script with SANDBOX_UNAVAILABLE unless the agent
	// opted out explicitly.
	if boxed == nil {
		// Opted out of the sandbox (or allowUnsandboxed): scripts still
		// run in it where the machine can make it, confined as far as it
		// can otherwise.
		allow := a.sandboxOptOut() != "" || b.Sandbox != nil && b.Sandbox.AllowUnsandboxed
		boxed = sandbox.New(ctx, sandbox.Config{AllowUnsandboxed: allow})
	}
	cat, warns := skill.NewCatalog(a.spec.Runner.Skills, skill.CatalogConfig{BaseDir: a.def.Dir(), FS: a.def.FS(), Sandbox: boxed})
	for _, w := range warns {
		a.emit.Emit(event.Warning("skill " + w.SkillID + ": " + w.Message))
	}
	a.skillsPrompt = cat.SystemPromptSection()
	return append(tools, builtin.RedactTools(cat.Tools())...), nil
}

// buildSandbox makes the sandbox the agent's commands run in: nil only
// when the run opted out (Config.NoSandbox, "sandbox": {"enabled":
// false}); SANDBOX_UNAVAILABLE (naming agent.json, what the machine lacks
// and how to opt out) when the machine cannot sandbox and allowUnsandboxed
// is not set.
func (a *Agent) buildSandbox(ctx context.Context) (*sandbox.CommandRunner, error) {
	if a.opts.NoSandbox {
		return nil, nil
	}
	r, err := sandbox.NewCommandRunner(ctx, a.spec.Runner.Boundaries.Sandbox)
	if err != nil {
		if e := agenterr.From(err); e != nil && e.File == "" {
			e.File = filepath.Join(a.def.Dir(), agentdir.AgentFile)
		}
		return nil, err
	}
	return r, nil
}

// sandboxOptOut names how the run opted out of the sandbox ("" when it
// did not): the command line (Config.NoSandbox) or agent.json.
func (a *Agent) sandboxOptOut() string {
	switch {
	case a.opts.NoSandbox:
		return "--no-sandbox"
	case !a.spec.Runner.Boundaries.Sandbox.On():
		return `agent.json runner.boundaries.sandbox "enabled": false`
	}
	return ""
}

// unsandboxed says why the run's commands are not sandboxed, "" when they
// are: an opt-out, or allowUnsandboxed on a machine that cannot sandbox.
func (a *Agent) unsandboxed() string {
	if how := a.sandboxOptOut(); how != "" {
		return "unsandboxed (" + how + "): Bash, validators, subprocess steps, MCP servers and the claude CLI's tools run with your rights"
	}
	if a.sandbox != nil && !a.sandbox.Runner.Capabilities().Sandboxes() {
		return "unsandboxed (allowUnsandboxed, and this machine cannot sandbox: " + a.sandbox.Runner.Capabilities().Missing() +
			"): commands run under rlimits and Landlock where available only"
	}
	return ""
}

// buildBridge opens the model provider with the agent's tools. MCP
// servers (runner.mcpServers) are connected by capstan when any model of
// the run (runner.model or a step's model) is one whose tool loop capstan
// runs, and handed to providers that run their own (the Claude Code CLI,
// through --mcp-config). The model's answers are redacted with the
// secret values of environ (agent.New's copy of the environment).
func (a *Agent) buildBridge(ctx context.Context, environ []string) (llm.Bridge, error) {
	if a.opts.Bridge != nil {
		return a.opts.Bridge, nil
	}
	// What the model's commands get besides the minimal base: the
	// agent's runner.boundaries.env and, in the sandbox (whose HOME is
	// private), the user's git identity. Reading the identity takes git
	// processes, so Bash reads it at its first command; the Claude Code
	// CLI, which runs its own Bash, gets it when it starts.
	commandEnv := a.spec.Runner.Boundaries.Env
	var identity func() []string
	if a.sandbox != nil {
		identity = a.commandIdentity
	}
	tools, err := a.buildTools(ctx, commandEnv, identity)
	if err != nil {
		return nil, err
	}
	r := a.spec.Runner
	needMCP, needCLI := false, false
	models := a.models()
	for _, spec := range models {
		needMCP = needMCP || !runsOwnToolLoop(spec)
		needCLI = needCLI || runsOwnToolLoop(spec)
	}
	cliEnv := commandEnv
	if needCLI && identity != nil {
		cliEnv = append(slices.Clone(commandEnv), identity()...)
	}
	if len(r.MCPServers) > 0 && needMCP {
		act := event.Activity{Kind: event.ActivityMCP, Name: strings.Join(sortedIDs(r.MCPServers), ", ")}
		if a.sandbox != nil {
			act.Detail = mcpInstallRoots(r.MCPServers, a.workDir)
		}
		start := time.Now()
		event.EmitActivity(a.emit, event.ActivityStartEvent{Activity: act})
		set, err := mcp.ConnectWith(ctx, r.MCPServers, mcp.Options{WorkDir: a.workDir, Events: a.emit, Env: r.Boundaries.Env, Sandbox: a.sandbox})
		act.Took, act.Failed = time.Since(start), err != nil
		event.EmitActivity(a.emit, event.ActivityEndEvent{Activity: act})
		if err != nil {
			if e := agenterr.From(err); e != nil && e.File == "" {
				e.File = filepath.Join(a.def.Dir(), agentdir.AgentFile)
			}
			return nil, err
		}
		a.mcp = set
		tools = append(tools, set.Tools()...)
	}
	baseURL := a.opts.BaseURL
	if baseURL == "" {
		baseURL = r.BaseURL
	}
	a.baseURL = baseURL
	cfg := llm.Config{
		CommandEnv:          cliEnv,
		BaseURL:             baseURL,
		AgentDir:            a.def.Dir(),
		AgentFS:             a.def.FS(),
		WorkDir:             a.workDir,
		Tools:               tools,
		Events:              a.emit,
		Ledger:              a.ledger,
		Getenv:              a.opts.Getenv,
		MaxTurns:            r.Boundaries.MaxTurns,
		MaxToolCallsPerTurn: r.Boundaries.MaxToolCallsPerTurn,
		// The model's answers carry no secret value into the transcript,
		// the journal or the next request (the same list the tool results
		// are redacted with).
		Redact: proc.SecretRedactor(environ),
		// Keeps long sessions within the model's context window.
		NewContext: llm.CompactionFactory(compactionOptions(r.ContextWindow, r.Compaction)),
		Timeouts:   requestTimeouts(r.Requests).Override(a.opts.Timeouts).WithinBudget(a.timeBudget()),
		Retry:      llm.RetryPolicy{MaxRetryAfter: seconds(r.Requests.MaxRetryAfterSeconds)},
	}
	if a.opts.MaxRetryAfter > 0 {
		cfg.Retry.MaxRetryAfter = a.opts.MaxRetryAfter
	}
	if a.sandbox != nil {
		// A provider that runs its own tools (the claude CLI) runs in
		// the sandbox with them, under the bounds of a validator: the
		// CLI and every command it runs share them.
		cfg.Sandbox = a.sandbox.WithLimits(sandbox.ValidatorLimits())
	}
	if rec := a.opts.Resume; rec != nil {
		cfg.Transcripts = rec.Sessions
	}
	if len(models) > 1 {
		// Steps with their own model open their bridges the same way, on
		// first use; an agent without any keeps no copy of the config.
		a.stepCfg = &cfg
	}
	return a.openBridge(ctx, a.model, &cfg)
}

// mcpInstallRoots says what the sandbox lets the stdio servers read of
// their installs ("" when nothing beyond the work dir and the system
// directories): "v: /opt/v; w: /home/u/.venvs/w".
func mcpInstallRoots(servers map[string]tooldecl.MCPServer, workDir string) string {
	var parts []string
	for _, id := range sortedIDs(servers) {
		if roots := mcp.InstallRoots(servers[id], workDir); len(roots) > 0 {
			parts = append(parts, id+": "+strings.Join(roots, ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "the sandbox lets them read their installs as well, read-only: " + strings.Join(parts, "; ")
}

// requestTimeouts converts runner.requests' timeouts.
func requestTimeouts(r agentdir.Requests) llm.Timeouts {
	return llm.Timeouts{Connect: seconds(r.ConnectTimeoutSeconds), FirstByte: seconds(r.FirstByteTimeoutSeconds),
		StreamIdle: seconds(r.StreamIdleTimeoutSeconds)}
}

// seconds converts a configured number of seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// openBridge opens the provider of spec with the agent's bridge config
// base (tools, journal, transcripts).
func (a *Agent) openBridge(ctx context.Context, spec string, base *llm.Config) (llm.Bridge, error) {
	cfg := *base
	if runsOwnToolLoop(spec) {
		cfg.MCPServers = a.spec.Runner.MCPServers
	}
	return llm.Open(ctx, spec, cfg)
}

// stepBridge returns the bridge of a step's own model (steps.<id>.model),
// opening it on first use. The run's model is served by the main bridge.
func (a *Agent) stepBridge(ctx context.Context, spec string) (llm.Bridge, error) {
	if spec == "" || spec == a.model {
		return nil, nil
	}
	if b, ok := a.stepBridges[spec]; ok {
		return b, nil
	}
	base := a.stepCfg
	if base == nil { // a bridge given in Config: steps' models open with defaults
		base = &llm.Config{}
	}
	b, err := a.openBridge(ctx, spec, base)
	if err != nil {
		return nil, err
	}
	if a.stepBridges == nil {
		a.stepBridges, a.stepCosts = map[string]llm.Bridge{}, map[string]func(event.Usage) float64{}
	}
	a.stepBridges[spec], a.stepCosts[spec] = b, a.costFunc(spec)
	return b, nil
}

// models lists the run's model and every distinct step model.
func (a *Agent) models() []string {
	out := []string{a.model}
	for _, st := range a.reg.Steps {
		if st.Model != "" && !slices.Contains(out, st.Model) {
			out = append(out, st.Model)
		}
	}
	return out
}

// claudeCodeTools are tools of the Claude Code CLI that capstan's own
// tool loop (API and script models) does not provide.
var claudeCodeTools = []string{"Task", "Agent", "WebFetch", "WebSearch", "NotebookEdit", "NotebookRead",
	"TodoWrite", "TodoRead", "ExitPlanMode", "BashOutput", "KillShell", "KillBash", "AskUserQuestion", "SlashCommand"}

// claudeCodeOnlyTools are the allowedTools entries (a name, or a
// Name(...) pattern) that name a Claude Code tool capstan does not
// provide, in the order written.
func claudeCodeOnlyTools(allowed []string) []string {
	var out []string
	for _, p := range allowed {
		name, _, _ := strings.Cut(p, "(")
		if slices.Contains(claudeCodeTools, name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// runsOwnToolLoop reports whether spec's provider runs its own tool loop
// (a Bridge provider such as claude-code) rather than capstan's.
func runsOwnToolLoop(spec string) bool {
	provider, _ := modelspec.Parse(spec)
	return !llm.HasModelProvider(provider)
}

// costFunc prices usage for the model of spec with the built-in price
// table and the agent's runner.pricing overrides. A model with no known
// price costs 0 (the provider's own figure, when it reports one, counts).
func (a *Agent) costFunc(spec string) func(event.Usage) float64 {
	_, model := modelspec.Parse(spec)
	table := llm.NewPriceTable(a.spec.Runner.Pricing)
	if _, ok := table.Lookup(model); !ok {
		return nil
	}
	return func(u event.Usage) float64 {
		usd, _ := table.Cost(model, u)
		return usd
	}
}

// commandIdentity is gitIdentity for the model's commands: runner.boundaries.env
// decides, and it is read when the first command runs, after New's
// context may be done (a few quick git config reads).
func (a *Agent) commandIdentity() []string {
	return a.gitIdentity(context.Background(), a.spec.Runner.Boundaries.Env)
}

// gitIdentity is the user's git identity (GIT_AUTHOR_NAME, …;
// proc.Git.UserIdentity) for sandboxed Bash, whose HOME is private:
// without it the model's git commit fails there ("Author identity
// unknown") for a user whose identity is in ~/.gitconfig. nil when env
// (runner.boundaries.env) sets an identity variable, when the work dir's
// repository has an identity of its own, or when none is known.
func (a *Agent) gitIdentity(ctx context.Context, env []string) []string {
	if a.git == nil || slices.ContainsFunc(env, func(e string) bool {
		name, _, _ := strings.Cut(e, "=")
		return proc.IsGitIdentityVar(name)
	}) {
		return nil
	}
	ident, local := a.git.CommitIdentity(ctx, a.workDir, os.Environ())
	if local {
		return nil
	}
	return ident
}
