// Package runreport turns a run journal into a chronological account of
// what happened — per iteration: where the prompt came from, the model's
// text and tool calls in the order they happened with their durations, the
// verdict with each validator's result and failure pattern, the retry
// prompt, tokens and cost — and renders it as text, Markdown (for a pull
// request comment or a CI job summary) or one self-contained HTML page.
//
// It reads only the journal's events, so it shows agent runs, resumed runs,
// runs cut short by a killed process, skill runs and pipeline runs alike.
package runreport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/verify"
	"github.com/capstan-dev/capstan/verify/hidden"
)

// Run is the account of one run.
type Run struct {
	ID       string    `json:"runId"`
	Agent    string    `json:"agent,omitempty"`
	AgentDir string    `json:"agentDir,omitempty"`
	WorkDir  string    `json:"workDir,omitempty"`
	Model    string    `json:"model,omitempty"`
	Params   any       `json:"params,omitempty"`
	Started  time.Time `json:"started"`
	// Sandbox says whether the run's commands ran in the sandbox:
	// "sandboxed", "unsandboxed (…why…)", or "" when the journal does not
	// say (recorded before capstan recorded it). A run resumed
	// unsandboxed even once is unsandboxed.
	Sandbox string `json:"sandbox,omitempty"`
	// Skill is the skill's id on a skill run ("" on an agent run); its
	// iterations are the model's turns.
	Skill      string      `json:"skill,omitempty"`
	Goal       string      `json:"goal,omitempty"`
	Iterations []Iteration `json:"iterations"`
	Warnings   []string    `json:"warnings,omitempty"`
	// TestBaselines are the test validators' runs before the first
	// iteration (tests.baseline), what no-lost-tests compares with.
	TestBaselines []verify.TestBaseline `json:"testBaselines,omitempty"`
	// HiddenBaselines are the test validators' runs with the hidden test
	// files placed, before the first iteration (tests.hidden of phase
	// baseline): the hidden tests by name, never their contents.
	HiddenBaselines []hidden.Result `json:"hiddenBaselines,omitempty"`
	// Outcome is how the run ended; nil when the journal has no run.end
	// event (the run was killed or is still running).
	Outcome *Outcome `json:"outcome,omitempty"`
	// Artifacts are the files a skill run produced.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Pipeline is set on a pipeline run (`capstan pipeline run`): its
	// stages take the place of iterations.
	Pipeline *Pipeline `json:"pipeline,omitempty"`
	// PipelineRun is the id of the pipeline run an agent run is a stage
	// of ("" = none).
	PipelineRun string `json:"pipelineRun,omitempty"`
	// Unverified is set for a journal kept inside the work dir (by capstan
	// versions before the state directory), which the agent could write:
	// every format shows it under the Unverified banner, and its status
	// is never a plain COMPLETED.
	Unverified bool `json:"unverified,omitempty"`
}

// Unverified is the banner of a run recorded inside its work dir.
const Unverified = "unverified: recorded inside the work dir, which the agent can write"

// Iteration is one iteration of an agent run, or one model turn of a skill
// run.
type Iteration struct {
	N            int       `json:"iteration"`
	Step         string    `json:"step,omitempty"`
	Started      time.Time `json:"started"`
	Ended        time.Time `json:"ended,omitempty"`
	PromptSource string    `json:"promptSource,omitempty"`
	Prompt       string    `json:"prompt,omitempty"`
	Entries      []Entry   `json:"entries"`
	Verdict      *Verdict  `json:"verdict,omitempty"`
	// Usage holds every token count the journal recorded for the iteration
	// (input_tokens, output_tokens, cache_read_tokens, ...), keyed by the
	// journal's field names.
	Usage   map[string]int64 `json:"usage,omitempty"`
	CostUSD float64          `json:"costUsd"`
	// Finished is false for an iteration cut short.
	Finished bool `json:"finished"`
}

// Duration is how long the iteration took (0 when it did not finish).
func (it Iteration) Duration() time.Duration {
	if it.Ended.IsZero() {
		return 0
	}
	return it.Ended.Sub(it.Started)
}

// Tokens is the iteration's input plus output tokens.
func (it Iteration) Tokens() int64 {
	return it.Usage["input_tokens"] + it.Usage["output_tokens"]
}

// Entry kinds, in the order they can appear within an iteration.
const (
	KindText       = "text"        // the model's text of one turn
	KindTool       = "tool"        // a tool call with its input, output and duration
	KindDenied     = "denied"      // a tool call the permission policy refused
	KindModelRetry = "model-retry" // the provider retried a failed API call
	KindTransition = "transition"  // the step machine moved (or stayed)
	KindCheck      = "check"       // the completion check
	KindValidator  = "validator"   // one validator's result
	KindRetry      = "retry"       // the retry prompt chosen for a failure pattern
	KindError      = "error"
	KindWarning    = "warning"
	KindCompaction = "compaction" // the transcript was shortened to fit the context window
)

// Entry is one thing that happened, in journal order.
type Entry struct {
	Kind string    `json:"kind"`
	Time time.Time `json:"time"`
	// Title is one line: a tool's name and input, a validator's name, a
	// retry's pattern.
	Title string `json:"title"`
	// Detail is the longer text: the model's text, a tool's output, a
	// retry prompt.
	Detail   string        `json:"detail,omitempty"`
	Duration time.Duration `json:"durationNs,omitempty"`
	// OK is false for a failed tool call, validator or check.
	OK bool `json:"ok"`
	// Omitted is the number of bytes of a failed validator's output
	// before the end of it that Detail holds (and the journal keeps).
	Omitted int `json:"omittedBytes,omitempty"`
}

// Verdict is how an iteration was judged.
type Verdict struct {
	// Result is "complete", "continue" or "stop".
	Result     string            `json:"result"`
	Reason     string            `json:"reason,omitempty"`
	Validators []ValidatorResult `json:"validators,omitempty"`
	// Pattern is the failure pattern that chose the retry prompt.
	Pattern string `json:"pattern,omitempty"`
	// Retry is the prompt sent next because of the failure.
	Retry *Retry `json:"retry,omitempty"`
}

// ValidatorResult is one validator run.
type ValidatorResult struct {
	Name     string        `json:"validator"`
	Type     string        `json:"type,omitempty"`
	Valid    bool          `json:"valid"`
	Pattern  string        `json:"pattern,omitempty"`
	ExitCode *int          `json:"exitCode,omitempty"`
	Duration time.Duration `json:"durationNs,omitempty"`
	// Output is the end of a failed validator's output as the journal
	// keeps it, and OutputOmitted the number of bytes before it that it
	// does not (journals written before capstan kept it have neither).
	Output        string `json:"output,omitempty"`
	OutputOmitted int    `json:"outputOmitted,omitempty"`
}

// Retry is a retry prompt.
type Retry struct {
	Pattern     string `json:"pattern,omitempty"`
	Validator   string `json:"validator,omitempty"`
	Source      string `json:"source,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
	MaxAttempts int    `json:"maxAttempts,omitempty"`
	Text        string `json:"text"`
	Params      string `json:"params,omitempty"`
}

// Outcome is how the run ended.
type Outcome struct {
	Success          bool             `json:"success"`
	CompletionReason string           `json:"completionReason,omitempty"`
	Reason           string           `json:"reason,omitempty"`
	Iterations       int              `json:"iterations"`
	Usage            map[string]int64 `json:"usage,omitempty"`
	CostUSD          float64          `json:"cost"`
	Duration         time.Duration    `json:"durationNs"`
	// TestBaseline is the part of Duration spent taking the test
	// baselines before the first iteration (0 in journals of runs that
	// took none, or of capstan versions that did not count it).
	TestBaseline time.Duration `json:"testBaselineNs,omitempty"`
	ErrorCode    string        `json:"errorCode,omitempty"`
	ErrorMessage string        `json:"errorMessage,omitempty"`
	Recoverable  bool          `json:"recoverable,omitempty"`
}

// Artifact is a file a skill run wrote.
type Artifact struct {
	Handle string `json:"handle"`
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
}

// Load reads the journal at path into a Run.
func Load(id, path string) (*Run, error) {
	events, err := journal.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Build(id, events)
}

// Build makes the account of a run from its journal events.
func Build(id string, events []journal.Event) (*Run, error) {
	b := builder{run: &Run{ID: id, Iterations: []Iteration{}}}
	for _, ev := range events {
		if err := b.add(ev); err != nil {
			return nil, fmt.Errorf("journal event %d (%s): %w", ev.Seq, ev.Type, err)
		}
	}
	b.finish()
	return b.run, nil
}

type builder struct {
	run *Run
	cur *Iteration
	// turns counts the current iteration's model turns.
	turns int
	// texts of the current iteration from session.messages, one per
	// assistant message (haveTexts: the provider journals a transcript).
	texts     []string
	haveTexts bool
	responses []string // query.result responses, for providers without one
}

func (b *builder) iteration(n int, at time.Time) *Iteration {
	if b.cur != nil && b.cur.N == n {
		return b.cur
	}
	b.closeIteration()
	its := b.run.Iterations
	// A resumed run repeats an unfinished iteration: replace it.
	if k := len(its); k > 0 && its[k-1].N == n && !its[k-1].Finished {
		b.run.Iterations = its[:k-1]
	}
	b.run.Iterations = append(b.run.Iterations, Iteration{N: n, Started: at, Entries: []Entry{}})
	b.cur = &b.run.Iterations[len(b.run.Iterations)-1]
	b.turns, b.texts, b.haveTexts, b.responses = 0, nil, false, nil
	return b.cur
}

// rewind drops the iterations after the k-th finished one: a resumed run
// that continued from iteration k (a driver redid an iteration whose work
// was lost) no longer counts them, and the account shows what counted.
func (b *builder) rewind(k int) {
	n := 0
	for i, it := range b.run.Iterations {
		if it.Finished {
			n++
		}
		if n > k {
			dropped := b.run.Iterations[i:]
			which := fmt.Sprintf("iteration %d was", dropped[0].N)
			if last := dropped[len(dropped)-1].N; last != dropped[0].N {
				which = fmt.Sprintf("iterations %d to %d were", dropped[0].N, last)
			}
			b.run.Warnings = append(b.run.Warnings, which+" run again after the run continued from iteration "+fmt.Sprint(k)+
				"; the account shows the attempt that counted (the journal keeps both)")
			b.run.Iterations = b.run.Iterations[:i]
			return
		}
	}
}

// Placeholders (entries without a kind) mark where a model turn ended or
// the query's result arrived; closeIteration replaces them with the model's
// text, so each turn's text comes right before the tool calls it made.
const (
	placeTurn  = "turn"
	placeQuery = "query"
)

// closeIteration places the model's text into the current iteration: the
// transcript's assistant messages one per model turn, or, for a provider
// that journals no transcript, the query's responses where the query ended.
func (b *builder) closeIteration() {
	it := b.cur
	if it == nil {
		return
	}
	byTurn := b.haveTexts && b.turns > 0
	texts := b.responses
	if b.haveTexts {
		texts = b.texts
	}
	out := make([]Entry, 0, len(it.Entries)+len(texts))
	text := func(e Entry, t string) {
		if t != "" {
			out = append(out, Entry{Kind: KindText, Time: e.Time, Title: "model", Detail: t, OK: true})
		}
	}
	next := 0
	for _, e := range it.Entries {
		switch {
		case e.Kind != "":
			out = append(out, e)
		case e.Title == placeTurn && byTurn && next < len(texts):
			text(e, texts[next])
			next++
		case e.Title == placeQuery && !byTurn:
			for ; next < len(texts); next++ {
				text(e, texts[next])
			}
		}
	}
	for ; next < len(texts); next++ {
		text(Entry{Time: it.Ended}, texts[next])
	}
	it.Entries = out
	b.cur = nil
}

func (b *builder) entry(e Entry) { b.cur.Entries = append(b.cur.Entries, e) }

func (b *builder) add(ev journal.Event) error {
	decode := func(v any) error {
		if len(ev.Data) == 0 {
			return nil
		}
		return json.Unmarshal(ev.Data, v)
	}
	r := b.run
	switch ev.Type {
	case journal.RunStart:
		var s struct {
			Agent, AgentDir, WorkDir, Model string
			PipelineRun                     string
			Params                          any
			Resumed, Rewound                bool
			Iteration                       int
			Sandboxed                       *bool
			Unsandboxed                     string
		}
		if err := decode(&s); err != nil {
			return err
		}
		if r.Started.IsZero() {
			r.Agent, r.AgentDir, r.WorkDir, r.Model, r.Params, r.Started = s.Agent, s.AgentDir, s.WorkDir, s.Model, s.Params, ev.Time
			r.Pipeline = pipelineStart(ev.Data)
			r.PipelineRun = s.PipelineRun
		}
		switch {
		case s.Sandboxed == nil:
		case !*s.Sandboxed:
			why := s.Unsandboxed
			if why == "" {
				why = "unsandboxed"
			}
			if s.Resumed && r.Sandbox == "sandboxed" {
				why += fmt.Sprintf(" (from the resume at iteration %d)", s.Iteration)
			}
			if !strings.HasPrefix(r.Sandbox, "unsandboxed") {
				r.Sandbox = why
			}
		case r.Sandbox == "":
			r.Sandbox = "sandboxed"
		}
		r.Outcome = nil // a resumed run goes on
		// The resumed run starts its iteration afresh: an unfinished one
		// of the same number is replaced, not continued.
		b.closeIteration()
		if s.Resumed && s.Rewound {
			b.rewind(s.Iteration)
		}
		return nil
	case "skill.act.start":
		var s struct{ Skill, Goal string }
		if err := decode(&s); err != nil {
			return err
		}
		r.Skill, r.Goal = s.Skill, s.Goal
		return nil
	case journal.IterationStart:
		b.iteration(ev.Iteration, ev.Time)
		return nil
	case journal.RunEnd:
		b.closeIteration()
		var s struct {
			Success          bool             `json:"success"`
			CompletionReason string           `json:"completionReason"`
			Reason           string           `json:"reason"`
			Iterations       int              `json:"iterations"`
			Usage            map[string]int64 `json:"usage"`
			Cost             float64          `json:"cost"`
			DurationMs       int64            `json:"durationMs"`
			TestBaselineMs   int64            `json:"testBaselineMs"`
			Error            json.RawMessage  `json:"error"`
			ErrorCode        string           `json:"errorCode"`
			Status           string           `json:"status"` // a pipeline's metadata.status
		}
		if err := decode(&s); err != nil {
			return err
		}
		o := &Outcome{Success: s.Success, CompletionReason: s.CompletionReason, Reason: s.Reason, Iterations: s.Iterations,
			Usage: s.Usage, CostUSD: s.Cost, Duration: time.Duration(s.DurationMs) * time.Millisecond,
			TestBaseline: time.Duration(s.TestBaselineMs) * time.Millisecond}
		runEndError(o, s.Error, s.ErrorCode)
		if r.Pipeline != nil {
			o.CompletionReason = s.Status
			if !r.Started.IsZero() {
				o.Duration = ev.Time.Sub(r.Started)
			}
		}
		r.Outcome = o
		return nil
	case journal.Warning:
		var s struct{ Message string }
		if decode(&s) == nil && s.Message != "" {
			r.Warnings = append(r.Warnings, s.Message)
		} else {
			r.Warnings = append(r.Warnings, string(ev.Data))
		}
		return nil
	case journal.GitHubCall:
		// After the run completed: shown with its last iteration.
		var s struct {
			Args       []string `json:"args"`
			ExitCode   int      `json:"exitCode"`
			Output     string   `json:"output"`
			Error      string   `json:"error"`
			DurationMs int64    `json:"durationMs"`
		}
		if err := decode(&s); err != nil || len(r.Iterations) == 0 {
			return err
		}
		last := &r.Iterations[len(r.Iterations)-1]
		detail := s.Output
		if s.Error != "" {
			detail = strings.TrimSpace(s.Error + "\n" + s.Output)
		}
		last.Entries = append(last.Entries, Entry{Kind: KindTool, Time: ev.Time, Title: "gh " + strings.Join(s.Args, " ") + " (after completion)",
			Detail: detail, Duration: time.Duration(s.DurationMs) * time.Millisecond, OK: s.Error == "" && s.ExitCode == 0})
		return nil
	case string(event.KindTestBaseline):
		var bl verify.TestBaseline
		if err := decode(&bl); err != nil {
			return err
		}
		r.TestBaselines = append(r.TestBaselines, bl)
		return nil
	case string(event.KindHiddenTests):
		var h hidden.Result
		if err := decode(&h); err != nil {
			return err
		}
		if h.Phase == hidden.PhaseBaseline {
			r.HiddenBaselines = append(r.HiddenBaselines, h)
			return nil
		}
		b.entry(Entry{Kind: KindValidator, Time: ev.Time, Title: HiddenSummary(h), Detail: hiddenDetail(h), OK: h.Passed && len(h.Failed()) == 0})
		return nil
	case journal.LifecycleChange, journal.QueryStart:
		return nil
	}
	if ok, err := b.addPipeline(ev, decode); ok {
		return err
	}
	if r.Skill != "" && ev.Type == journal.ModelTurn {
		// A skill run has no iterations: each model turn is one.
		b.iteration(len(r.Iterations)+1, ev.Time)
		b.cur.Finished = true
	}
	if b.cur == nil {
		switch ev.Type {
		case journal.Error:
			return b.errorEntry(ev, decode)
		case "skill.act.end":
			return b.skillEnd(decode)
		}
		return nil // nothing to attach it to
	}
	it := b.cur
	switch ev.Type {
	case journal.PromptResolved:
		var s struct{ Source, Text string }
		if err := decode(&s); err != nil {
			return err
		}
		if it.Step == "" {
			it.Step = ev.Step
		}
		it.PromptSource, it.Prompt = s.Source, s.Text
	case journal.ModelTurn:
		var s struct {
			Turn       int              `json:"turn"`
			Usage      map[string]int64 `json:"usage"`
			DurationMs int64            `json:"duration_ms"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		if r.Skill != "" {
			it.Usage = s.Usage
		}
		b.turns++
		it.Entries = append(it.Entries, Entry{Time: ev.Time, Title: placeTurn})
	case journal.ToolCall:
		var s struct {
			Name       string          `json:"name"`
			Input      json.RawMessage `json:"input"`
			Output     string          `json:"output"`
			IsError    bool            `json:"is_error"`
			DurationMs int64           `json:"duration_ms"`
			Replayed   bool            `json:"replayed"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		title := s.Name + " " + compactJSON(s.Input)
		if s.Replayed {
			// Answered from the record of an earlier attempt of the
			// iteration: the tool did not run again.
			title += "  (from the journal, not run again)"
		}
		b.entry(Entry{Kind: KindTool, Time: ev.Time, Title: title, Detail: s.Output,
			Duration: time.Duration(s.DurationMs) * time.Millisecond, OK: !s.IsError})
	case journal.ToolDenied:
		var s struct {
			Name   string          `json:"name"`
			Input  json.RawMessage `json:"input"`
			Reason string          `json:"reason"`
			Output string          `json:"output"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		detail := s.Reason
		if detail == "" {
			detail = s.Output
		}
		b.entry(Entry{Kind: KindDenied, Time: ev.Time, Title: s.Name + " " + compactJSON(s.Input), Detail: detail})
	case "skill.evidence":
		var s struct {
			Tool       string   `json:"tool"`
			OK         bool     `json:"ok"`
			Reason     string   `json:"reason_short"`
			Diff       string   `json:"diff_summary"`
			Files      []string `json:"file_ids"`
			Disclosure string   `json:"disclosure"`
			Cost       struct {
				TimeMs int64 `json:"time_ms"`
			} `json:"cost"`
			Error string `json:"error"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		title := s.Tool
		if len(s.Files) > 0 {
			title += " " + fmt.Sprint(s.Files)
		}
		detail := s.Reason
		for _, extra := range []string{s.Diff, s.Error} {
			if extra != "" {
				detail += "\n" + extra
			}
		}
		b.entry(Entry{Kind: KindTool, Time: ev.Time, Title: title, Detail: detail, Duration: time.Duration(s.Cost.TimeMs) * time.Millisecond, OK: s.OK})
	case journal.ModelRetry:
		b.entry(Entry{Kind: KindModelRetry, Time: ev.Time, Title: "provider retry", Detail: compactJSON(ev.Data)})
	case journal.SessionMessages:
		var s struct {
			Messages []struct {
				Role string `json:"role"`
				Text string `json:"text"`
			} `json:"messages"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		b.haveTexts = true
		b.texts = nil
		for _, m := range s.Messages {
			if m.Role == "assistant" {
				b.texts = append(b.texts, m.Text)
			}
		}
	case journal.QueryResult:
		var s struct {
			Responses []string `json:"responses"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		b.responses = s.Responses
		it.Entries = append(it.Entries, Entry{Time: ev.Time, Title: placeQuery})
	case journal.StepTransition:
		var s struct {
			From, To, Kind, Reason string
			Passed                 bool
		}
		if err := decode(&s); err != nil {
			return err
		}
		if s.From == s.To && s.Kind == "stay" && s.Reason == "step has no check" {
			return nil // nothing happened
		}
		b.entry(Entry{Kind: KindTransition, Time: ev.Time, Title: fmt.Sprintf("step %s → %s (%s)", s.From, s.To, s.Kind), Detail: s.Reason, OK: s.Passed})
	case journal.CompletionCheck:
		var s struct {
			Complete, Declared bool
			Reason             string
		}
		if err := decode(&s); err != nil {
			return err
		}
		title := "completion not reached"
		switch {
		case s.Complete && s.Declared:
			title = "completion declared"
		case s.Complete:
			title = "completion reached"
		}
		b.entry(Entry{Kind: KindCheck, Time: ev.Time, Title: title, Detail: s.Reason, OK: s.Complete})
	case journal.ValidatorResult:
		var s struct {
			Validator  string `json:"validator"`
			Type       string `json:"type"`
			Valid      bool   `json:"valid"`
			Pattern    string `json:"pattern"`
			ExitCode   *int   `json:"exitCode"`
			DurationMs int64  `json:"durationMs"`
			Output     string `json:"output"`
			Omitted    int    `json:"outputOmitted"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		v := ValidatorResult{Name: s.Validator, Type: s.Type, Valid: s.Valid, Pattern: s.Pattern, ExitCode: s.ExitCode,
			Duration: time.Duration(s.DurationMs) * time.Millisecond, Output: s.Output, OutputOmitted: max(s.Omitted, 0)}
		b.verdict().Validators = append(b.verdict().Validators, v)
		b.entry(Entry{Kind: KindValidator, Time: ev.Time, Title: v.Summary(), OK: v.Valid,
			Detail: strings.ReplaceAll(v.Output, "\r\n", "\n"), Omitted: v.OutputOmitted})
	case string(event.KindTestCompare):
		var c verify.TestComparison
		if err := decode(&c); err != nil {
			return err
		}
		b.entry(Entry{Kind: KindValidator, Time: ev.Time, Title: CompareSummary(c), Detail: compareDetail(c), OK: c.Loss == nil})
	case journal.RetryPrompt:
		var s struct {
			Pattern     string          `json:"pattern"`
			Validator   string          `json:"validator"`
			Source      string          `json:"source"`
			Attempt     int             `json:"attempt"`
			MaxAttempts int             `json:"maxAttempts"`
			Text        string          `json:"text"`
			Params      json.RawMessage `json:"params"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		rt := &Retry{Pattern: s.Pattern, Validator: s.Validator, Source: s.Source, Attempt: s.Attempt, MaxAttempts: s.MaxAttempts, Text: s.Text}
		if len(s.Params) > 0 && string(s.Params) != "null" {
			rt.Params = compactJSON(s.Params)
		}
		v := b.verdict()
		v.Retry, v.Pattern = rt, s.Pattern
		detail := s.Text
		if rt.Params != "" {
			// What the validator's extractors pulled out and the prompt used.
			detail = "extracted " + rt.Params + "\n\n" + detail
		}
		b.entry(Entry{Kind: KindRetry, Time: ev.Time, Title: rt.Summary(), Detail: detail})
	case journal.Error:
		return b.errorEntry(ev, decode)
	case journal.ContextCompacted:
		var s struct {
			Window             int64    `json:"window"`
			TokensBefore       int64    `json:"tokens_before"`
			TokensAfter        int64    `json:"tokens_after"`
			StubbedCalls       []string `json:"stubbed_calls"`
			SummarizedMessages int      `json:"summarized_messages"`
			SummaryModel       string   `json:"summary_model"`
			Summary            string   `json:"summary"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		title := fmt.Sprintf("context compacted: ~%d → ~%d tokens (window %d)", s.TokensBefore, s.TokensAfter, s.Window)
		if n := len(s.StubbedCalls); n > 0 {
			title += fmt.Sprintf(", %d tool outputs stubbed", n)
		}
		if s.SummarizedMessages > 0 {
			title += fmt.Sprintf(", %d messages summarized by %s", s.SummarizedMessages, s.SummaryModel)
		}
		b.entry(Entry{Kind: KindCompaction, Time: ev.Time, Title: title, Detail: s.Summary, OK: true})
	case journal.EscalationNotice:
		b.entry(Entry{Kind: KindWarning, Time: ev.Time, Title: "escalation", Detail: compactJSON(ev.Data)})
	case journal.IterationEnd:
		var s struct {
			Summary *struct {
				Usage   map[string]int64 `json:"usage"`
				CostUSD float64          `json:"costUsd"`
			} `json:"summary"`
			Outcome *struct {
				Complete, Stop, Redo bool
				Reason, Error        string
			} `json:"outcome"`
		}
		if err := decode(&s); err != nil {
			return err
		}
		// An iteration whose query did not finish (redo) does not count:
		// a resumed run runs it again under its number.
		it.Ended, it.Finished = ev.Time, s.Outcome == nil || !s.Outcome.Redo
		if s.Summary != nil {
			it.Usage, it.CostUSD = s.Summary.Usage, s.Summary.CostUSD
		}
		if o := s.Outcome; o != nil {
			v := b.verdict()
			v.Result, v.Reason = "continue", o.Reason
			switch {
			case o.Complete:
				v.Result = "complete"
			case o.Stop:
				v.Result = "stop"
			}
			if o.Error != "" && v.Reason == "" {
				v.Reason = o.Error
			}
		}
	case "skill.act.end":
		return b.skillEnd(decode)
	}
	return nil
}

func (b *builder) verdict() *Verdict {
	if b.cur.Verdict == nil {
		b.cur.Verdict = &Verdict{}
	}
	return b.cur.Verdict
}

func (b *builder) errorEntry(ev journal.Event, decode func(any) error) error {
	var s struct {
		Code, Message string
	}
	if err := decode(&s); err != nil {
		return err
	}
	e := Entry{Kind: KindError, Time: ev.Time, Title: s.Code, Detail: s.Message}
	if b.cur == nil {
		b.run.Warnings = append(b.run.Warnings, "error "+s.Code+": "+s.Message)
		return nil
	}
	b.entry(e)
	return nil
}

// skillEnd records a skill run's result: its artifacts and the validation
// of its expected outputs, as the verdict of the last turn.
func (b *builder) skillEnd(decode func(any) error) error {
	var s struct {
		Completed  bool   `json:"completed"`
		ExitReason string `json:"exitReason"`
		Artifacts  []struct {
			Handle string `json:"handle"`
			Path   string `json:"path"`
			Bytes  int64  `json:"bytes"`
		} `json:"artifacts"`
		Validation struct {
			OK      bool `json:"ok"`
			Outputs []struct {
				Path  string `json:"path"`
				OK    bool   `json:"ok"`
				Error string `json:"error"`
			} `json:"outputs"`
		} `json:"validation"`
	}
	if err := decode(&s); err != nil {
		return err
	}
	for _, a := range s.Artifacts {
		b.run.Artifacts = append(b.run.Artifacts, Artifact{Handle: a.Handle, Path: a.Path, Bytes: a.Bytes})
	}
	if b.cur == nil {
		return nil
	}
	v := b.verdict()
	v.Result, v.Reason = "stop", s.ExitReason
	if s.Completed {
		v.Result = "complete"
	}
	for _, o := range s.Validation.Outputs {
		v.Validators = append(v.Validators, ValidatorResult{Name: o.Path, Type: "expected output", Valid: o.OK, Pattern: o.Error})
	}
	return nil
}

func (b *builder) finish() {
	b.closeIteration()
	its := b.run.Iterations
	sort.SliceStable(its, func(i, j int) bool { return its[i].N < its[j].N })
}

// Summary is one line: "tests-pass (command) passed in 464ms".
func (v ValidatorResult) Summary() string {
	s := v.Name
	if v.Type != "" {
		s += " (" + v.Type + ")"
	}
	if v.Valid {
		s += " passed"
	} else {
		s += " failed"
		if v.Pattern != "" {
			s += ": pattern " + v.Pattern
		}
	}
	if v.ExitCode != nil {
		s += fmt.Sprintf(", exit %d", *v.ExitCode)
	}
	if v.Duration > 0 {
		s += " in " + FormatDuration(v.Duration)
	}
	return s
}

// BaselineSummary is one line: "tests-pass (go test -v ./...) before the
// first iteration: 2 ran (0 passed, 2 failed), 0 skipped, exit 1".
func BaselineSummary(b verify.TestBaseline) string {
	s := fmt.Sprintf("%s (%s) before the first iteration: ", b.Validator, b.Command)
	switch {
	case !b.Parsed:
		return s + fmt.Sprintf("no test run capstan reads in its output, exit %d%s; lost tests not checked", b.ExitCode, baselineTime(b))
	case !b.Run.Counted:
		s += "tests ran, not counted (no per-test output)"
	default:
		s += fmt.Sprintf("%d ran (%d passed, %d failed), %d skipped", b.Run.Ran(), b.Run.Passed, b.Run.Failed, b.Run.Skipped)
	}
	return s + fmt.Sprintf(", exit %d%s", b.ExitCode, baselineTime(b))
}

// baselineTime is " in 19.7s", or "" for a baseline journaled without
// its duration.
func baselineTime(b verify.TestBaseline) string {
	if b.DurationMs <= 0 {
		return ""
	}
	return " in " + FormatDuration(time.Duration(b.DurationMs)*time.Millisecond)
}

// CompareSummary is one line: "no lost tests in tests-pass: 2 ran (1
// passed, 1 failed), 0 skipped" or "… lost: pattern tests-disappeared".
func CompareSummary(c verify.TestComparison) string {
	s := fmt.Sprintf("no lost tests in %s: ", c.Validator)
	switch {
	case !c.Parsed:
		s += "no test run in its output"
	case !c.Counted:
		s += "tests ran, not counted (no per-test output)"
	default:
		s += fmt.Sprintf("%d ran (%d passed, %d failed), %d skipped", c.Passed+c.Failed, c.Passed, c.Failed, c.Skipped)
	}
	if c.Loss != nil {
		s += "; lost: pattern " + c.Loss.Pattern
		if c.Loss.BaselineRan >= 0 {
			s += fmt.Sprintf(" (%d ran before the first iteration)", c.Loss.BaselineRan)
		}
	}
	return s
}

// HiddenSummary is one line: "hidden tests in tests-pass: 2 of 2 passed"
// (a check) or "hidden tests of tests-pass before the first iteration: 2
// (0 passed, 2 failed)" (the baseline). It names no test and shows no
// content.
func HiddenSummary(h hidden.Result) string {
	failed := len(h.Failed())
	if h.Phase == hidden.PhaseBaseline {
		s := fmt.Sprintf("hidden tests of %s before the first iteration: ", h.Validator)
		if !h.PerTest {
			return s + fmt.Sprintf("not listed one by one (the command %s with them)", passWord(h.Passed))
		}
		return s + fmt.Sprintf("%d (%d passed, %d failed)", len(h.Tests), len(h.Tests)-failed, failed)
	}
	if !h.PerTest {
		return fmt.Sprintf("hidden tests in %s: not listed one by one; the command %s with them", h.Validator, passWord(h.Passed))
	}
	s := fmt.Sprintf("hidden tests in %s: %d of %d passed", h.Validator, len(h.Tests)-failed, len(h.Tests))
	if failed == 0 && !h.Passed {
		s += "; the command failed with them"
	}
	return s
}

func passWord(ok bool) string {
	if ok {
		return "passed"
	}
	return "failed"
}

// hiddenDetail lists each hidden test and its outcome, by name.
func hiddenDetail(h hidden.Result) string {
	var b strings.Builder
	for _, t := range h.Tests {
		fmt.Fprintf(&b, "%s: %s\n", t.Outcome, t.Name)
	}
	return strings.TrimRight(b.String(), "\n")
}

func compareDetail(c verify.TestComparison) string {
	if c.Loss == nil {
		return ""
	}
	var b strings.Builder
	for _, t := range c.Loss.Disappeared {
		b.WriteString("disappeared: " + t + "\n")
	}
	for _, t := range c.Loss.Skipped {
		b.WriteString("skipped now: " + t + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// Summary is one line: "retry 1/4 for pattern test-failed (tests-pass)".
func (r Retry) Summary() string {
	s := "retry prompt"
	if r.Attempt > 0 {
		s += fmt.Sprintf(" %d/%d", r.Attempt, r.MaxAttempts)
	}
	if r.Pattern != "" {
		s += " for pattern " + r.Pattern
	}
	if r.Validator != "" {
		s += " (" + r.Validator + ")"
	}
	if r.Source != "" {
		s += " from " + r.Source
	}
	return s
}

// FormatDuration renders 0.4ms, 464ms, 1.6s, 2m05s.
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// UsageKeys returns the usage fields of u in a stable order: input and
// output first, then the rest by name.
func UsageKeys(u map[string]int64) []string {
	var keys []string
	for _, k := range []string{"input_tokens", "output_tokens"} {
		if _, ok := u[k]; ok {
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range u {
		if k != "input_tokens" && k != "output_tokens" {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(keys, rest...)
}
