package agent

import (
	"path/filepath"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/github"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/modelspec"
)

// RunStartEvent is the payload of the run.start journal event.
type RunStartEvent struct {
	// Format is the journal format the run writes (journal.Format); 0 in
	// journals of format 1, which did not record it.
	Format   int               `json:"format,omitempty"`
	RunID    string            `json:"runId"`
	Agent    string            `json:"agent"`
	AgentDir string            `json:"agentDir"`
	WorkDir  string            `json:"workDir"`
	Model    string            `json:"model"`
	Params   map[string]string `json:"params,omitempty"`
	Resumed  bool              `json:"resumed,omitempty"`
	// Iteration is where a resumed run continues from.
	Iteration int `json:"iteration,omitempty"`
	// Rewound is set when the resumed run continues from an earlier
	// iteration than the journal's last finished one (RunRecord.Rewind):
	// the iterations after Iteration no longer count.
	Rewound bool `json:"rewound,omitempty"`
	// Definition is the digest of the pinned agent definition (per file and
	// overall), the file of the run record that holds it and, for a resumed
	// run, how it relates to the recorded one.
	Definition *agentdir.SnapshotRecord `json:"definition,omitempty"`
	// GitHubRepo is the repository capstan's own gh calls name, resolved
	// before the model ran (absent when capstan makes none).
	GitHubRepo *github.Repo `json:"githubRepo,omitempty"`
	// PipelineRun is the id of the pipeline run this run is an agent stage
	// of (absent for a run of its own).
	PipelineRun string `json:"pipelineRun,omitempty"`
	// Temporal says that a Temporal worker ran this part of the run (absent
	// for a local run): where its workflow lives. A local resume refuses
	// such a run and names the command that continues it there.
	Temporal *TemporalRun `json:"temporal,omitempty"`
	// Sandboxed says whether the run's commands ran in the sandbox
	// (absent in runs recorded before capstan recorded it); Unsandboxed
	// says why they did not.
	Sandboxed   *bool  `json:"sandboxed,omitempty"`
	Unsandboxed string `json:"unsandboxed,omitempty"`
	// Options are the run's options that do not come from the agent
	// definition; resume reuses them. Absent in runs recorded before
	// capstan recorded them.
	Options *RunOptions `json:"options,omitempty"`
}

// EventKind implements event.Payload.
func (RunStartEvent) EventKind() event.Kind { return event.KindRunStart }

// TemporalRun is where a run on Temporal lives: the server a worker that
// ran it was connected to, its namespace and the shared task queue, and
// the run's branch in its repository.
type TemporalRun struct {
	Address   string `json:"address"`
	Namespace string `json:"namespace,omitempty"`
	TaskQueue string `json:"taskQueue,omitempty"`
	Branch    string `json:"branch,omitempty"`
}

// RunOptions are the options a run was started with beyond its agent
// definition, model, parameters and work dir.
type RunOptions struct {
	// BaseURL is --base-url or runner.baseUrl ("" = the provider's own
	// setting).
	BaseURL string `json:"baseUrl,omitempty"`
	// Endpoint is where the run's model sent its requests: BaseURL, else
	// the provider's base-URL environment variable; "" = the provider's
	// public endpoint. Resume refuses to send the transcript elsewhere
	// unless told to explicitly.
	Endpoint string `json:"endpoint,omitempty"`
	// EndpointSource says where Endpoint came from: "--base-url", "agent.json
	// runner.baseUrl", "user config base_urls.<provider>", the environment
	// variable's name, or "Config.BaseURL"; "" with no Endpoint.
	EndpointSource string `json:"endpointSource,omitempty"`
	// MaxIterations is --max-iterations (0 = agent.json's budget).
	MaxIterations int `json:"maxIterations,omitempty"`
	// Timeouts and MaxRetryAfter are the --*-timeout and --max-retry-after
	// flags (0 = agent.json's runner.requests or the default).
	Timeouts      llm.Timeouts  `json:"timeouts,omitzero"`
	MaxRetryAfter time.Duration `json:"maxRetryAfter,omitempty"`
	// RunTimeout, MaxTokens, MaxCostUSD, MaxTurns and StepLoopLimit are
	// the limits of agent.Config that overrode the definition's (0 = the
	// definition's).
	RunTimeout    time.Duration `json:"runTimeout,omitempty"`
	MaxTokens     int64         `json:"maxTokens,omitempty"`
	MaxCostUSD    float64       `json:"maxCostUsd,omitempty"`
	MaxTurns      int           `json:"maxTurns,omitempty"`
	StepLoopLimit int           `json:"stepLoopLimit,omitempty"`
}

// endpointEnv is, per provider, the environment variable that sets its
// base URL when neither --base-url nor runner.baseUrl does.
var endpointEnv = map[string]string{"anthropic": "ANTHROPIC_BASE_URL", "claude-code": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}

// CheckBaseURLs refuses a run whose base URL carries a credential
// (llm.CheckBaseURL), wherever it comes from: baseURL (--base-url,
// Config.BaseURL), runner.baseUrl of the definition in agentDir (recorded
// with the definition even when --base-url overrides it), else the base-URL
// environment variable of spec's provider read through getenv, which
// run.start records as the endpoint (nil getenv: not checked). New calls
// it; a client that records the options elsewhere (a Temporal workflow's
// input) calls it first.
func CheckBaseURLs(spec, baseURL, runnerURL, agentDir string, getenv func(string) string) error {
	if runnerURL != "" {
		if err := llm.CheckBaseURL("runner.baseUrl", runnerURL); err != nil {
			e := agenterr.From(err)
			e.File, e.Pointer = filepath.Join(agentDir, agentdir.AgentFile), "/runner/baseUrl"
			return e
		}
	}
	if baseURL != "" {
		return llm.CheckBaseURL("the base URL (--base-url, Config.BaseURL)", baseURL)
	}
	if runnerURL != "" {
		return nil
	}
	if env, u := endpointFromEnv(spec, getenv); u != "" {
		return llm.CheckBaseURL(env, u)
	}
	return nil
}

// Endpoint is where the model of spec sends its requests given baseURL
// (--base-url or runner.baseUrl): baseURL, else the provider's base-URL
// environment variable read through getenv; "" means the provider's
// public endpoint.
func Endpoint(spec, baseURL string, getenv func(string) string) string {
	if baseURL != "" {
		return baseURL
	}
	_, u := endpointFromEnv(spec, getenv)
	return u
}

// EndpointOf is where the run's model sends its requests and where that
// came from (see RunOptions.EndpointSource); both "" for the provider's
// public endpoint.
func (a *Agent) EndpointOf() (endpoint, source string) {
	switch {
	case a.opts.BaseURL != "":
		if a.opts.BaseURLSource != "" {
			return a.opts.BaseURL, a.opts.BaseURLSource
		}
		return a.opts.BaseURL, "Config.BaseURL"
	case a.baseURL != "":
		return a.baseURL, "agent.json runner.baseUrl"
	}
	if env, u := endpointFromEnv(a.model, a.opts.Getenv); u != "" {
		return u, env
	}
	return "", ""
}

// endpointFromEnv returns the base-URL environment variable of spec's
// provider and its value read through getenv ("" when the provider has
// none or getenv is nil).
func endpointFromEnv(spec string, getenv func(string) string) (env, value string) {
	provider, _ := modelspec.Parse(spec)
	env = endpointEnv[provider]
	if env == "" || getenv == nil {
		return env, ""
	}
	return env, getenv(env)
}

// endpointSource is EndpointOf's source.
func (a *Agent) endpointSource() string {
	_, src := a.EndpointOf()
	return src
}
