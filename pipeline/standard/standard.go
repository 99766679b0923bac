// Package standard provides the seven standard reasoning agents, with
// their documented preconditions and postconditions, plus a retrieval
// executor that runs the planned git queries. Together they summarize the
// development activity of a local git repository: every number in the
// summary comes from a fact that cites commit hashes, and the validation
// agent flags any number that no fact backs.
//
// Without a model every agent is rule-based and deterministic. With a model
// (Config.Model), intent detection, inference and summarization ask it,
// through schema-checked pipeline.ModelStage calls.
//
// The retrieval reads the commit history of a local git repository
// with the git command line and turns it into facts that cite commit
// hashes: commits, authors, files and lines changed in a time window, by
// type of change.
//
// The type of a commit is its conventional-commit type ("feat(api): ..." →
// feat) when the subject starts with one of feat, fix, docs, style,
// refactor, perf, test, build, ci, chore, revert. Otherwise a heuristic
// looks at the first word of the subject (after an "area:" prefix):
// fix/fixes/bug/hotfix/correct/repair/resolve → fix; add/implement/
// introduce/create/support/enable/feature/new → feat; doc/docs/document/
// readme → docs; test/tests → test; refactor/rename/move/clean/cleanup/
// simplify/extract/reorganize/remove/delete/drop → refactor; perf/optimize/
// speed → perf; bump/upgrade/release/update/chore/ci/build → chore;
// revert → revert. If no word matches, a subject containing "fix" or "bug"
// is fix, else "other".
package standard

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/pipeline"
)

// Agent ids.
const (
	IntentDetection    = "intent_detection"
	ReasoningStructure = "reasoning_structure"
	RetrievalPlanner   = "retrieval_planner"
	RetrievalExecutor  = "retrieval_executor"
	ContextSynthesizer = "context_synthesizer"
	Inference          = "inference"
	Validation         = "validation"
	Summarization      = "summarization"
)

// IDs lists the agents in pipeline order.
func IDs() []string {
	return []string{IntentDetection, ReasoningStructure, RetrievalPlanner, RetrievalExecutor,
		ContextSynthesizer, Inference, Summarization, Validation}
}

// Keys of the standard pipeline.
const (
	KeyRequest          = "input.request"
	KeyRepo             = "input.repo"
	KeySince            = "input.since"
	KeyNow              = "input.now"
	KeyIntents          = "reasoning.intents"
	KeyEntities         = "reasoning.entities"
	KeyHypotheses       = "reasoning.hypotheses"
	KeyPlans            = "retrieval.plans"
	KeyQueries          = "retrieval.queries"
	KeyArtifacts        = "retrieval.artifacts"
	KeyFacts            = "enrichment.facts"
	KeyDerived          = "enrichment.derived_knowledge"
	KeyConclusions      = "reasoning.conclusions"
	KeyInferenceChain   = "reasoning.inference_chain"
	KeyValidationReport = "diagnostics.validation_reports"
	KeySummary          = "reasoning.summary"
)

// Keys declares the types of the standard keys.
func Keys() []pipeline.KeySpec {
	return []pipeline.KeySpec{
		{Name: KeyIntents, Type: pipeline.TypeArray, Schema: json.RawMessage(intentsSchema)},
		{Name: KeyEntities, Type: pipeline.TypeObject, AllowEmpty: true},
		{Name: KeyHypotheses, Type: pipeline.TypeArray},
		{Name: KeyPlans, Type: pipeline.TypeArray},
		{Name: KeyQueries, Type: pipeline.TypeArray},
		{Name: KeyArtifacts, Type: pipeline.TypeArray},
		{Name: KeyFacts, Type: pipeline.TypeArray},
		{Name: KeyDerived, Type: pipeline.TypeArray, AllowEmpty: true},
		{Name: KeyConclusions, Type: pipeline.TypeArray, Schema: json.RawMessage(conclusionsSchema)},
		{Name: KeyInferenceChain, Type: pipeline.TypeArray, AllowEmpty: true},
		{Name: KeyValidationReport, Type: pipeline.TypeArray},
		{Name: KeySummary, Type: pipeline.TypeString},
	}
}

const intentsSchema = `{"type":"array","minItems":1,"items":{"type":"object","required":["type","confidence"],` +
	`"properties":{"type":{"type":"string","minLength":1},"confidence":{"type":"number","minimum":0,"maximum":1}}}}`

const conclusionsSchema = `{"type":"array","items":{"type":"object","required":["id","description","confidence","evidence"],` +
	`"properties":{"id":{"type":"string"},"description":{"type":"string","minLength":1},` +
	`"confidence":{"type":"number","minimum":0,"maximum":1},"evidence":{"type":"array","items":{"type":"string"}}}}}`

// Intent is one detected intent.
type Intent struct {
	Type       string  `json:"type"`
	Confidence float64 `json:"confidence"`
}

// Hypothesis is a reasoning goal to confirm with facts.
type Hypothesis struct {
	ID           string   `json:"id"`
	Description  string   `json:"description"`
	Intent       string   `json:"intent"`
	Dependencies []string `json:"dependencies"`
}

// RetrievalPlan says which sources answer which hypotheses.
type RetrievalPlan struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Sources     []string `json:"sources"`
	Priority    int      `json:"priority"`
	Queries     []string `json:"queries"`
	Hypotheses  []string `json:"hypotheses"`
}

// Query is one retrieval: git log of Repo over a window.
type Query struct {
	ID          string `json:"id"`
	Source      string `json:"source"`
	Repo        string `json:"repo"`
	Role        string `json:"role"` // "current" or "previous"
	Window      Window `json:"window"`
	QueryString string `json:"query_string"`
}

// Artifact is the result of one query.
type Artifact struct {
	ID      string   `json:"id"`
	QueryID string   `json:"query_id"`
	Type    string   `json:"type"`
	Source  string   `json:"source"`
	Role    string   `json:"role"`
	Window  Window   `json:"window"`
	Commits []Commit `json:"commits"`
}

// Derived is a piece of derived knowledge with the facts it rests on.
type Derived struct {
	ID      string   `json:"id"`
	Content string   `json:"content"`
	BasedOn []string `json:"based_on"`
}

// Conclusion is an inference from facts; Evidence lists fact ids.
type Conclusion struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Confidence  float64  `json:"confidence"`
	Evidence    []string `json:"evidence"`
}

// InferenceStep is one step of reasoning.inference_chain.
type InferenceStep struct {
	Step       int      `json:"step"`
	From       []string `json:"from"`
	Conclusion string   `json:"conclusion"`
	Rule       string   `json:"rule"`
}

// ValidationReport is one entry of diagnostics.validation_reports.
type ValidationReport struct {
	AgentID         string    `json:"agent_id"`
	Passed          bool      `json:"passed"`
	Violations      []string  `json:"violations"`
	UnbackedNumbers []string  `json:"unbacked_numbers"`
	Checks          []string  `json:"checks"`
	Timestamp       time.Time `json:"timestamp"`
}

// Config configures the standard agents.
type Config struct {
	// Model, when set, drives intent detection, inference and
	// summarization; nil = rule-based.
	Model llm.Model
	// ModelName is passed to the model ("" = the provider's default).
	ModelName string
	// MaxTokens bounds each model answer (0 = provider default).
	MaxTokens int
}

// Input builds the pipeline input: input.request, input.repo, input.since
// (the window start: "7d", "2w", "3m", "1y", "YYYY-MM-DD"; "" leaves it
// out, and the request or the 7-day default decides) and input.now
// (RFC 3339). Without since, a request whose time window cannot be read is
// an error here, before anything runs.
func Input(request, repo, since string, now time.Time) (*pipeline.AgentContext, error) {
	ac := pipeline.NewAgentContext("", "")
	if since != "" {
		if _, err := ParseSince(since, now); err != nil {
			return nil, fmt.Errorf("--since: %w", err)
		}
	} else if _, err := WindowFromText(request); err != nil {
		return nil, err
	}
	for k, v := range map[string]string{"request": request, "repo": repo, "since": since, "now": now.UTC().Format(time.RFC3339)} {
		if v == "" && k == "since" { // absent: the request or the 7-day default decides
			continue
		}
		if err := ac.SetInput(k, v); err != nil {
			return nil, err
		}
	}
	return ac, nil
}

// Agent returns the standard agent with the given id.
func Agent(id string, cfg Config) (pipeline.ReasoningAgent, error) {
	switch id {
	case IntentDetection:
		if cfg.Model != nil {
			return modelIntent(cfg)
		}
		return fa(IntentDetection, nil, []string{KeyIntents, KeyEntities}, []string{KeySince}, detectIntents), nil
	case ReasoningStructure:
		return fa(ReasoningStructure, []string{KeyIntents}, []string{KeyHypotheses}, nil, buildHypotheses), nil
	case RetrievalPlanner:
		return fa(RetrievalPlanner, []string{KeyIntents, KeyHypotheses}, []string{KeyPlans, KeyQueries}, []string{KeyEntities, KeySince}, planRetrieval), nil
	case RetrievalExecutor:
		return fa(RetrievalExecutor, []string{KeyQueries}, []string{KeyArtifacts}, nil, executeRetrieval), nil
	case ContextSynthesizer:
		return fa(ContextSynthesizer, []string{KeyPlans, KeyQueries}, []string{KeyFacts, KeyDerived}, []string{KeyArtifacts}, synthesize), nil
	case Inference:
		if cfg.Model != nil {
			return modelInference(cfg)
		}
		return fa(Inference, []string{KeyHypotheses, KeyFacts}, []string{KeyConclusions, KeyInferenceChain}, []string{KeyDerived}, infer), nil
	case Validation:
		return fa(Validation, []string{KeyIntents, KeyConclusions}, []string{KeyValidationReport}, []string{KeyFacts, KeySummary}, validate), nil
	case Summarization:
		if cfg.Model != nil {
			return modelSummary(cfg)
		}
		return fa(Summarization, []string{KeyConclusions, KeyFacts}, []string{KeySummary}, nil, summarize), nil
	}
	return nil, fmt.Errorf("unknown standard agent %q (known: %v)", id, IDs())
}

// Agents returns every standard agent, in pipeline order.
func Agents(cfg Config) ([]pipeline.ReasoningAgent, error) {
	var out []pipeline.ReasoningAgent
	for _, id := range IDs() {
		a, err := Agent(id, cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// NewManager returns a manager with the standard agents registered, the
// retrieval executor's git reads bounded by a 2-minute timeout and one
// retry.
func NewManager(pcfg pipeline.Config, cfg Config) (*pipeline.Manager, error) {
	m := pipeline.New(pcfg)
	agents, err := Agents(cfg)
	if err != nil {
		return nil, err
	}
	for _, a := range agents {
		sc := pipeline.StageConfig{}
		if a.AgentID() == RetrievalExecutor {
			sc.Retry = pipeline.RetryPolicy{MaxRetries: 1}
		}
		if err := m.RegisterStage(a, sc); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func fa(id string, pre, post, opt []string, f func(context.Context, *pipeline.AgentContext) error) *pipeline.FuncAgent {
	return &pipeline.FuncAgent{ID: id, Pre: pre, Post: post, Optional: opt, Declared: keysFor(pre, post, opt), Fn: f}
}

// keysFor returns the declarations of the standard keys among lists.
func keysFor(lists ...[]string) []pipeline.KeySpec {
	want := map[string]bool{}
	for _, l := range lists {
		for _, k := range l {
			want[k] = true
		}
	}
	var out []pipeline.KeySpec
	for _, ks := range Keys() {
		if want[ks.Name] {
			out = append(out, ks)
		}
	}
	return out
}

// now reads input.now.
func now(ac *pipeline.AgentContext) (time.Time, error) {
	s := ac.String(KeyNow)
	if s == "" {
		return time.Time{}, fmt.Errorf("%s not found", KeyNow)
	}
	return time.Parse(time.RFC3339, s)
}
