// Package workflow reads issue-driven multi-agent workflows in climpt's
// format (.agent/workflow.json): phases named by issue labels, the agent
// each actionable phase dispatches, how an agent's outcome maps to the
// next phase, and the rules that bound the loop. It validates a file with
// coded errors and warnings (every field is acted on or reported as
// inert, with the reason), and runs an issue through its phases: read the
// labels, pick the phase and agent, dispatch it, move the labels, comment
// and close as one compensated unit, until a terminal or blocking phase.
package workflow

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/github"
)

// Phase types.
const (
	Actionable = "actionable"
	Terminal   = "terminal"
	Blocking   = "blocking"
)

// Agent roles.
const (
	Transformer = "transformer"
	Validator   = "validator"
)

// Default rules, as climpt applies them when rules omit a field.
const (
	DefaultMaxCycles    = 5
	DefaultCycleDelayMs = 10000
)

// DefaultSubjectStore is the subject store path when subjectStore omits
// one (relative to the work dir).
const DefaultSubjectStore = ".agent/climpt/tmp/issues"

// Workflow is a parsed workflow file. Maps keep the file's member order
// where it matters (LabelMapping, Labels, PayloadFrom).
type Workflow struct {
	// File is the path the workflow was read from.
	File        string
	Schema      string
	Version     string
	LabelPrefix string
	// PhaseIDs are the phases in file order.
	PhaseIDs []string
	Phases   map[string]*Phase
	// LabelMapping is label → phase in file order.
	LabelMapping []LabelPhase
	// Labels are the label specs (color, description) in file order; nil
	// when the file declares no labels section.
	Labels   []LabelSpec
	AgentIDs []string
	Agents   map[string]*Agent
	Rules    Rules
	// CommentTemplates are handoff.commentTemplates: key → template.
	CommentTemplates map[string]string
	// HandoffSection says whether the file has a handoff section: a move
	// then undoes its labels when a later step fails even if no comment
	// template matched (climpt's compensation order).
	HandoffSection   bool
	SubjectStorePath string
	Prioritizer      *Prioritizer
	Handoffs         []Handoff
	// PayloadSchemaRef is payloadSchema.$ref ("" when absent).
	PayloadSchemaRef string
}

// Phase is one entry of phases.
type Phase struct {
	ID   string
	Type string
	// Priority ranks actionable phases (lower wins); HasPriority says
	// whether the file sets it.
	Priority    float64
	HasPriority bool
	Agent       string
}

// LabelPhase is one entry of labelMapping.
type LabelPhase struct {
	Label string
	Phase string
}

// LabelSpec is one entry of labels: a repository label.
type LabelSpec = github.Label

// Agent is one entry of agents.
type Agent struct {
	ID   string
	Role string
	// Directory is the agent folder's name (default: the agent id),
	// relative to the agents directory (.agent).
	Directory       string
	OutputPhase     string
	OutputPhases    map[string]string
	FallbackPhase   string
	FallbackPhases  map[string]string
	CloseOnComplete bool
	CloseCondition  string
	HasCondition    bool
}

// Rules bound the loop.
type Rules struct {
	MaxCycles            int
	CycleDelayMs         int64
	MaxConsecutivePhases int
	// RateLimitThreshold and RateLimitPollIntervalMs are read and
	// reported as inert (see Validate).
	RateLimitThreshold      *float64
	RateLimitPollIntervalMs *int64
}

// Prioritizer orders a batch by priority labels.
type Prioritizer struct {
	Agent        string
	Labels       []string
	DefaultLabel string
}

// Handoff is one entry of handoffs: when an agent ends with an outcome,
// resolve a payload, write it as an artifact and persist it.
type Handoff struct {
	ID               string
	FromAgent        string
	Outcome          string
	EmitType         string
	SchemaRef        string
	EmitPath         string
	PayloadFrom      []PayloadField
	PersistPayloadTo string
}

// PayloadField is one entry of a handoff's payloadFrom: a key and its
// expression ($.agent.result.PATH, $.workflow.context.now, 'literal', or
// a text holding ${payload.KEY}).
type PayloadField struct {
	Key  string
	Expr string
}

// Phase returns the phase a label names (after the label prefix is
// stripped), or nil.
func (w *Workflow) phaseOfLabel(label string) *Phase {
	bare, ok := w.stripPrefix(label)
	if !ok {
		return nil
	}
	for _, lp := range w.LabelMapping {
		if lp.Label == bare {
			return w.Phases[lp.Phase]
		}
	}
	return nil
}

// stripPrefix removes "<labelPrefix>:" from a label; with a prefix, a
// label without it belongs to another workflow.
func (w *Workflow) stripPrefix(label string) (string, bool) {
	if w.LabelPrefix == "" {
		return label, true
	}
	return strings.CutPrefix(label, w.LabelPrefix+":")
}

// withPrefix is the label as it is on the issue.
func (w *Workflow) withPrefix(bare string) string {
	if w.LabelPrefix == "" {
		return bare
	}
	return w.LabelPrefix + ":" + bare
}

// ID identifies the workflow among others sharing a subject store: its
// label prefix, or "default".
func (w *Workflow) ID() string {
	if w.LabelPrefix == "" {
		return "default"
	}
	return w.LabelPrefix
}

var (
	hexColor  = regexp.MustCompile(`^[0-9a-fA-F]{6}$`)
	handoffID = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// number reads a JSON number.
func number(raw json.RawMessage) (float64, bool) {
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}
