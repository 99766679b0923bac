package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/backoff"
)

// Stage statuses recorded in audit.agent_runs.
const (
	StatusSucceeded = "succeeded"
	StatusViolated  = "violated" // ran, but broke its contract
	StatusFailed    = "failed"   // error, timeout or panic after retries
	StatusSkipped   = "skipped"  // preconditions missing, or the pipeline stopped first
	StatusCanceled  = "canceled" // the pipeline was stopped or canceled while it ran
)

// Pipeline statuses recorded in metadata.status.
const (
	PipelineCompleted               = "completed"
	PipelineCompletedWithViolations = "completed_with_violations"
	PipelineStopped                 = "stopped"
)

// AgentRun is one stage's record in audit.agent_runs, computed by the
// runtime (never reported by the stage itself): one record per stage.
type AgentRun struct {
	AgentID     string       `json:"agent_id"`
	Status      string       `json:"status"`
	Attempts    int          `json:"attempts"`
	StartedAt   time.Time    `json:"started_at,omitzero"`
	DurationMs  float64      `json:"duration_ms"`
	KeysWritten []string     `json:"keys_written"`
	Code        string       `json:"code,omitempty"`
	Error       string       `json:"error,omitempty"`
	Usage       *event.Usage `json:"usage,omitempty"`
}

// WriteRecord is one key a stage wrote, in audit.writes: which stage, when,
// how many bytes of JSON, and the SHA-256 of that JSON.
type WriteRecord struct {
	Key     string    `json:"key"`
	AgentID string    `json:"agent_id"`
	Time    time.Time `json:"time"`
	Size    int       `json:"size"`
	SHA256  string    `json:"sha256"`
}

// StageError is a failed stage attempt in diagnostics.errors.
type StageError struct {
	AgentID string `json:"agent_id"`
	Attempt int    `json:"attempt"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Final   bool   `json:"final"` // no retry followed
}

// Performance is diagnostics.performance.
type Performance struct {
	TotalMs     float64     `json:"total_ms"`
	MaxParallel int         `json:"max_parallel"` // most stages seen running at once
	Stages      []StagePerf `json:"stages"`
	Usage       event.Usage `json:"usage"`
	Plan        [][]string  `json:"levels"`
}

// StagePerf is one stage's figures in diagnostics.performance.
type StagePerf struct {
	AgentID      string  `json:"agent_id"`
	DurationMs   float64 `json:"duration_ms"`
	Attempts     int     `json:"attempts"`
	BytesWritten int     `json:"bytes_written"`
}

// outcome is what one stage's goroutine reports back.
type outcome struct {
	idx        int
	status     string
	writes     map[string]*entry
	violations []event.PipelineViolation
	errs       []StageError
	err        *agenterr.Error // the stage's final error, if any
	attempts   int
	started    time.Time
	dur        time.Duration
	usage      event.Usage
	undeclared []string
}

// execution is the state of one Execute call. Only the scheduler goroutine
// touches it; stages see immutable boards.
type execution struct {
	m       *Manager
	cfg     Config
	plan    *Plan
	board   board
	contrib map[string]map[int]*entry // reducer key -> stage -> contribution

	runs       []AgentRun
	writes     []WriteRecord
	violations []event.PipelineViolation
	errs       []StageError
	warnings   []string
	perf       []StagePerf
	usage      event.Usage
	stopErr    error
	violated   bool
	maxRunning int
}

// Execute runs the pipeline on a copy of in (nil = an empty context) and
// returns the resulting context, which holds every stage's output plus the
// runtime's audit (audit.agent_runs, audit.writes), diagnostics
// (diagnostics.violations, .errors, .warnings, and .performance when
// TrackPerformance is set) and metadata (started_at, finished_at, status).
//
// The pipeline is checked first (see Compile); a problem there returns a
// nil context and a PIPELINE_COMPILE error, and nothing runs. When
// FailOnViolation is set, the first violation or stage failure stops the
// pipeline: running stages are canceled, no new stage starts, and Execute
// returns the context so far together with a CONTRACT_VIOLATION,
// NAMESPACE_VIOLATION, STAGE_FAILED, STAGE_TIMEOUT or STAGE_PANIC error.
// Otherwise violations are only reported and the error is nil.
func (m *Manager) Execute(ctx context.Context, in *AgentContext) (*AgentContext, error) {
	if in == nil {
		in = NewAgentContext("", "")
	}
	start := in.flatten()
	inputKeys := make([]string, 0, len(start))
	for k := range start {
		inputKeys = append(inputKeys, k)
	}
	sort.Strings(inputKeys)
	cacheKey := strings.Join(inputKeys, "\x00")
	m.mu.Lock()
	defs := append([]*stageDef(nil), m.stages...)
	cfg := m.cfg
	plan := m.plans[cacheKey]
	m.mu.Unlock()
	if plan == nil {
		var err error
		if plan, err = compile(defs, cfg.Keys, inputKeys); err != nil {
			return nil, err
		}
		m.mu.Lock()
		if len(m.stages) == len(defs) { // nothing registered meanwhile
			if m.plans == nil || len(m.plans) >= maxCachedPlans {
				m.plans = map[string]*Plan{}
			}
			m.plans[cacheKey] = plan
		}
		m.mu.Unlock()
	}
	ex := &execution{m: m, cfg: cfg, plan: plan, board: start, contrib: map[string]map[int]*entry{}}
	t0 := cfg.Now()
	ex.run(ctx)
	return &AgentContext{base: ex.finish(t0), delta: map[string]*entry{}}, ex.stopErr
}

func (ex *execution) run(ctx context.Context) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := ex.plan
	n := len(p.defs)
	indeg := make([]int, n)
	for i := range p.deps {
		indeg[i] = len(p.deps[i])
	}
	var ready []int
	for _, i := range p.order {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	started := make([]bool, n)
	results := make(chan outcome)
	running := 0
	stopped := false
	for {
		for !stopped && len(ready) > 0 && running < ex.cfg.MaxParallel {
			i := ready[0]
			ready = ready[1:]
			started[i] = true
			running++
			ex.maxRunning = max(ex.maxRunning, running)
			snap := ex.board
			go func() { results <- ex.runStage(runCtx, i, snap) }()
		}
		if running == 0 {
			break
		}
		o := <-results
		running--
		ex.record(o)
		if !stopped && ctx.Err() != nil {
			stopped = true
			ex.stopErr = agenterr.Wrap(ctx.Err(), agenterr.CodeCanceled, agenterr.LayerPipeline, false, "pipeline canceled")
		}
		if !stopped && ex.cfg.Options.FailOnViolation && o.status != StatusSucceeded {
			stopped = true
			ex.stopErr = stopError(p.defs[o.idx].id, o)
			cancel()
		}
		for _, d := range p.dependents[o.idx] {
			indeg[d]--
			if indeg[d] == 0 {
				ready = insertByPos(ready, d, p.pos)
			}
		}
	}
	for _, i := range p.order {
		if !started[i] {
			ex.runs = append(ex.runs, AgentRun{AgentID: p.defs[i].id, Status: StatusSkipped,
				Error: "not run: the pipeline stopped before this stage", KeysWritten: []string{}})
		}
	}
}

func insertByPos(ready []int, i int, pos []int) []int {
	at := sort.Search(len(ready), func(x int) bool { return pos[ready[x]] > pos[i] })
	ready = append(ready, 0)
	copy(ready[at+1:], ready[at:])
	ready[at] = i
	return ready
}

// stopError is the error Execute returns when o stopped the pipeline.
func stopError(id string, o outcome) error {
	if len(o.violations) > 0 {
		v := o.violations[0]
		e := violationError(v)
		e.Message = "pipeline stopped: " + e.Message
		if len(o.violations) > 1 {
			e.Message += fmt.Sprintf(" (and %d more violations)", len(o.violations)-1)
		}
		e.Hint = "see diagnostics.violations; run without fail_on_violation to continue past violations"
		return e
	}
	if o.err != nil {
		e := *o.err
		e.Message = "pipeline stopped: " + e.Message
		return &e
	}
	return agenterr.New(agenterr.CodeStageFailed, agenterr.LayerPipeline, false, "pipeline stopped at stage %s (%s)", id, o.status)
}

// runStage runs one stage against snap: preconditions, attempts with
// timeout and retry, write collection, postconditions.
func (ex *execution) runStage(ctx context.Context, i int, snap board) (o outcome) {
	d := ex.plan.defs[i]
	o = outcome{idx: i, started: ex.cfg.Now()}
	t0 := time.Now()
	defer func() { o.dur = time.Since(t0) }()
	opts := ex.cfg.Options

	if opts.ValidateContract {
		if o.violations = ex.broken(d, event.ViolationPrecondition, d.pre, snap, nil); len(o.violations) > 0 {
			o.status = StatusSkipped
			return o
		}
	}
	view, readable, writable := d.view(snap)

	timeout := d.cfg.Timeout
	if timeout == 0 {
		timeout = DefaultStageTimeout
	}
	retry := d.cfg.Retry
	for attempt := 1; ; attempt++ {
		o.attempts = attempt
		o.violations, o.writes, o.err = nil, nil, nil
		sc := &scope{agentID: d.id, writable: writable, readable: readable}
		actx := &AgentContext{base: view, delta: map[string]*entry{}, sc: sc}
		res, err := attempt1(ctx, d, actx, timeout)
		if err == nil || !errors.Is(err, agenterr.ErrStageTimeout) {
			// Only a finished Execute has a context we may read.
			o.writes, o.violations = collectWrites(d.id, actx, res, view, writable)
			actx.mu.Lock()
			o.usage.Add(sc.usage)
			for k := range sc.undeclared {
				o.undeclared = append(o.undeclared, k)
			}
			actx.mu.Unlock()
		}
		if err == nil && res == nil {
			err = agenterr.New(agenterr.CodeStageFailed, agenterr.LayerPipeline, true, "agent %s returned a nil context and no error", d.id)
		}
		if len(o.violations) > 0 {
			// A namespace violation is a bug in the stage: none of its
			// writes are kept and it is not retried.
			o.writes = nil
			o.status = StatusViolated
			if err != nil {
				o.err = stageErr(d.id, err)
			}
			return o
		}
		if err != nil {
			o.err = stageErr(d.id, err)
		} else if opts.ValidateContract {
			o.violations = ex.broken(d, event.ViolationPostcondition, d.post, view, o.writes)
		}
		if o.err == nil && len(o.violations) == 0 {
			o.status = StatusSucceeded
			return o
		}
		canceled := ctx.Err() != nil
		final := canceled || attempt > retry.MaxRetries
		if o.err != nil {
			o.errs = append(o.errs, StageError{AgentID: d.id, Attempt: attempt, Code: o.err.Code, Message: o.err.Error(), Final: final})
		}
		if final {
			o.end(canceled)
			return o
		}
		if !sleepBackoff(ctx, retry, attempt) {
			o.status, o.writes = StatusCanceled, nil
			return o
		}
	}
}

// end sets the status of a stage whose last attempt did not succeed:
// canceled, violated (its postconditions are broken: it keeps what it
// wrote, and the rest is reported) or failed. A failed or canceled stage
// leaves nothing behind.
func (o *outcome) end(canceled bool) {
	switch {
	case canceled:
		o.status = StatusCanceled
	case o.err == nil:
		o.status = StatusViolated
	default:
		o.status = StatusFailed
	}
	if o.status != StatusViolated {
		o.writes = nil
	}
}

// broken checks the contract rules of keys (the stage's preconditions or
// postconditions, by kind) on their entries — in writes when the stage
// wrote them, else on the board — and returns the violations.
func (ex *execution) broken(d *stageDef, kind event.PipelineViolationKind, keys []string, board board, writes map[string]*entry) []event.PipelineViolation {
	var out []event.PipelineViolation
	for _, k := range keys {
		e, ok := writes[k]
		if !ok {
			e = board[k]
		}
		if msg := ex.plan.rules[k].check(string(kind), e); msg != "" {
			out = append(out, event.PipelineViolation{AgentID: d.id, Kind: kind, Key: k, Message: msg})
		}
	}
	return out
}

// view is what stage d sees of the board snap — the input and metadata
// namespaces and the keys it reads (its preconditions and optional keys)
// — and the keys it may read and write.
func (d *stageDef) view(snap board) (view board, readable, writable map[string]bool) {
	readable = make(map[string]bool, len(d.pre)+len(d.opt))
	for _, k := range d.pre {
		readable[k] = true
	}
	for _, k := range d.opt {
		readable[k] = true
	}
	writable = make(map[string]bool, len(d.post))
	for _, k := range d.post {
		writable[k] = true
	}
	view = make(board, len(readable)+4)
	for k, e := range snap {
		if ns := Namespace(k); ns == NamespaceInput || ns == NamespaceMetadata || readable[k] {
			view[k] = e
		}
	}
	return view, readable, writable
}

// attempt1 runs Execute once under timeout, turning a panic into an error.
func attempt1(ctx context.Context, d *stageDef, actx *AgentContext, timeout time.Duration) (*AgentContext, error) {
	actxCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		res *AgentContext
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				stack := string(debug.Stack())
				if len(stack) > 2000 {
					stack = stack[:2000]
				}
				e := agenterr.New(agenterr.CodeStagePanic, agenterr.LayerPipeline, false, "agent %s panicked: %v", d.id, p)
				e.Hint = "stack: " + stack
				ch <- result{err: e}
			}
		}()
		res, err := d.agent.Execute(actxCtx, actx)
		ch <- result{res, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && ctx.Err() == nil && errors.Is(r.err, context.DeadlineExceeded) && actxCtx.Err() != nil {
			return nil, timeoutErr(d.id, timeout)
		}
		return r.res, r.err
	case <-actxCtx.Done():
		if ctx.Err() != nil {
			return nil, agenterr.Wrap(ctx.Err(), agenterr.CodeCanceled, agenterr.LayerPipeline, false, "agent %s canceled", d.id)
		}
		return nil, timeoutErr(d.id, timeout)
	}
}

func timeoutErr(id string, d time.Duration) error {
	e := agenterr.New(agenterr.CodeStageTimeout, agenterr.LayerPipeline, true, "agent %s timed out after %v", id, d)
	e.Hint = "raise the stage's timeout or make it faster"
	return e
}

// stageErr turns any stage error into an *agenterr.Error naming the agent.
func stageErr(id string, err error) *agenterr.Error {
	if e := agenterr.From(err); e != nil {
		if strings.Contains(e.Error(), id) {
			return e
		}
		c := *e
		c.Message = "agent " + id + ": " + c.Message
		return &c
	}
	return agenterr.Wrap(err, agenterr.CodeStageFailed, agenterr.LayerPipeline, true, "agent %s failed", id)
}

// collectWrites returns what the stage wrote: its own context's writes, or,
// when it returned a different context, every value that differs from what
// it was given. Writes outside writable are dropped and reported.
func collectWrites(id string, actx, res *AgentContext, view board, writable map[string]bool) (map[string]*entry, []event.PipelineViolation) {
	writes := map[string]*entry{}
	var viol []event.PipelineViolation
	actx.mu.Lock()
	for k, e := range actx.delta {
		writes[k] = e
	}
	viol = append(viol, actx.sc.rejected...)
	actx.mu.Unlock()
	if res != nil && res != actx {
		writes = map[string]*entry{}
		for k, e := range res.flatten() {
			if old, ok := view[k]; ok && (old == e || bytes.Equal(old.raw, e.raw)) {
				continue
			}
			writes[k] = e
		}
		res.mu.Lock()
		if res.sc != nil && res.sc != actx.sc {
			viol = append(viol, res.sc.rejected...)
		}
		res.mu.Unlock()
	}
	keys := make([]string, 0, len(writes))
	for k := range writes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !writable[k] {
			delete(writes, k)
			viol = append(viol, event.PipelineViolation{AgentID: id, Kind: event.ViolationNamespace, Key: k, Message: namespaceMessage(k)})
		}
	}
	return writes, dedupViolations(viol)
}

func dedupViolations(vs []event.PipelineViolation) []event.PipelineViolation {
	seen := map[event.PipelineViolation]bool{}
	out := vs[:0:0]
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// backoffDelay is the wait before retry number attempt (1-based):
// Backoff·2^(attempt-1) capped at MaxBackoff, scaled into [50%, 100%] by
// jitter in [0, 1].
func backoffDelay(r RetryPolicy, attempt int, jitter float64) time.Duration {
	base := r.Backoff
	if base == 0 {
		base = DefaultBackoff
	}
	limit := r.MaxBackoff
	if limit == 0 {
		limit = DefaultMaxBackoff
	}
	return backoff.Exponential{Base: base, Max: limit, Jitter: 0.5}.Delay(attempt, 1-jitter)
}

// sleepBackoff waits before retry number attempt; false if ctx ended.
func sleepBackoff(ctx context.Context, r RetryPolicy, attempt int) bool {
	return backoff.Sleep(ctx, backoffDelay(r, attempt, rand.Float64())) == nil
}

// record merges a stage's outcome into the board and the audit.
func (ex *execution) record(o outcome) {
	d := ex.plan.defs[o.idx]
	now := ex.cfg.Now()
	keys := make([]string, 0, len(o.writes))
	for k := range o.writes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		nb := make(board, len(ex.board)+len(keys))
		for k, e := range ex.board {
			nb[k] = e
		}
		bytesWritten := 0
		for _, k := range keys {
			e := o.writes[k]
			bytesWritten += len(e.raw)
			ex.writes = append(ex.writes, WriteRecord{Key: k, AgentID: d.id, Time: now, Size: len(e.raw), SHA256: e.hash()})
			if red := ex.plan.rules[k].spec.Reducer; red != ReduceNone {
				merged, err := ex.reduce(k, red, o.idx, e)
				if err != nil {
					ex.warnings = append(ex.warnings, fmt.Sprintf("agent %s: %s: %v; contribution dropped", d.id, k, err))
					continue
				}
				e = merged
			}
			nb[k] = e
		}
		ex.board = nb
		if ex.cfg.Options.TrackPerformance {
			ex.perf = append(ex.perf, StagePerf{AgentID: d.id, DurationMs: ms(o.dur), Attempts: o.attempts, BytesWritten: bytesWritten})
		}
	} else if ex.cfg.Options.TrackPerformance {
		ex.perf = append(ex.perf, StagePerf{AgentID: d.id, DurationMs: ms(o.dur), Attempts: o.attempts})
	}
	run := AgentRun{AgentID: d.id, Status: o.status, Attempts: o.attempts, StartedAt: o.started,
		DurationMs: ms(o.dur), KeysWritten: keys}
	if o.usage.Total() > 0 {
		u := o.usage
		run.Usage = &u
		ex.usage.Add(u)
	}
	if o.err != nil {
		run.Code, run.Error = o.err.Code, o.err.Error()
	} else if len(o.violations) > 0 {
		run.Code = violationError(o.violations[0]).Code
		run.Error = o.violations[0].Message
	}
	ex.runs = append(ex.runs, run)
	ex.violations = append(ex.violations, o.violations...)
	if len(o.violations) > 0 || o.status != StatusSucceeded {
		ex.violated = true
	}
	ex.errs = append(ex.errs, o.errs...)
	sort.Strings(o.undeclared)
	for _, k := range o.undeclared {
		ex.warnings = append(ex.warnings, fmt.Sprintf("agent %s read %s, which it did not declare (add it to its preconditions or optional reads)", d.id, k))
	}
	ex.cfg.Events.Emit(event.PipelineStageEvent{AgentID: d.id, Status: o.status, Attempts: o.attempts, KeysWritten: keys,
		DurationMs: ms(o.dur), Error: run.Error})
	for _, v := range o.violations {
		ex.cfg.Events.Emit(v)
	}
}

// reduce folds stage idx's contribution into key's combined value, in
// stage order.
func (ex *execution) reduce(key string, red Reducer, idx int, e *entry) (*entry, error) {
	switch {
	case red == ReduceAppend && e.kind != TypeArray:
		return nil, fmt.Errorf("append reducer needs arrays, got %s", kindName(e))
	case red == ReduceMerge && e.kind != TypeObject:
		return nil, fmt.Errorf("merge reducer needs objects, got %s", kindName(e))
	}
	if ex.contrib[key] == nil {
		ex.contrib[key] = map[int]*entry{}
	}
	ex.contrib[key][idx] = e
	idxs := make([]int, 0, len(ex.contrib[key]))
	for i := range ex.contrib[key] {
		idxs = append(idxs, i)
	}
	sort.Slice(idxs, func(a, b int) bool { return ex.plan.pos[idxs[a]] < ex.plan.pos[idxs[b]] })
	switch red {
	case ReduceAppend:
		var all []json.RawMessage
		for _, i := range idxs {
			var part []json.RawMessage
			if err := json.Unmarshal(ex.contrib[key][i].raw, &part); err != nil {
				return nil, err
			}
			all = append(all, part...)
		}
		if all == nil {
			all = []json.RawMessage{}
		}
		return newEntry(all)
	default: // ReduceMerge
		all := map[string]json.RawMessage{}
		for _, i := range idxs {
			var part map[string]json.RawMessage
			if err := json.Unmarshal(ex.contrib[key][i].raw, &part); err != nil {
				return nil, err
			}
			for k, v := range part {
				all[k] = v
			}
		}
		return newEntry(all)
	}
}

func kindName(e *entry) string {
	if e.null {
		return "nil"
	}
	return string(e.kind)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// finish writes the runtime's keys and returns the final board.
func (ex *execution) finish(t0 time.Time) board {
	b := make(board, len(ex.board)+12)
	for k, e := range ex.board {
		b[k] = e
	}
	put := func(k string, v any) { b[k] = mustEntry(v) }
	order := map[string]int{}
	for i, idx := range ex.plan.order {
		order[ex.plan.defs[idx].id] = i
	}
	sort.SliceStable(ex.runs, func(a, c int) bool { return order[ex.runs[a].AgentID] < order[ex.runs[c].AgentID] })
	sort.SliceStable(ex.writes, func(a, c int) bool {
		wa, wc := ex.writes[a], ex.writes[c]
		if !wa.Time.Equal(wc.Time) {
			return wa.Time.Before(wc.Time)
		}
		return order[wa.AgentID] < order[wc.AgentID]
	})
	put(KeyAgentRuns, ex.runs)
	put(KeyWrites, orEmpty(ex.writes))
	put(KeyViolations, orEmpty(ex.violations))
	put(KeyErrors, orEmpty(ex.errs))
	put(KeyWarnings, orEmpty(ex.warnings))
	end := ex.cfg.Now()
	if ex.cfg.Options.TrackPerformance {
		sort.SliceStable(ex.perf, func(a, c int) bool { return order[ex.perf[a].AgentID] < order[ex.perf[c].AgentID] })
		put(KeyPerformance, Performance{TotalMs: ms(end.Sub(t0)), MaxParallel: ex.maxRunning,
			Stages: orEmpty(ex.perf), Usage: ex.usage, Plan: ex.plan.Levels})
	}
	status := PipelineCompleted
	switch {
	case ex.stopErr != nil:
		status = PipelineStopped
	case ex.violated:
		status = PipelineCompletedWithViolations
	}
	put("metadata.status", status)
	put("metadata.started_at", t0.UTC())
	put("metadata.finished_at", end.UTC())
	return b
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
