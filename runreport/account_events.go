package runreport

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// onRunStart records a run (or its resume) starting: who runs, where, and whether sandboxed.
func (b *builder) onRunStart(ev journal.Event, decode func(any) error) error {
	r := b.run
	var s struct {
		Agent, AgentDir, WorkDir, Model string
		PipelineRun                     string
		Params                          any
		Resumed, Rewound                bool
		Iteration, Format               int
		Sandboxed                       *bool
		Unsandboxed                     string
	}
	if err := decode(&s); err != nil {
		return err
	}
	if s.Format > journal.Format {
		r.Warnings = append(r.Warnings, fmt.Sprintf("this journal was written by a newer capstan (journal format %d; this one reads formats 1 to %d): events it does not know are left out of this account", s.Format, journal.Format))
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
}

// onSkillStart records a skill run starting: the skill and its goal.
func (b *builder) onSkillStart(ev journal.Event, decode func(any) error) error {
	r := b.run
	var s struct{ Skill, Goal string }
	if err := decode(&s); err != nil {
		return err
	}
	r.Skill, r.Goal = s.Skill, s.Goal
	return nil
}

// onRunEnd records the run ending: its outcome.
func (b *builder) onRunEnd(ev journal.Event, decode func(any) error) error {
	r := b.run
	b.closeIteration()
	var s struct {
		Success          bool             `json:"success"`
		CompletionReason string           `json:"completionReason"`
		Reason           string           `json:"reason"`
		Iterations       int              `json:"iterations"`
		Usage            map[string]int64 `json:"usage"`
		UsageUnreported  int              `json:"usageUnreported"`
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
		Usage: s.Usage, UsageUnreported: s.UsageUnreported, CostUSD: s.Cost, Duration: time.Duration(s.DurationMs) * time.Millisecond,
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
}

// onModelUsage notes a response that began to stream before its
// provider reported its usage: when no usage and no turn of it follow in
// the iteration, the account says that its tokens are in no figure.
func (b *builder) onModelUsage(ev journal.Event, decode func(any) error) error {
	var s event.ModelUsageEvent
	if err := decode(&s); err != nil {
		return err
	}
	b.unreported = nil
	if s.Unreported {
		b.unreported = &Entry{Kind: KindWarning, Time: ev.Time, Title: "response cut before its usage was reported",
			Detail: "the response began to stream, and its provider reports usage only at the end of a stream: its tokens are in no usage figure of the run, which is a lower bound"}
	}
	return nil
}

// onWarning records a warning of the run.
func (b *builder) onWarning(ev journal.Event, decode func(any) error) error {
	r := b.run
	var s struct{ Message string }
	if decode(&s) == nil && s.Message != "" {
		r.Warnings = append(r.Warnings, s.Message)
	} else {
		r.Warnings = append(r.Warnings, string(ev.Data))
	}
	return nil
}

// onGitHubCall records a gh call made after the run completed, shown with its last iteration.
func (b *builder) onGitHubCall(ev journal.Event, decode func(any) error) error {
	r := b.run
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
}

// onTestBaseline records the test baseline taken before the run.
func (b *builder) onTestBaseline(ev journal.Event, decode func(any) error) error {
	r := b.run
	var bl event.TestBaseline
	if err := decode(&bl); err != nil {
		return err
	}
	r.TestBaselines = append(r.TestBaselines, bl)
	return nil
}

// onHiddenTests records a hidden test run: the baseline, or a check of the iteration.
func (b *builder) onHiddenTests(ev journal.Event, decode func(any) error) error {
	r := b.run
	var h event.HiddenResult
	if err := decode(&h); err != nil {
		return err
	}
	if h.Phase == event.HiddenPhaseBaseline {
		r.HiddenBaselines = append(r.HiddenBaselines, h)
		return nil
	}
	b.entry(Entry{Kind: KindValidator, Time: ev.Time, Title: HiddenSummary(h), Detail: hiddenDetail(h), OK: h.Passed && len(h.Failed()) == 0})
	return nil
}

// onPromptResolved records the prompt the iteration sent.
func (b *builder) onPromptResolved(ev journal.Event, decode func(any) error) error {
	it := b.cur
	var s struct{ Source, Text string }
	if err := decode(&s); err != nil {
		return err
	}
	if it.Step == "" {
		it.Step = ev.Step
	}
	it.PromptSource, it.Prompt = s.Source, s.Text
	return nil
}

// onModelTurn records one model turn.
func (b *builder) onModelTurn(ev journal.Event, decode func(any) error) error {
	r := b.run
	it := b.cur
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
	return nil
}

// onToolCall records one tool call and its output.
func (b *builder) onToolCall(ev journal.Event, decode func(any) error) error {
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
	return nil
}

// onToolDenied records a tool call the boundaries refused.
func (b *builder) onToolDenied(ev journal.Event, decode func(any) error) error {
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
	return nil
}

// onSkillEvidence records one tool call of a skill run.
func (b *builder) onSkillEvidence(ev journal.Event, decode func(any) error) error {
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
	return nil
}

// onSessionMessages records the session's messages: the assistant texts of the iteration.
func (b *builder) onSessionMessages(ev journal.Event, decode func(any) error) error {
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
	return nil
}

// onQueryResult records the query's result: the model's responses.
func (b *builder) onQueryResult(ev journal.Event, decode func(any) error) error {
	it := b.cur
	var s struct {
		Responses []string `json:"responses"`
	}
	if err := decode(&s); err != nil {
		return err
	}
	b.responses = s.Responses
	it.Entries = append(it.Entries, Entry{Time: ev.Time, Title: placeQuery})
	return nil
}

// onStepTransition records a move between steps.
func (b *builder) onStepTransition(ev journal.Event, decode func(any) error) error {
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
	return nil
}

// onCompletionCheck records the completion check of the iteration.
func (b *builder) onCompletionCheck(ev journal.Event, decode func(any) error) error {
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
	return nil
}

// onValidatorResult records one validator's result.
func (b *builder) onValidatorResult(ev journal.Event, decode func(any) error) error {
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
	return nil
}

// onTestCompare records the comparison of the tests with the baseline.
func (b *builder) onTestCompare(ev journal.Event, decode func(any) error) error {
	var c event.TestComparison
	if err := decode(&c); err != nil {
		return err
	}
	b.entry(Entry{Kind: KindValidator, Time: ev.Time, Title: CompareSummary(c), Detail: compareDetail(c), OK: c.Loss == nil})
	return nil
}

// onRetryPrompt records the retry prompt chosen for a failure.
func (b *builder) onRetryPrompt(ev journal.Event, decode func(any) error) error {
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
	return nil
}

// onContextCompacted records a compaction of the context.
func (b *builder) onContextCompacted(ev journal.Event, decode func(any) error) error {
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
	return nil
}

// onIterationEnd records the iteration ending: its usage and verdict.
func (b *builder) onIterationEnd(ev journal.Event, decode func(any) error) error {
	it := b.cur
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
	return nil
}
