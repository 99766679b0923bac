package skill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/proc"

	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/sandbox"
	jschema "github.com/capstan-dev/capstan/schema"
	"github.com/capstan-dev/capstan/tool"
)

// Budgets bound one Act run: tool calls, wall time, tokens, the time of one
// script and what scripts may write to disk.
type Budgets struct {
	MaxToolCalls     int   `json:"max_tool_calls"`
	TimeBudgetMs     int64 `json:"time_budget_ms"`
	TokenBudget      int64 `json:"token_budget"`
	ScriptTimeoutS   int   `json:"script_timeout_s"`
	DiskWriteLimitMB int   `json:"disk_write_limit_mb"`
}

// defaultBudgets are the budgets of a run that sets none.
var defaultBudgets = Budgets{MaxToolCalls: 24, TimeBudgetMs: 120000, TokenBudget: 60000, ScriptTimeoutS: 20, DiskWriteLimitMB: 50}

// DefaultBudgets are the budgets of a run that sets none.
// It returns a copy: changing it changes nothing else.
func DefaultBudgets() Budgets {
	return defaultBudgets
}

func (b Budgets) withDefaults() Budgets {
	d := defaultBudgets
	if b.MaxToolCalls <= 0 {
		b.MaxToolCalls = d.MaxToolCalls
	}
	if b.TimeBudgetMs <= 0 {
		b.TimeBudgetMs = d.TimeBudgetMs
	}
	if b.TokenBudget <= 0 {
		b.TokenBudget = d.TokenBudget
	}
	if b.ScriptTimeoutS <= 0 {
		b.ScriptTimeoutS = d.ScriptTimeoutS
	}
	if b.DiskWriteLimitMB <= 0 {
		b.DiskWriteLimitMB = d.DiskWriteLimitMB
	}
	return b
}

// Input is what the caller (a workflow or `capstan skills run`) asks of a
// skill run: the goal, constraints, inputs and the outputs it expects.
type Input struct {
	Goal        string         `json:"goal"`
	Constraints []string       `json:"constraints,omitempty"`
	Inputs      map[string]any `json:"inputs,omitempty"`
	Budgets     Budgets        `json:"budgets"`
	// Expected lists the outputs that must exist and validate.
	Expected []Expected `json:"expectedOutputs,omitempty"`
	// BuildDir is where artifacts go (default <skill root>/build).
	BuildDir string `json:"build_dir,omitempty"`
	// Fresh ignores the record of a previous identical run: without it, a
	// run whose skill, goal, inputs and expected outputs are unchanged and
	// whose outputs still validate ends at once (exit reason "up_to_date").
	Fresh bool `json:"fresh,omitempty"`
}

// Config configures a Runtime.
type Config struct {
	// Model plays the Decide step, one turn per iteration.
	Model llm.Model
	// ModelName is recorded in the result ("provider:model").
	ModelName string
	// Sandbox runs skill scripts. Nil makes runScript fail with
	// SANDBOX_UNAVAILABLE (the rest of the tools still work).
	Sandbox *sandbox.Runner
	// Events receives the run's events (evidence every step).
	Events event.Emitter
	// Seed is the fixed sampling seed: every model turn is
	// requested at temperature 0 with this seed; providers that support
	// seeds (OpenAI-compatible) send it, the others ignore it. It is also
	// recorded in the metrics.
	Seed int64
	// MaxTokens bounds one model answer (default 4096).
	MaxTokens int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Runtime runs skills: the model reads SKILL.md and its references, runs
// its scripts in the sandbox and writes the expected outputs, and the run
// checks them (climpt calls it SkillRuntime).
type Runtime struct {
	cfg Config
	// redact replaces the values of capstan's secret variables in the
	// model's answers (proc.SecretRedactor).
	redact llm.Redactor
	// schemas compiles the skills' schemas, each distinct one once (a
	// schema file is read again on every check, so a changed one is
	// compiled anew).
	schemas *jschema.Cache
}

// New returns a Runtime.
func New(cfg Config) *Runtime {
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runtime{cfg: cfg, redact: proc.SecretRedactor(os.Environ()), schemas: jschema.NewCache(0)}
}

// Exit reasons of an Act run.
const (
	ExitValidated        = "validated"         // every expected output exists and validates
	ExitUpToDate         = "up_to_date"        // an identical earlier run's outputs still validate
	ExitFinalized        = "finalized"         // finalize called and everything validates
	ExitModelStopped     = "model_stopped"     // the model answered without tool calls
	ExitToolCallBudget   = "budget_tool_calls" // max_tool_calls reached
	ExitTimeBudget       = "budget_time"       // time_budget_ms reached
	ExitTokenBudget      = "budget_tokens"     // token_budget reached
	ExitStalled          = "stalled"           // no progress after the one Micro-Reflect
	ExitCycle            = "cycle"             // the same action repeated without effect
	ExitSandboxViolation = "sandbox_violation" // a path or script tried to leave the skill / build
	ExitCanceled         = "canceled"          // the context was canceled
	ExitModelError       = "model_error"       // the model call failed
)

// Artifact is a file the run wrote under build/.
type Artifact struct {
	// Handle is "act.<artifact>@vN".
	Handle  string `json:"handle"`
	Path    string `json:"path"` // relative to the build directory
	Version int    `json:"version"`
	Bytes   int64  `json:"bytes"`
	Hash    string `json:"hash"`
}

// Disclosure counts what progressive disclosure injected, per level.
type Disclosure struct {
	L1Tokens int `json:"l1_tokens"`
	L2Tokens int `json:"l2_tokens"`
	L3Tokens int `json:"l3_tokens"`
	L3Files  int `json:"l3_files"`
	// CacheHits counts reads answered with "unchanged since last read".
	CacheHits int `json:"cache_hits"`
	// TokensSaved estimates what those hits did not inject.
	TokensSaved int `json:"tokens_saved"`
	// Degraded counts reads answered with a summary because the token
	// budget was low.
	Degraded int `json:"degraded"`
}

// Metrics of an Act run: tokens, tool calls, script runs, time, and what
// was reused from an earlier run.
type Metrics struct {
	// Tokens is every token the model was billed for: uncached input,
	// output, cache reads and cache writes (what token_budget counts).
	Tokens           int64      `json:"tokens"`
	InputTokens      int64      `json:"input_tokens"`
	OutputTokens     int64      `json:"output_tokens"`
	CacheReadTokens  int64      `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64      `json:"cache_write_tokens,omitempty"`
	TimeMs           int64      `json:"time_ms"`
	ToolCalls        int        `json:"tool_calls"`
	ModelTurns       int        `json:"model_turns"`
	Disclosure       Disclosure `json:"disclosure"`
	ScriptRuns       int        `json:"script_runs"`
	ScriptReuses     int        `json:"script_reuses"`
	MemoRefusals     int        `json:"memo_refusals"`
	MicroReflects    int        `json:"micro_reflects"`
	DiskBytes        int64      `json:"disk_bytes"`
	Temperature      float64    `json:"temperature"`
	Seed             int64      `json:"seed"`
	Model            string     `json:"model,omitempty"`
}

// Unmet is an expectation the run could not satisfy, with a proposal for
// the caller: what it could do to get it met.
type Unmet struct {
	Kind     string `json:"kind"` // missing_output | invalid_output | missing_reference | budget | script_failure | sandbox_violation | stalled
	Path     string `json:"path,omitempty"`
	Reason   string `json:"reason"`
	Proposal string `json:"proposal"`
}

// ActResult is the answer of a skill run: whether it completed, why it
// stopped, the outputs it wrote and their checks, the evidence, metrics,
// the budgets left, and what was left unmet.
type ActResult struct {
	Skill            string                `json:"skill"`
	Completed        bool                  `json:"completed"`
	ExitReason       string                `json:"exitReason"`
	Artifacts        []Artifact            `json:"artifacts"`
	Validation       Validation            `json:"validation"`
	EvidenceSummary  []string              `json:"evidenceSummary"`
	Evidence         []event.SkillEvidence `json:"evidence"`
	Metrics          Metrics               `json:"metrics"`
	RemainingBudgets Budgets               `json:"remainingBudgets"`
	Unmet            []Unmet               `json:"unmet"`
	// Error is set when the run ended on a model or internal error.
	Error *ErrorInfo `json:"error,omitempty"`
}

// ErrorInfo is a coded error in an ActResult.
type ErrorInfo struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	Recoverable bool   `json:"recoverable"`
}

// ActStartEvent is the payload of a skill.act.start event: what an Act
// run sets out to do.
type ActStartEvent struct {
	Budgets     Budgets    `json:"budgets"`
	Expected    []Expected `json:"expected"`
	Goal        string     `json:"goal"`
	Model       string     `json:"model"`
	Seed        int64      `json:"seed"`
	Skill       string     `json:"skill"`
	Temperature int        `json:"temperature"`
}

// EventKind implements event.Payload.
func (ActStartEvent) EventKind() event.Kind { return event.KindSkillActStart }

// EventKind implements event.Payload: an ActResult is journaled as the
// skill.act.end event.
func (*ActResult) EventKind() event.Kind { return event.KindSkillActEnd }

// Run drives the model through Acquire → Decide → Apply → Record →
// Progress/Exit until the expected outputs validate or a budget, cycle or
// sandbox violation stops it. The returned error is non-nil only for model
// or internal failures; an unmet run is a result with Completed false.
//
// An llm.StreamSink in ctx (llm.WithStreamSink) gets the model's text from
// the provider and, from the runtime, a ToolStart and a ToolEnd for every
// tool call the model asks for; a call refused without running (the
// AttemptMemo, a budget, a call after the one that ended the run) ends
// Denied.
func (rt *Runtime) Run(ctx context.Context, sk *Skill, in Input) (*ActResult, error) {
	if rt.cfg.Model == nil {
		return nil, agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerSkill, false, "skill runtime has no model")
	}
	s, err := newSession(rt, sk, in)
	if err != nil {
		return nil, err
	}
	rt.cfg.Events.Emit(ActStartEvent{Skill: sk.ID, Goal: in.Goal, Budgets: s.budgets, Expected: in.Expected, Model: rt.cfg.ModelName, Seed: rt.cfg.Seed})
	if !in.Fresh {
		if res := s.upToDate(); res != nil {
			rt.cfg.Events.Emit(event.SkillActUpToDateEvent{Skill: sk.ID})
			rt.cfg.Events.Emit(res)
			return res, nil
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Duration(s.budgets.TimeBudgetMs)*time.Millisecond)
	defer cancel()
	res, err := s.loop(runCtx, ctx)
	rt.cfg.Events.Emit(res)
	return res, err
}

// loop runs the Act steps on llm.Loop, the tool loop agent runs use: one
// model turn per step (Decide), each tool call through the session's guard
// middleware (budget, AttemptMemo, evidence: Apply + Record), and the
// Progress/Exit decision after each turn's results.
func (s *session) loop(ctx, parent context.Context) (*ActResult, error) {
	tools := s.tools()
	specs := make([]tool.Spec, len(tools))
	byName := make(map[string]tool.Tool, len(tools))
	adapted := make([]sessionTool, len(tools))
	for i, t := range tools {
		specs[i] = t.spec
		adapted[i] = sessionTool{s: s, t: t}
		byName[t.spec.Name] = &adapted[i]
	}
	s.parent = parent
	system := s.systemPrompt()
	s.metrics.Disclosure.L1Tokens = EstimateTokens(system)
	temperature, seed := 0.0, s.rt.cfg.Seed
	lp := llm.Loop{
		Model: s.rt.cfg.Model,
		Request: llm.Request{Model: s.rt.cfg.ModelName, System: system, Tools: specs, MaxTokens: s.rt.cfg.MaxTokens,
			Temperature: &temperature, Seed: &seed}, // answers repeat
		Tools: byName, Events: s.rt.cfg.Events,
		Middleware: []tool.Middleware{s.guard(specs)},
		Redact:     s.rt.redact,
		// Every turn but the last makes at least one counted call, so the
		// tool-call budget bounds the turns; this is the backstop.
		MaxTurns: s.budgets.MaxToolCalls + 1,
		Hooks:    s,
	}
	_, _, err := lp.Run(ctx, []event.Message{{Role: event.RoleUser, Text: s.userPrompt()}})
	if err != nil {
		if reason := s.budgetExit(ctx, parent); reason != "" {
			return s.finish(reason, nil), nil
		}
		return s.finish(ExitModelError, err), err
	}
	if s.exit == "" {
		// The model stopped. Completion is verified, not declared.
		s.exit = ExitModelStopped
	}
	return s.finish(s.exit, nil), nil
}

// BeforeTurn is Acquire: are budgets left? (llm.Hooks; the caller's end
// is a cancellation, the loop's own context also ends with the time
// budget.)
func (s *session) BeforeTurn(ctx context.Context, turn int) bool {
	if reason := s.budgetExit(ctx, s.parent); reason != "" {
		s.exit = reason
		return false
	}
	s.step, s.turnStart = turn, s.now()
	return true
}

// OnResponse accounts for the Decide turn before its calls are applied.
func (s *session) OnResponse(_ int, resp *llm.Response) {
	s.metrics.ModelTurns++
	s.usage.Add(resp.Usage)
	s.turnTokens = resp.Usage.Total()
	s.reason = reasonShort(resp.Message.Text)
	s.turnCalls = 0
	s.progress = false
}

// AfterTools is Progress/Exit.
func (s *session) AfterTools(step int, results []event.ToolResult) bool {
	switch {
	case s.violation != "":
		s.exit = ExitSandboxViolation
	case s.finalized:
		s.exit = ExitFinalized
	case s.exit == "" && s.progress && len(s.in.Expected) > 0 && s.validate().OK:
		s.exit = ExitValidated
	}
	if s.exit != "" {
		return true
	}
	if s.progress {
		s.noProgress = 0
	} else {
		s.noProgress++
	}
	if s.noProgress >= 2 {
		if s.metrics.MicroReflects > 0 {
			s.exit = ExitStalled
			return true
		}
		// Micro-Reflect, once: a short re-plan note rides on the last tool
		// result (providers need tool results to follow tool calls).
		s.metrics.MicroReflects++
		note := s.reflectNote()
		s.rt.cfg.Events.Emit(event.SkillReflectEvent{Step: step, Note: note})
		last := &results[len(results)-1]
		last.Content += "\n\n[micro-reflect] " + note
		s.noProgress = 0
	}
	return false
}

// sessionTool is one Act tool as a tool.Tool of the session, so that the
// shared tool loop can run it. It leaves the call's full output (evidence
// details) in the session for the guard.
type sessionTool struct {
	s *session
	t *actTool
}

func (st *sessionTool) Spec() tool.Spec { return st.t.spec }
func (st *sessionTool) Kind() tool.Kind { return st.t.kind }

// Run applies the call with the AttemptMemo and cycle guards.
func (st *sessionTool) Run(ctx context.Context, input json.RawMessage) (tool.Result, error) {
	out := st.s.apply(ctx, st.t, input)
	st.s.out, st.s.ran = out, true
	return tool.Result{Content: out.content, IsError: out.isError}, nil
}

// guard is the session's tool middleware (Apply + Record): it refuses calls
// once the run has ended or the tool-call budget is spent (journaled as
// tool.denied), answers unknown tools, and records the evidence of every
// call it lets through.
func (s *session) guard(offered []tool.Spec) tool.Middleware {
	return func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, call tool.Call) tool.Outcome {
			if s.ended {
				return s.deny(call, errorContent("SKIPPED", "not run: the run ended", ""))
			}
			if s.toolCalls >= s.budgets.MaxToolCalls {
				s.exit = ExitToolCallBudget
				return s.deny(call, errorContent(agenterr.CodeBudgetExceeded, "max_tool_calls reached; the run ends", ""))
			}
			s.toolCalls++
			s.turnCalls++
			callStart := s.now()
			var out toolOutput
			var res tool.Outcome
			if call.Tool == nil {
				e := agenterr.New(agenterr.CodeToolInput, agenterr.LayerSkill, true, "unknown tool %q", call.Name)
				names := make([]string, len(offered))
				for i, sp := range offered {
					names[i] = sp.Name
				}
				e.Hint = "call one of: " + strings.Join(names, ", ")
				out = failure(e)
				res.Content, res.IsError = out.content, true
			} else {
				s.ran = false
				res = next(ctx, call)
				if s.ran {
					out = s.out
				} else {
					// The tool did not return (it panicked): the loop's
					// answer is the evidence.
					out = toolOutput{content: res.Content, isError: true, errText: res.Content}
				}
				res.Denied = out.refused
			}
			cost := event.SkillCost{TimeMs: s.now().Sub(callStart).Milliseconds()}
			if s.turnCalls == 1 {
				cost.Tokens = s.turnTokens
				cost.TimeMs += callStart.Sub(s.turnStart).Milliseconds()
			}
			s.record(event.SkillEvidence{
				Step: s.step, Seq: s.toolCalls, Tool: call.Name, OK: !out.isError, ReasonShort: s.reason,
				InputsDigest: digest(call.Name, call.Input), Cost: cost, DiffSummary: out.diff,
				FileIDs: out.files, Disclosure: out.level, Cached: out.cached, Error: out.errText, Stderr: out.stderr,
			})
			switch {
			case s.violation != "" || s.finalized:
				s.ended = true
			case s.cycle:
				s.exit, s.ended = ExitCycle, true
			}
			return res
		}
	}
}

// deny answers a call the runtime refuses without running it and journals
// the refusal (it has no evidence: nothing ran).
func (s *session) deny(call tool.Call, content string) tool.Outcome {
	s.rt.cfg.Events.Emit(event.ToolUse{ID: call.ID, Name: call.Name, Input: call.Input,
		Output: content, IsError: true, Denied: true})
	return tool.Denial(content)
}

// budgetExit returns the exit reason when a budget is spent or the caller
// canceled.
func (s *session) budgetExit(ctx, parent context.Context) string {
	switch {
	case parent.Err() != nil:
		return ExitCanceled
	case ctx.Err() != nil || s.now().Sub(s.start).Milliseconds() >= s.budgets.TimeBudgetMs:
		return ExitTimeBudget
	case s.usage.Total() >= s.budgets.TokenBudget:
		return ExitTokenBudget
	case s.toolCalls >= s.budgets.MaxToolCalls:
		return ExitToolCallBudget
	}
	return ""
}

// finish validates, builds the ActResult and, when complete, records the
// run so an identical later run can end at once.
func (s *session) finish(reason string, err error) *ActResult {
	val := s.validate()
	completed := val.OK && (len(s.in.Expected) > 0 || reason == ExitFinalized || reason == ExitModelStopped) &&
		reason != ExitSandboxViolation && err == nil
	if reason == ExitModelStopped && completed && len(s.in.Expected) > 0 {
		reason = ExitValidated
	}
	res := &ActResult{
		Skill:      s.sk.ID,
		Completed:  completed,
		ExitReason: reason,
		Validation: val,
		Evidence:   s.evidence,
	}
	if res.Evidence == nil {
		res.Evidence = []event.SkillEvidence{}
	}
	res.Artifacts = s.artifactList()
	res.EvidenceSummary = s.evidenceSummary()
	s.metrics.Tokens = s.usage.Total()
	s.metrics.InputTokens = s.usage.InputTokens
	s.metrics.OutputTokens = s.usage.OutputTokens
	s.metrics.CacheReadTokens = s.usage.CacheReadTokens
	s.metrics.CacheWriteTokens = s.usage.CacheWriteTokens
	s.metrics.TimeMs = s.now().Sub(s.start).Milliseconds()
	s.metrics.ToolCalls = s.toolCalls
	s.metrics.DiskBytes = s.diskWritten
	res.Metrics = s.metrics
	res.RemainingBudgets = s.remaining()
	if err != nil {
		res.Error = &ErrorInfo{Code: agenterr.CodeOf(err), Message: err.Error(), Recoverable: agenterr.IsRecoverable(err)}
		if res.Error.Code == "" {
			res.Error.Code = agenterr.CodeSdkRequest
		}
	}
	res.Unmet = s.unmet(res, reason)
	s.saveRecord(completed)
	return res
}

func (s *session) remaining() Budgets {
	r := s.budgets
	r.MaxToolCalls = max(0, r.MaxToolCalls-s.toolCalls)
	r.TimeBudgetMs = max(0, r.TimeBudgetMs-s.now().Sub(s.start).Milliseconds())
	r.TokenBudget = max(0, r.TokenBudget-s.usage.Total())
	r.DiskWriteLimitMB = max(0, r.DiskWriteLimitMB-int(s.diskWritten>>20))
	return r
}

// unmet lists what the Workflow must deal with, each with a proposal.
func (s *session) unmet(res *ActResult, reason string) []Unmet {
	out := []Unmet{}
	if res.Completed {
		return out
	}
	for _, oc := range res.Validation.Outputs {
		if oc.OK() {
			continue
		}
		u := Unmet{Path: oc.Path, Reason: strings.Join(oc.Errors, "; ")}
		if !oc.Completeness {
			u.Kind = "missing_output"
			u.Proposal = fmt.Sprintf("produce build/%s (writeArtifact or templateExpand with output)", oc.Path)
		} else {
			u.Kind = "invalid_output"
			u.Proposal = fmt.Sprintf("fix build/%s so it passes validation: %s", oc.Path, firstOf(oc.Errors))
		}
		out = append(out, u)
	}
	missing := make([]string, 0, len(s.missing))
	for p := range s.missing {
		missing = append(missing, p)
	}
	sort.Strings(missing)
	for _, p := range missing {
		out = append(out, Unmet{Kind: "missing_reference", Path: p,
			Reason:   "SKILL.md refers to " + p + " but the skill folder does not contain it",
			Proposal: "add " + p + " to the skill, or pass its content as an input"})
	}
	switch reason {
	case ExitToolCallBudget, ExitTimeBudget, ExitTokenBudget:
		out = append(out, Unmet{Kind: "budget", Reason: "the run stopped: " + reason,
			Proposal: "raise the budget or narrow the goal; remaining budgets are in remainingBudgets"})
	case ExitStalled, ExitCycle:
		out = append(out, Unmet{Kind: "stalled", Reason: "no progress after a micro-reflect (" + reason + ")",
			Proposal: "give more specific inputs or constraints, or check that the skill's instructions can reach the expected outputs"})
	case ExitSandboxViolation:
		out = append(out, Unmet{Kind: "sandbox_violation", Reason: s.violation,
			Proposal: "keep every path inside the skill folder and writes inside build/"})
	}
	if s.scriptFailures > 0 && len(res.Validation.Outputs) > 0 && !res.Validation.OK {
		out = append(out, Unmet{Kind: "script_failure", Reason: s.lastScriptFailure,
			Proposal: "check the script's arguments and dependencies (no network, no new packages in the sandbox)"})
	}
	if len(out) == 0 && len(s.in.Expected) == 0 {
		out = append(out, Unmet{Kind: "missing_output", Reason: "no expected outputs were given and the run did not finalize",
			Proposal: "pass expected outputs (--expect) so completion can be verified"})
	}
	return out
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func (s *session) evidenceSummary() []string {
	out := make([]string, 0, len(s.evidence))
	for _, e := range s.evidence {
		line := fmt.Sprintf("#%d step %d %s", e.Seq, e.Step, e.Tool)
		if e.OK {
			line += " ok"
		} else {
			line += " failed: " + truncate(e.Error, 120)
		}
		if e.Disclosure != "" {
			line += " [" + e.Disclosure + "]"
		}
		if e.Cached {
			line += " (cached)"
		}
		if e.DiffSummary != "" {
			line += " — " + truncate(e.DiffSummary, 120)
		}
		out = append(out, line)
	}
	return out
}

// reasonShort keeps at most five non-empty lines of the model's text.
func reasonShort(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		lines = append(lines, truncate(l, 200))
		if len(lines) == 5 {
			break
		}
	}
	return strings.Join(lines, "\n")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// digest is the inputs_digest of a call: a short hash of the tool name and
// its canonical input.
func digest(name string, input json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(canonicalJSON(input))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// canonicalJSON re-encodes JSON with sorted keys so equal inputs hash alike.
func canonicalJSON(b json.RawMessage) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

func hashBytes(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// errorContent renders a structured failure for the model.
func errorContent(code, msg, hint string) string {
	m := map[string]any{"ok": false, "error": map[string]any{"code": code, "message": msg}}
	if hint != "" {
		m["error"].(map[string]any)["hint"] = hint
	}
	b, _ := json.Marshal(m)
	return string(b)
}
