package pipeline

import (
	"fmt"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
)

// Config configures a Manager.
type Config struct {
	// Options are the seed's execution options for every stage.
	Options AgentExecutionOptions
	// Keys declares key types beyond those the agents declare themselves.
	Keys []KeySpec
	// MaxParallel bounds how many stages run at once (0 = 4).
	MaxParallel int
	// Now is the clock for audit records (nil = time.Now).
	Now func() time.Time
	// Events receives one journal event per stage outcome (nil = discard).
	Events event.Emitter
}

// stageDef is a registered stage with its contract copied at registration.
type stageDef struct {
	agent ReasoningAgent
	id    string
	pre   []string
	post  []string
	opt   []string
	keys  []KeySpec
	cfg   StageConfig
}

// Manager runs registered ReasoningAgents as a pipeline: it orders them by
// the keys they read and write (plus explicit dependencies), checks the
// whole pipeline before anything runs, then runs independent stages in
// parallel with contract validation, namespace isolation, per-stage
// timeouts, bounded retries and panic recovery. It is safe for concurrent
// use; each Execute is independent.
type Manager struct {
	mu     sync.Mutex
	cfg    Config
	stages []*stageDef
	byID   map[string]int
	// plans caches compiled plans by input key set; registration clears it.
	plans map[string]*Plan
}

// maxCachedPlans bounds Manager.plans.
const maxCachedPlans = 16

// New returns an empty Manager.
func New(cfg Config) *Manager {
	if cfg.MaxParallel <= 0 {
		cfg.MaxParallel = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	return &Manager{cfg: cfg, byID: map[string]int{}}
}

// NewReasoningManager is New under the name climpt gives it.
func NewReasoningManager(cfg Config) *Manager { return New(cfg) }

// RegisterAgent adds an agent with default stage settings.
func (m *Manager) RegisterAgent(agent ReasoningAgent) error {
	return m.RegisterStage(agent, StageConfig{})
}

// RegisterStage adds an agent with explicit dependencies, timeout and
// retry policy. It rejects a nil agent, a bad or duplicate id, bad key
// names, postconditions in the runtime's namespaces, and bad timeouts or
// retry bounds, with a PIPELINE_COMPILE error naming the agent.
func (m *Manager) RegisterStage(agent ReasoningAgent, sc StageConfig) error {
	if agent == nil {
		return compileErr(Problem{Message: "cannot register a nil agent"})
	}
	d := &stageDef{agent: agent, id: agent.AgentID(), cfg: sc}
	d.pre = append([]string(nil), agent.Preconditions()...)
	d.post = append([]string(nil), agent.Postconditions()...)
	if o, ok := agent.(OptionalReader); ok {
		d.opt = append([]string(nil), o.OptionalReads()...)
	}
	if kd, ok := agent.(KeyDeclarer); ok {
		d.keys = append([]KeySpec(nil), kd.Keys()...)
	}
	d.cfg.DependsOn = append([]string(nil), sc.DependsOn...)
	if probs := d.check(); len(probs) > 0 {
		return compileErr(probs...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.byID[d.id]; dup {
		return compileErr(Problem{Stages: []string{d.id}, Message: fmt.Sprintf("agent %q is already registered", d.id)})
	}
	m.byID[d.id] = len(m.stages)
	m.stages = append(m.stages, d)
	m.plans = nil
	return nil
}

// Stages lists the registered stage ids in registration order.
func (m *Manager) Stages() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, len(m.stages))
	for i, s := range m.stages {
		ids[i] = s.id
	}
	return ids
}

// CheckID reports whether id is a valid stage id: 1-100 letters, digits,
// '_' or '-', starting with a letter or '_'.
func CheckID(id string) error {
	if id == "" {
		return fmt.Errorf("empty agent id")
	}
	if len(id) > 100 {
		return fmt.Errorf("agent id %.40q... is longer than 100 bytes", id)
	}
	for i, r := range id {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') ||
			(i > 0 && (r == '-' || (r >= '0' && r <= '9')))
		if !ok {
			return fmt.Errorf("agent id %q must start with a letter or '_' and contain only letters, digits, '_' and '-'", id)
		}
	}
	return nil
}

// check validates a stage definition on its own.
func (d *stageDef) check() []Problem {
	var probs []Problem
	add := func(keys []string, format string, args ...any) {
		probs = append(probs, Problem{Stages: []string{d.id}, Keys: keys, Message: fmt.Sprintf(format, args...)})
	}
	if err := CheckID(d.id); err != nil {
		add(nil, "%v", err)
		return probs
	}
	lists := []struct {
		name string
		keys []string
	}{{"precondition", d.pre}, {"postcondition", d.post}, {"optional read", d.opt}}
	for _, l := range lists {
		seen := map[string]bool{}
		for _, k := range l.keys {
			if err := CheckKey(k); err != nil {
				add([]string{k}, "stage %s: bad %s: %v", d.id, l.name, err)
				continue
			}
			if seen[k] {
				add([]string{k}, "stage %s lists %s %s twice", d.id, l.name, k)
			}
			seen[k] = true
		}
	}
	for _, k := range d.post {
		if CheckKey(k) == nil && runtimeOwned(k) {
			add([]string{k}, "stage %s declares postcondition %s, but that key is written only by the pipeline runtime", d.id, k)
		}
	}
	for _, ks := range d.keys {
		if err := CheckKey(ks.Name); err != nil {
			add([]string{ks.Name}, "stage %s declares a bad key: %v", d.id, err)
		}
	}
	if d.cfg.Timeout < 0 {
		add(nil, "stage %s: timeout %v is negative", d.id, d.cfg.Timeout)
	}
	r := d.cfg.Retry
	if r.MaxRetries < 0 || r.MaxRetries > MaxRetriesLimit {
		add(nil, "stage %s: max retries %d is outside 0..%d", d.id, r.MaxRetries, MaxRetriesLimit)
	}
	if r.Backoff < 0 || r.MaxBackoff < 0 {
		add(nil, "stage %s: retry backoff must not be negative", d.id)
	}
	for _, dep := range d.cfg.DependsOn {
		if dep == d.id {
			add(nil, "stage %s depends on itself", d.id)
		}
	}
	return probs
}

// Problem is one reason a pipeline cannot run, naming the stages and keys
// involved.
type Problem struct {
	Stages  []string `json:"stages,omitempty"`
	Keys    []string `json:"keys,omitempty"`
	Message string   `json:"message"`
}

// CompileError lists every problem found when checking a pipeline.
type CompileError struct {
	Problems []Problem
}

// Error joins the problems, one per line.
func (e *CompileError) Error() string {
	s := ""
	for i, p := range e.Problems {
		if i > 0 {
			s += "\n  "
		}
		s += p.Message
	}
	return s
}

// compileErr wraps problems into a PIPELINE_COMPILE error.
func compileErr(probs ...Problem) error {
	msg := "pipeline cannot run"
	if len(probs) > 1 {
		msg = fmt.Sprintf("pipeline cannot run (%d problems)", len(probs))
	}
	e := agenterr.Wrap(&CompileError{Problems: probs}, agenterr.CodePipelineCompile, agenterr.LayerPipeline, false, "%s", msg)
	e.Hint = "fix the stage contracts or dependencies named above; nothing has run"
	return e
}
