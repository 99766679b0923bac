// Package agentdir reads an agent folder into Go values: agent.json and
// steps_registry.json (their data model, loading with syntax checks only,
// validation against the JSON Schemas, semantics and cross-references,
// climpt's spellings), the C3L prompt files the steps name, and the
// snapshot that pins the folder for the life of a run. LoadAndValidate
// returns an *Agent that is valid by construction; `capstan validate` runs
// the same loader.
package agentdir

import (
	"encoding/json"
	"io/fs"
	"net"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/llm/modelspec"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

// AgentFile is the agent definition's file name inside an agent folder.
const AgentFile = "agent.json"

// DefaultRegistryFile is steps_registry.json's default path in the folder.
const DefaultRegistryFile = "steps_registry.json"

// Definition is agent.json.
type Definition struct {
	Schema      string               `json:"$schema,omitempty"`
	Version     string               `json:"version"`
	Name        string               `json:"name"`
	DisplayName string               `json:"displayName,omitempty"`
	Description string               `json:"description"`
	Parameters  map[string]Parameter `json:"parameters,omitempty"`
	Runner      Runner               `json:"runner"`

	// src is the file this definition was loaded from (nil when built in
	// Go); Validate uses it for JSON Schema checks and line:col.
	src *source
	// files holds the agent's other files (prompts, schemas, scripts) of
	// a definition built in Go with NewAgentFS (nil otherwise).
	files fs.FS
}

// Parameter declares one agent parameter. Each becomes a CLI flag (Cli, by
// default "--<name>") and the prompt variable {uv-<name>}.
type Parameter struct {
	Type        string           `json:"type"` // string | number | boolean
	Description string           `json:"description,omitempty"`
	Required    bool             `json:"required,omitempty"`
	Default     json.RawMessage  `json:"default,omitempty"`
	Cli         string           `json:"cli,omitempty"`
	Validation  *ParamValidation `json:"validation,omitempty"`
}

// ParamValidation restricts a parameter's value.
type ParamValidation struct {
	Min     *float64 `json:"min,omitempty"`
	Max     *float64 `json:"max,omitempty"`
	Pattern string   `json:"pattern,omitempty"`
	Enum    []string `json:"enum,omitempty"`
}

// Runner is agent.json's runner section.
type Runner struct {
	// Model is "provider:model"; --model overrides it.
	Model            string     `json:"model,omitempty"`
	BaseURL          string     `json:"baseUrl,omitempty"`
	SystemPromptPath string     `json:"systemPromptPath,omitempty"`
	Prompts          Prompts    `json:"prompts"`
	Completion       Completion `json:"completion"`
	Boundaries       Boundaries `json:"boundaries"`
	Budgets          Budgets    `json:"budgets"`
	// Requests bound each model request of the HTTP providers.
	Requests Requests `json:"requests"`
	// Skills lists skill folders (relative to the agent dir) whose L1
	// metadata (name and description) goes into the system prompt.
	Skills []string `json:"skills,omitempty"`
	// MCPServers declares MCP servers whose tools the model may call as
	// mcp__<server>__<tool>.
	MCPServers map[string]tooldecl.MCPServer `json:"mcpServers,omitempty"`
	// Pricing overrides the per-model price table (USD per million tokens).
	Pricing map[string]modelspec.Price `json:"pricing,omitempty"`
	// ContextWindow overrides the model's context window in tokens (the
	// built-in table knows the Anthropic and OpenAI models; local servers
	// need it set).
	ContextWindow int64 `json:"contextWindow,omitempty"`
	// Compaction configures how long sessions are kept within the context
	// window (nil = on, with the defaults).
	Compaction *Compaction `json:"compaction,omitempty"`
	// Verification hardens verification against a model that games it.
	Verification Verification `json:"verification,omitzero"`
	// Integrations connects the run to outside systems (GitHub).
	Integrations Integrations `json:"integrations,omitzero"`
	// SchemasDir is the folder of the output schemas, relative to the agent
	// folder (default "schemas").
	SchemasDir string `json:"schemasDir,omitempty"`

	// Flow and Verdict are climpt's spellings of the fields above
	// (runner.flow.*, runner.verdict); ApplyDefaults copies what they mean
	// into SystemPromptPath, Prompts, Model, SchemasDir, Completion and
	// Budgets. Actions, Execution and Logging are climpt sections capstan
	// does not act on; Validate warns about them (see docs/climpt.md).
	Flow      *Flow           `json:"flow,omitempty"`
	Verdict   *Verdict        `json:"verdict,omitempty"`
	Actions   json.RawMessage `json:"actions,omitempty"`
	Execution json.RawMessage `json:"execution,omitempty"`
	Logging   json.RawMessage `json:"logging,omitempty"`
}

// Compaction is runner.compaction.
type Compaction struct {
	// Enabled turns compaction on or off (nil = on). Off, a request that
	// would exceed the window fails with CONTEXT_OVERFLOW.
	Enabled *bool `json:"enabled,omitempty"`
	// Threshold is the share of the window at which compaction starts
	// (0 = 0.75); Target the share it compacts down to (0 = 0.5).
	Threshold float64 `json:"threshold,omitempty"`
	Target    float64 `json:"target,omitempty"`
	// KeepToolResults is how many of the newest tool results stay
	// verbatim (nil = 3; 0 = none).
	KeepToolResults *int `json:"keepToolResults,omitempty"`
	// SummaryModel ("provider:model") summarizes older turns ("" = the
	// run's model).
	SummaryModel string `json:"summaryModel,omitempty"`
}

// Verification configures what the model may not change to make
// verification pass.
type Verification struct {
	// Protect lists globs (doublestar syntax, relative to the work dir,
	// "/"-separated) of files the model may read but not change: the
	// built-in Write and Edit refuse them, and the verdict stage fails
	// verification (pattern protected-changed) while any of them differs
	// from the run's start, was deleted or was added.
	Protect []string `json:"protect,omitempty"`
	// TestBaseline, on by default, runs each command validator that runs
	// tests once before the first iteration and fails verification when a
	// later run lost tests against it (no test ran, a test disappeared or
	// is skipped, fewer tests ran). false turns both off, for tasks that
	// remove tests.
	TestBaseline *bool `json:"testBaseline,omitempty"`
	// ProtectRunnerConfig, on by default, adds to Protect the files the
	// test runners of the command validators read for their configuration
	// (protect.RunnerConfig: .pytest.ini, conftest.py, jest.config.*,
	// node_modules/.bin, go.work, …). false leaves protection to Protect.
	ProtectRunnerConfig *bool `json:"protectRunnerConfig,omitempty"`
	// Hidden lists globs (relative to the agent folder) of test files the
	// model never sees: pinned with the definition, placed at the same
	// path in the work dir only while the test validators run for the
	// hidden-tests check, and removed after (verify.HiddenSet).
	Hidden []string `json:"hidden,omitempty"`
	// TestChanges is the policy for the model's requests to change a
	// protected file (a line REQUEST_TEST_CHANGE: <file> <reason>):
	// TestChangesRefuse ("" = the default) answers every request with
	// "fix the code instead"; TestChangesHuman stops the run until a human
	// approves or rejects the change (capstan approve / reject);
	// TestChangesHiddenTests accepts it when the hidden tests (Hidden)
	// pass with it. Under the last two, Write and Edit do not refuse
	// protected files (the model makes the change it asks for); every
	// change not approved still fails verification.
	TestChanges string `json:"testChanges,omitempty"`
	// CleanRun, on by default, runs the test validators that verified the
	// completion once more after the model's last turn, each in a new
	// process with fresh temporary and build-cache directories and fresh
	// copies of the pinned toolchain configuration; a result that differs
	// from the verification's fails the run (CLEAN_RUN_DIFFERS). false
	// skips that run.
	CleanRun *bool `json:"cleanRun,omitempty"`
}

// CleanRunOn reports whether the clean run after the model's last turn
// runs (the default).
func (v Verification) CleanRunOn() bool { return v.CleanRun == nil || *v.CleanRun }

// Values of Verification.TestChanges.
const (
	TestChangesRefuse      = "refuse"
	TestChangesHuman       = "human"
	TestChangesHiddenTests = "hiddenTests"
)

// TestChangesPolicy is TestChanges with the default applied.
func (v Verification) TestChangesPolicy() string {
	if v.TestChanges == "" {
		return TestChangesRefuse
	}
	return v.TestChanges
}

// ProtectRunnerConfigOn reports whether the test runners' configuration
// files are protected (the default).
func (v Verification) ProtectRunnerConfigOn() bool {
	return v.ProtectRunnerConfig == nil || *v.ProtectRunnerConfig
}

// TestBaselineOn reports whether the no-lost-tests check runs (the
// default).
func (v Verification) TestBaselineOn() bool { return v.TestBaseline == nil || *v.TestBaseline }

// Prompts locates prompt files.
type Prompts struct {
	// Registry is steps_registry.json's path (default "steps_registry.json").
	Registry string `json:"registry,omitempty"`
	// Base is the C3L root directory (default "prompts").
	Base string `json:"base,omitempty"`
	// FallbackDir is the global fallback directory, the last link of the
	// fallback chain; "" disables that link of the chain.
	FallbackDir string `json:"fallbackDir,omitempty"`
}

// Completion configures the agent-level completion handler: what makes a
// run complete.
type Completion struct {
	// Type is one of: iterationBudget, keyword, composite, stepFlow,
	// structured, externalState, custom.
	Type string `json:"type"`
	// Name identifies this condition in a composite's getConditionStates.
	Name          string `json:"name,omitempty"`
	MaxIterations int    `json:"maxIterations,omitempty"`
	Keyword       string `json:"keyword,omitempty"`
	// Mode ("any" | "all") and Conditions configure a composite.
	Mode       string       `json:"mode,omitempty"`
	Conditions []Completion `json:"conditions,omitempty"`
	// Validators names registry validators that must pass before a declared
	// completion is accepted (external verification).
	Validators []string `json:"validators,omitempty"`
	// Handler names a custom handler registered in Go (type "custom").
	Handler string `json:"handler,omitempty"`
	// Options are handler-specific settings (externalState: resource,
	// number, state; structured: field paths).
	Options map[string]json.RawMessage `json:"options,omitempty"`
}

// Boundaries says what the model may do.
type Boundaries struct {
	// AllowedTools lists tool patterns: "Read", "Bash(git log:*)", "mcp__srv__*",
	// "*". Empty means every tool permitted by PermissionMode.
	AllowedTools    []string `json:"allowedTools,omitempty"`
	DisallowedTools []string `json:"disallowedTools,omitempty"`
	// PermissionMode is default | acceptEdits | plan | bypassPermissions.
	PermissionMode string `json:"permissionMode,omitempty"`
	// MaxTurns bounds model turns per iteration (tool loop).
	MaxTurns int `json:"maxTurns,omitempty"`
	// MaxToolCallsPerTurn bounds the tool calls run of one model turn
	// (0 = 64); the calls after it are answered with an error.
	MaxToolCallsPerTurn int      `json:"maxToolCallsPerTurn,omitempty"`
	Sandbox             *Sandbox `json:"sandbox,omitempty"`
	// Env is the allow-list of environment variables passed to Bash,
	// validator commands and MCP servers on top of the minimal base
	// (PATH, HOME, LANG, …): "NAME" copies NAME from capstan's environment
	// (secrets included, on purpose), "PREFIX*" copies the non-secret
	// variables starting with PREFIX, "NAME=value" sets one.
	Env []string `json:"env,omitempty"`
}

// Sandbox configures sandboxing of the Bash tool, subprocess steps, command
// validators, skill scripts and MCP servers started by capstan. They run
// in the sandbox unless Enabled is false: an agent that says nothing is
// sandboxed.
type Sandbox struct {
	// Enabled is nil when agent.json does not say (sandboxed, the
	// default); only an explicit false opts out. Read it with On.
	Enabled *bool `json:"enabled,omitempty"`
	// Network is the network sandboxed commands reach: none (nil, or
	// false), every host ("network": true), or the listed host:port pairs
	// ("network": {"allow": [...]}). Read it with Open and AllowList.
	Network *SandboxNetwork `json:"network,omitempty"`
	// AllowUnsandboxed runs commands unsandboxed where the kernel cannot
	// sandbox (explicit opt-out).
	AllowUnsandboxed bool `json:"allowUnsandboxed,omitempty"`
}

// SandboxNetwork is runner.boundaries.sandbox.network, written as a
// boolean (true: every host, unfiltered; false: none) or as an object:
// {"allow": ["api.example.com:443", "127.0.0.1:8080"]} lets sandboxed
// commands reach those host:port pairs only, through a proxy capstan runs
// outside the sandbox. climpt's {"mode", "trustedDomains"} are kept for
// validate, which accepts mode "none" (no network) only.
type SandboxNetwork struct {
	// All is "network": true.
	All bool `json:"-"`
	// Allow lists the reachable host:port pairs.
	Allow []string `json:"allow,omitempty"`
	// Mode and TrustedDomains are climpt's spelling.
	Mode           string   `json:"mode,omitempty"`
	TrustedDomains []string `json:"trustedDomains,omitempty"`
}

// UnmarshalJSON reads the boolean and the object form.
func (n *SandboxNetwork) UnmarshalJSON(b []byte) error {
	var all bool
	if err := json.Unmarshal(b, &all); err == nil {
		*n = SandboxNetwork{All: all}
		return nil
	}
	type object SandboxNetwork
	var o object
	if err := typeMismatchTolerated(json.Unmarshal(b, &o)); err != nil {
		return err
	}
	*n = SandboxNetwork(o)
	return nil
}

// MarshalJSON writes the boolean form unless the object says more.
func (n SandboxNetwork) MarshalJSON() ([]byte, error) {
	if n.Allow == nil && n.Mode == "" && n.TrustedDomains == nil {
		return json.Marshal(n.All)
	}
	type object SandboxNetwork
	return json.Marshal(object(n))
}

// Open reports whether sandboxed commands keep the whole network
// ("network": true).
func (s *Sandbox) Open() bool { return s != nil && s.Network != nil && s.Network.All }

// AllowList is the host:port pairs of "network": {"allow": [...]} and
// of climpt's "trustedDomains" (see TrustedDomainPair), unless climpt's
// "mode" is "none".
func (s *Sandbox) AllowList() []string {
	if s == nil || s.Network == nil || s.Network.All {
		return nil
	}
	out := s.Network.Allow
	if s.Network.Mode != "none" {
		for _, d := range s.Network.TrustedDomains {
			out = append(slices.Clip(out), TrustedDomainPair(d))
		}
	}
	return out
}

// TrustedDomainPair is the allow-list pair of one of climpt's
// trustedDomains: the domain at port 443 (HTTPS, which is what climpt's
// domains are reached by), or the entry as written when it names a port.
// A wildcard ("*.github.com") is kept as written and refused by validate
// and by the sandbox (AC-SANDBOX-NETWORK): the allow-list names hosts.
func TrustedDomainPair(domain string) string {
	d := strings.TrimSpace(domain)
	if _, _, err := net.SplitHostPort(d); err == nil {
		return d
	}
	if strings.Contains(d, ":") && !strings.HasPrefix(d, "[") {
		return "[" + d + "]:443" // a bare IPv6 address
	}
	return net.JoinHostPort(strings.Trim(d, "[]"), "443")
}

// On reports whether the agent's commands run in the sandbox: true unless
// the agent opts out with "enabled": false (a nil Sandbox is on).
func (s *Sandbox) On() bool { return s == nil || s.Enabled == nil || *s.Enabled }

// Budgets bound a run.
type Budgets struct {
	MaxIterations  int     `json:"maxIterations,omitempty"`
	TimeoutSeconds int     `json:"timeoutSeconds,omitempty"`
	MaxTokens      int64   `json:"maxTokens,omitempty"`
	MaxCostUSD     float64 `json:"maxCostUsd,omitempty"`
}

// Requests bound each model request of the HTTP providers (anthropic,
// openai). 0 = capstan's default; the matching --*-timeout and
// --max-retry-after flags override them.
type Requests struct {
	// ConnectTimeoutSeconds bounds opening the connection.
	ConnectTimeoutSeconds float64 `json:"connectTimeoutSeconds,omitempty"`
	// FirstByteTimeoutSeconds bounds the wait for the response headers.
	FirstByteTimeoutSeconds float64 `json:"firstByteTimeoutSeconds,omitempty"`
	// StreamIdleTimeoutSeconds bounds a silence inside the response stream.
	StreamIdleTimeoutSeconds float64 `json:"streamIdleTimeoutSeconds,omitempty"`
	// MaxRetryAfterSeconds is the longest retry-after a server may ask
	// capstan to wait; a longer one ends the run with a recoverable error.
	MaxRetryAfterSeconds float64 `json:"maxRetryAfterSeconds,omitempty"`
}

// Registry is steps_registry.json.
type Registry struct {
	Schema  string `json:"$schema,omitempty"`
	AgentID string `json:"agentId"`
	Version string `json:"version,omitempty"`
	// C1 is the C3L category of step prompts (default "steps").
	C1        string `json:"c1,omitempty"`
	EntryStep string `json:"entryStep"`
	// StepLoopLimit bounds consecutive runs of one step (default 10); a
	// run that exceeds it stops with STEP_LOOP_LIMIT.
	StepLoopLimit      int                          `json:"stepLoopLimit,omitempty"`
	Steps              map[string]Step              `json:"steps"`
	CompletionPatterns map[string]CompletionPattern `json:"completionPatterns,omitempty"`
	Validators         map[string]Validator         `json:"validators,omitempty"`
	// ValidationSteps verify closure steps, keyed by the id of the step
	// they verify (intent routing).
	ValidationSteps map[string]ValidationStep `json:"validationSteps,omitempty"`

	// EntryStepMapping is climpt's entry step per verdict type
	// ("poll:state": "initial.polling"); ApplyDefaults sets EntryStep from
	// the entry of the agent's runner.verdict.type when EntryStep is unset.
	EntryStepMapping map[string]string `json:"entryStepMapping,omitempty"`
	// FailurePatterns is climpt's name of CompletionPatterns; ApplyDefaults
	// merges it into CompletionPatterns.
	FailurePatterns map[string]CompletionPattern `json:"failurePatterns,omitempty"`
	// PathTemplate and PathTemplateNoAdaptation are climpt's prompt path
	// templates; capstan's layout is fixed, so only its own layout
	// ({c1}/{c2}/{c3}/f_{edition}_{adaptation}.md and
	// {c1}/{c2}/{c3}/f_{edition}.md) is accepted.
	PathTemplate             string `json:"pathTemplate,omitempty"`
	PathTemplateNoAdaptation string `json:"pathTemplateNoAdaptation,omitempty"`

	// src is the file this registry was loaded from (nil when built in Go).
	src *source
	// entryFromVerdict is set when EntryStep was taken from agent.json's
	// runner.verdict.config.entryStep (climpt's detect:graph), so that a
	// problem with it is located there.
	entryFromVerdict bool
}

// Step is one step of the step machine.
type Step struct {
	StepID      string `json:"stepId"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// Type is normal (default) | gateway | subStep; climpt's "prompt"
	// means normal.
	Type string `json:"type,omitempty"`
	// C2, C3, Edition, Adaptation locate the step's prompt:
	// {base}/{c1}/{c2}/{c3}/f_{edition}[_{adaptation}].md.
	C2         string `json:"c2"`
	C3         string `json:"c3"`
	Edition    string `json:"edition,omitempty"`
	Adaptation string `json:"adaptation,omitempty"`
	// Fallback is a prompt path (relative to the prompts base) tried when
	// the C3L file is missing (the second link of the fallback chain).
	Fallback string `json:"fallback,omitempty"`
	// UVVariables lists the {uv-x} variables the prompt needs.
	UVVariables []string `json:"uvVariables,omitempty"`

	Check      *StepCheck   `json:"check,omitempty"`
	Retry      *RetryPolicy `json:"retry,omitempty"`
	Escalation *Escalation  `json:"escalation,omitempty"`
	// SubSteps run in order as part of this step (sequential only).
	SubSteps   []string `json:"subSteps,omitempty"`
	Sequential *bool    `json:"sequential,omitempty"`

	// CompletionConditions must all hold for a declared completion of this
	// step to be accepted.
	CompletionConditions []CompletionCondition `json:"completionConditions,omitempty"`
	OnFailure            *OnFailure            `json:"onFailure,omitempty"`
	OutputSchemaRef      *SchemaRef            `json:"outputSchemaRef,omitempty"`
	// Model overrides runner.model for this step.
	Model string `json:"model,omitempty"`
	// Protect lists globs (as runner.verification.protect) of files the
	// model may not change while this step runs, compared with their
	// state when the step was entered.
	Protect []string `json:"protect,omitempty"`

	// StepKind is work | verification | closure (default: implied by c2,
	// see Kind). Only a closure step's closing completes a routed flow.
	StepKind string `json:"stepKind,omitempty"`
	// StructuredGate routes the step by the intent in its structured
	// output (instead of a check).
	StructuredGate *StructuredGate `json:"structuredGate,omitempty"`
	// Transitions map an intent to the next step.
	Transitions map[string]IntentTransition `json:"transitions,omitempty"`
	// Inputs fill prompt variables from earlier steps' outputs, keyed by
	// an input name.
	Inputs map[string]InputSpec `json:"inputs,omitempty"`
	// Runner makes the step a subprocess step: capstan runs the command
	// instead of calling the model.
	Runner *StepRunner `json:"runner,omitempty"`
	// UsesStdin is climpt's flag for prompts that read standard input
	// ({input_text}); capstan accepts only false.
	UsesStdin *bool `json:"usesStdin,omitempty"`
}

// StepCheck decides a step's transition: which of its onPass and onFail
// moves is taken.
type StepCheck struct {
	// Type is keyword | action | prompt.
	Type string `json:"type"`
	// Keywords pass a keyword check when one appears in the response text.
	Keywords []string `json:"keywords,omitempty"`
	// Actions pass an action check when these tools ran without error.
	Actions []string `json:"actions,omitempty"`
	// Prompt is the judging prompt of a prompt check (the model is asked to
	// judge the response); a C3L-relative path or inline text.
	Prompt string     `json:"prompt,omitempty"`
	OnPass Transition `json:"onPass"`
	OnFail Transition `json:"onFail"`
}

// Transition is where a check sends the machine.
type Transition struct {
	Next     string `json:"next,omitempty"`
	Complete bool   `json:"complete,omitempty"`
	// Retry re-runs the same step under the step's retry policy.
	Retry bool `json:"retry,omitempty"`
	// Escalate triggers the step's escalation.
	Escalate bool `json:"escalate,omitempty"`
}

// RetryPolicy says how often a failing step is run again and what happens
// when those retries are used up (an error, a fallback step, or a skip).
type RetryPolicy struct {
	MaxRetries   *int   `json:"maxRetries,omitempty"`  // default 3
	OnExhausted  string `json:"onExhausted,omitempty"` // error | fallback | skip
	FallbackStep string `json:"fallbackStep,omitempty"`
}

// Escalation says where a step that cannot go on hands over, how that is
// announced, and how the flow goes on afterwards (climpt calls it
// EscalationConfig).
type Escalation struct {
	EscalateTo         string `json:"escalateTo"`
	NotificationMethod string `json:"notificationMethod,omitempty"` // in_agent | webhook | log
	ReturnFlow         string `json:"returnFlow,omitempty"`         // resume | abort | restart
	WebhookURL         string `json:"webhookUrl,omitempty"`
	TimeoutSeconds     int    `json:"timeoutSeconds,omitempty"`
	MaxAttempts        int    `json:"maxAttempts,omitempty"`
}

// CompletionCondition names a validator that must pass.
type CompletionCondition struct {
	Validator string                     `json:"validator"`
	Params    map[string]json.RawMessage `json:"params,omitempty"`
}

// OnFailure says what happens when completion conditions fail.
type OnFailure struct {
	Action      string `json:"action"` // retry | abort | skip
	MaxAttempts int    `json:"maxAttempts,omitempty"`
}

// SchemaRef points at a named schema in a schema file under schemas/.
type SchemaRef struct {
	File   string `json:"file"`
	Schema string `json:"schema"`
}

// CompletionPattern is a failure pattern: which retry prompt to
// send and which params it needs.
type CompletionPattern struct {
	Description string   `json:"description,omitempty"`
	Edition     string   `json:"edition"`
	Adaptation  string   `json:"adaptation,omitempty"`
	Params      []string `json:"params,omitempty"`
}

// Validator defines a check of the world that a declared completion must
// pass: a command to run, a file to look at, or a check registered in Go,
// and the failure pattern it names when it fails.
type Validator struct {
	Type           string            `json:"type"` // command | file | custom
	Command        string            `json:"command,omitempty"`
	Path           string            `json:"path,omitempty"`    // file validators
	Schema         *SchemaRef        `json:"schema,omitempty"`  // file validators: validate content
	Handler        string            `json:"handler,omitempty"` // custom validators
	SuccessWhen    string            `json:"successWhen,omitempty"`
	FailurePattern string            `json:"failurePattern"`
	ExtractParams  map[string]string `json:"extractParams,omitempty"`
	TimeoutSeconds int               `json:"timeoutSeconds,omitempty"`
}
