package runreport

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Options select what a renderer shows.
type Options struct {
	// Iteration shows only that iteration (0 = all).
	Iteration int
	// Full shows tool outputs and prompts whole instead of their first
	// lines.
	Full bool
}

// Select returns the iterations opts asks for, or an error naming the
// iterations that exist.
func (r *Run) Select(opts Options) ([]Iteration, error) {
	if opts.Iteration == 0 {
		return r.Iterations, nil
	}
	for _, it := range r.Iterations {
		if it.N == opts.Iteration {
			return []Iteration{it}, nil
		}
	}
	if len(r.Iterations) == 0 {
		return nil, fmt.Errorf("run %s has no iterations", r.ID)
	}
	return nil, fmt.Errorf("run %s has no iteration %d (it has %d to %d)", r.ID, opts.Iteration, r.Iterations[0].N, r.Iterations[len(r.Iterations)-1].N)
}

// Status is COMPLETED, NOT COMPLETED or UNFINISHED.
// A run recorded inside its work dir (Unverified) adds " (UNVERIFIED)".
func (r *Run) Status() string {
	if r.Unverified {
		return r.outcomeStatus() + " (UNVERIFIED)"
	}
	return r.outcomeStatus()
}

// outcomeStatus is Status without the unverified mark.
func (r *Run) outcomeStatus() string {
	switch {
	case r.Outcome == nil:
		return "UNFINISHED"
	case r.Outcome.Success:
		return "COMPLETED"
	}
	return "NOT COMPLETED"
}

// retryBefore returns the retry prompt the iteration before it ended with,
// when it is the prompt it starts with (so it is printed once).
func (r *Run) retryBefore(it Iteration) *Retry {
	for i := range r.Iterations {
		if r.Iterations[i].N == it.N-1 {
			if v := r.Iterations[i].Verdict; v != nil && v.Retry != nil && v.Retry.Text == it.Prompt {
				return v.Retry
			}
		}
	}
	return nil
}

const (
	textLines   = 6 // lines of a tool output or prompt shown without Full
	detailLimit = 2000
	outputLines = 20 // lines of a failed validator's output shown without Full
)

// WriteText writes the account as plain text, the format of `capstan show`.
func WriteText(w io.Writer, r *Run, opts Options) error {
	its, err := r.Select(opts)
	if err != nil {
		return err
	}
	p := &printer{w: w}
	p.textHeader(r)
	for _, it := range its {
		p.textIteration(r, it, opts)
	}
	if pl := r.Pipeline; pl != nil {
		writeStagesText(p, pl)
	}
	p.textFooter(r)
	return p.err
}

// textHeader prints what ran, where and with what.
func (p *printer) textHeader(r *Run) {
	if r.Unverified {
		p.f("%s\n", Unverified)
	}
	p.f("run %s  %s\n", r.ID, r.Status())
	switch {
	case r.Pipeline != nil:
		p.f("pipeline %s  model %s\n", r.Pipeline.Name(), r.modelName())
		p.f("request %q\n", r.Pipeline.Request)
		if r.Pipeline.Repo != "" {
			p.f("repo %s\n", r.Pipeline.Repo)
		}
	case r.Skill != "":
		p.f("skill %s  goal %q  model %s\n", r.Skill, r.Goal, r.Model)
	default:
		p.f("agent %s  model %s\n", r.Agent, r.Model)
	}
	if r.PipelineRun != "" {
		p.f("stage of pipeline run %s  (capstan show %s)\n", r.PipelineRun, r.PipelineRun)
	}
	if r.Sandbox != "" {
		p.f("sandbox %s\n", r.Sandbox)
	}
	if r.AgentDir != "" {
		p.f("from %s\n", r.AgentDir)
	}
	if r.WorkDir != "" {
		p.f("work dir %s\n", r.WorkDir)
	}
	if !r.Started.IsZero() {
		p.f("started %s\n", r.Started.UTC().Format("2006-01-02 15:04:05 MST"))
	}
	if r.Params != nil {
		p.f("params %s\n", paramsText(r.Params))
	}
}

// textIteration prints one iteration: its prompt, entries and verdict.
func (p *printer) textIteration(r *Run, it Iteration, opts Options) {
	p.f("\n── %s\n", iterationHeading(r, it))
	if it.Prompt != "" || it.PromptSource != "" {
		if rt := r.retryBefore(it); rt != nil {
			p.f("  prompt   %s (the retry prompt of iteration %d)\n", it.PromptSource, it.N-1)
		} else {
			p.f("  prompt   %s\n", it.PromptSource)
			p.block(clip(it.Prompt, opts.Full), "           ")
		}
	}
	for _, e := range it.Entries {
		at := ""
		if !e.Time.IsZero() && !it.Started.IsZero() {
			at = "+" + FormatDuration(e.Time.Sub(it.Started))
		}
		if e.Kind == KindText {
			first, rest, _ := strings.Cut(strings.TrimRight(e.Detail, "\n"), "\n")
			p.f("  %-8s model: %s\n", at, first)
			p.block(rest, "           ")
			continue
		}
		p.f("  %-8s %s %s%s\n", at, mark(e), e.Title, durationSuffix(e.Duration))
		if e.Detail != "" {
			detail := e.Detail
			switch e.Kind {
			case KindValidator:
				detail = tail(detail, e.Omitted, opts.Full)
			case KindRetry:
			default:
				detail = clip(detail, opts.Full)
			}
			p.block(detail, "           ")
		}
	}
	if v := it.Verdict; v != nil && v.Result != "" {
		p.f("  verdict  %s", v.Result)
		if v.Reason != "" {
			p.f(" — %s", v.Reason)
		}
		p.f("\n")
	}
	if !it.Finished {
		p.f("  (cut short: the run stopped during this iteration)\n")
	}
}

// textFooter prints the test baselines, warnings, artifacts and outcome.
func (p *printer) textFooter(r *Run) {
	p.f("\n")
	for _, b := range r.TestBaselines {
		p.f("tests %s\n", BaselineSummary(b))
		for _, t := range b.Run.Tests {
			p.f("   %-7s  %s\n", t.Outcome, t.Name)
		}
	}
	for _, h := range r.HiddenBaselines {
		p.f("%s\n", HiddenSummary(h))
		for _, t := range h.Tests {
			p.f("   %-7s  %s\n", t.Outcome, t.Name)
		}
	}
	for _, warn := range r.Warnings {
		p.f("warning: %s\n", warn)
	}
	for _, a := range r.Artifacts {
		p.f("artifact %s  %s  %d bytes\n", a.Handle, a.Path, a.Bytes)
	}
	if o := r.Outcome; o != nil {
		p.f("%s  %s", r.Status(), o.CompletionReason)
		if o.Reason != "" {
			p.f(" — %s", o.Reason)
		}
		if r.Pipeline != nil {
			p.f("\n  stages %d  %s\n", len(r.Pipeline.Stages), FormatDuration(o.Duration))
			if o.ErrorMessage != "" {
				p.f("  error %s\n", o.ErrorMessage)
			}
			return
		}
		p.f("\n  iterations %d  %s  cost $%.4f  %s\n", o.Iterations, usageText(o.Usage), o.CostUSD, DurationText(o.Duration, o.TestBaseline))
		if note := o.UsageNote(); note != "" {
			p.f("  %s\n", note)
		}
		if o.ErrorCode != "" || o.ErrorMessage != "" {
			p.f("  error %s: %s (recoverable: %v)\n", o.ErrorCode, o.ErrorMessage, o.Recoverable)
		}
	} else if r.Pipeline != nil {
		p.f("UNFINISHED: the journal has no end (the pipeline was killed or is still running); %d stages ended\n", len(r.Pipeline.Stages))
	} else {
		p.f("UNFINISHED: the journal has no end (the run was killed or is still running); %d iterations finished\n", finished(r))
	}
}

// modelName is the run's model, "none" when it has none (a pipeline run
// without --model).
func (r *Run) modelName() string {
	if r.Model == "" {
		return "none"
	}
	return r.Model
}

// writeStagesText lists a pipeline's stages in the order they ended, with
// the run of each agent stage.
func writeStagesText(p *printer, pl *Pipeline) {
	p.f("\n── stages\n")
	if len(pl.Stages) == 0 {
		p.f("  (none ended)\n")
	}
	for _, st := range pl.Stages {
		m := "✓"
		if !st.OK() {
			m = "✗"
		}
		p.f("  %s %s  %s\n", m, st.ID, st.Summary())
		if st.Error != "" {
			p.f("      error: %s\n", st.Error)
		}
		for _, v := range st.Violations {
			p.f("      violation: %s\n", v)
		}
	}
	for _, a := range pl.AgentRuns {
		p.f("  agent %s: run %s %s\n", a.Dir, a.RunID, a.outcome())
	}
}

// outcome is "completed" or "not completed", with the completion reason.
func (a AgentRun) outcome() string {
	s := "not completed"
	if a.Success {
		s = "completed"
	}
	if a.Reason != "" {
		s += " (" + a.Reason + ")"
	}
	return s
}

func finished(r *Run) int {
	n := 0
	for _, it := range r.Iterations {
		if it.Finished {
			n++
		}
	}
	return n
}

func iterationHeading(r *Run, it Iteration) string {
	label := "iteration"
	if r.Skill != "" {
		label = "turn"
	}
	parts := []string{fmt.Sprintf("%s %d", label, it.N)}
	if it.Step != "" {
		parts = append(parts, "step "+it.Step)
	}
	if d := it.Duration(); d > 0 {
		parts = append(parts, FormatDuration(d))
	}
	if len(it.Usage) > 0 {
		parts = append(parts, usageText(it.Usage))
	}
	if it.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", it.CostUSD))
	}
	return strings.Join(parts, " · ")
}

// usageText renders every usage field: "tokens in 4246 out 75 cache_read 10".
func usageText(u map[string]int64) string {
	short := map[string]string{"input_tokens": "in", "output_tokens": "out"}
	parts := []string{"tokens"}
	for _, k := range UsageKeys(u) {
		name := short[k]
		if name == "" {
			name = strings.TrimSuffix(k, "_tokens")
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, u[k]))
	}
	if len(parts) == 1 {
		return "tokens 0"
	}
	return strings.Join(parts, " ")
}

func mark(e Entry) string {
	switch e.Kind {
	case KindTool:
		if e.OK {
			return "tool ✓"
		}
		return "tool ✗"
	case KindDenied:
		return "tool DENIED"
	case KindValidator:
		if e.OK {
			return "check ✓"
		}
		return "check ✗"
	case KindCheck:
		return "completion:"
	case KindRetry:
		return "↩"
	case KindTransition:
		return "→"
	case KindError:
		return "error"
	case KindCompaction:
		return "context:"
	}
	return e.Kind + ":"
}

func durationSuffix(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return "  (" + FormatDuration(d) + ")"
}

// clip keeps the first lines of s (and at most detailLimit bytes) unless
// full is set.
func clip(s string, full bool) string {
	s = strings.TrimRight(s, "\n")
	if full {
		return s
	}
	lines := strings.Split(s, "\n")
	cut := false
	if len(lines) > textLines {
		lines, cut = lines[:textLines], true
	}
	out := strings.Join(lines, "\n")
	if len(out) > detailLimit {
		out, cut = out[:detailLimit], true
	}
	if cut {
		out += fmt.Sprintf("\n… (%d bytes in all; --full shows everything)", len(s))
	}
	return out
}

// tail keeps the last outputLines lines of a failed validator's output
// unless full is set (the end is where a test runner says what failed),
// and begins with a line saying what is left out: earlier lines the
// journal holds, and the omitted bytes before them that it does not.
func tail(s string, omitted int, full bool) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	hidden := 0
	if !full && len(lines) > outputLines {
		hidden = len(lines) - outputLines
		lines = lines[hidden:]
	}
	out := strings.Join(lines, "\n")
	switch {
	case hidden > 0 && omitted > 0:
		return fmt.Sprintf("… %d earlier lines (--full shows them; the %d bytes of output before them are not journaled)\n%s", hidden, omitted, out)
	case hidden > 0:
		return fmt.Sprintf("… %d earlier lines (--full shows them)\n%s", hidden, out)
	case omitted > 0:
		return fmt.Sprintf("… (the %d bytes of output before this are not journaled)\n%s", omitted, out)
	}
	return out
}

// DurationText is a run's wall time, with the part its test baselines
// took when there is one: "21.3s (test baseline 19.7s)". capstan run's
// summary and show print it alike.
func DurationText(total, baseline time.Duration) string {
	if baseline <= 0 {
		return FormatDuration(total)
	}
	return FormatDuration(total) + " (test baseline " + FormatDuration(baseline) + ")"
}

type printer struct {
	w   io.Writer
	err error
}

// f writes like fmt.Fprintf with terminal control characters made
// visible: what the model or a tool printed cannot move the cursor, clear
// the screen or retitle the terminal of whoever reads the account.
func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = io.WriteString(p.w, VisibleControls(fmt.Sprintf(format, args...)))
	}
}

// VisibleControls replaces C0 and C1 control characters other than
// newline and tab with their \u escapes.
func VisibleControls(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isControl(r rune) bool {
	return r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f))
}

func (p *printer) block(s, prefix string) {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return
	}
	p.f("%s%s\n", prefix, strings.ReplaceAll(s, "\n", "\n"+prefix))
}

// paramsText renders the run's parameters as they were given on the
// command line, sorted by name: name=value, a value with spaces or quotes
// quoted, a non-string value as JSON.
func paramsText(params any) string {
	m, ok := params.(map[string]any)
	if !ok {
		b, _ := json.Marshal(params)
		return string(b)
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		v, isString := m[k].(string)
		if !isString {
			b, _ := json.Marshal(m[k])
			v = string(b)
		} else if v == "" || strings.ContainsAny(v, " \t\n\"'") {
			b, _ := json.Marshal(v)
			v = string(b)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}
