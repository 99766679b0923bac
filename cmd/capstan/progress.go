package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/proc"

	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/runreport"
)

// progressPrinter shows run progress on stderr: a live status line on a
// terminal — what the run waits for (the test baseline, a validator, MCP
// servers, the model, a tool) with its elapsed time, redrawn every second
// — and one plain line per iteration otherwise (CI logs), with a line when
// each of those waits starts and ends. With
// streaming on it is also the run's llm.StreamSink (see stream.go): the
// model's text as it arrives and one line per tool call start and end,
// printed around the status line.
type progressPrinter struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	progress bool // iteration lines and the status line
	stream   bool // model text and tool lines

	iteration int
	step      string
	// status is the live status line on screen ("" = none shown); midText
	// is true when streamed text left the cursor mid-line.
	status  string
	midText bool
	redact  *proc.StreamRedactor

	// what is the wait the status line shows when no activity runs (the
	// model, a tool), acts the activities running now, innermost last.
	what   waiting
	acts   []waiting
	query  time.Time // when the model query began (zero = none runs)
	now    func() time.Time
	ticker chan struct{} // closed to stop the redraw ticker; nil = none runs
}

// waiting is one thing the run waits for: what the status line says and
// since when.
type waiting struct {
	text  string
	since time.Time
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	return &progressPrinter{w: w, tty: isTerminal(w), progress: true}
}

// clock is p's time source.
func (p *progressPrinter) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// begin prints the run's first progress line. It names where the model's
// requests go when that is not the provider's own endpoint, and which
// setting said so (url "" = the provider's default: nothing to say), and,
// when unsandboxed is not "", why the run's commands are not sandboxed
// (agent.Agent.Unsandboxed).
func (p *progressPrinter) begin(runID, agentName, url, source, unsandboxed string) {
	if !p.progress {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	to := ""
	if url != "" {
		to = fmt.Sprintf("; the model's requests go to %s (from %s)", runreport.VisibleControls(llm.RedactedBaseURL(url)), source)
	}
	if unsandboxed != "" {
		to += " — " + unsandboxed
	}
	fmt.Fprintf(p.w, "capstan: running %s (run %s)%s\n", runreport.VisibleControls(agentName), runID, to)
}

// Consume implements event.Consumer: the progress line and --stream
// output follow the run's event stream.
func (p *progressPrinter) Consume(e event.Event) {
	switch e.Kind {
	case event.KindPromptResolved:
		p.iterationStarted(e.Iteration, e.Step)
	case event.KindIterationEnd:
		if it, ok := e.Payload.(*event.IterationEvent); ok {
			p.iterationFinished(it)
		}
	case event.KindTestBaseline:
		if b, ok := e.Payload.(*event.TestBaseline); ok {
			p.testBaseline(b)
		}
	case event.KindActivityStart:
		if a, ok := e.Payload.(event.ActivityStartEvent); ok {
			p.activityStarted(a.Activity)
		}
	case event.KindActivityEnd:
		if a, ok := e.Payload.(event.ActivityEndEvent); ok {
			p.activityEnded(a.Activity)
		}
	case event.KindQueryStart:
		p.queryStarted()
	case event.KindQueryResult:
		p.queryEnded()
	case event.KindTextDelta:
		if d, ok := e.Payload.(event.TextDeltaEvent); ok {
			p.TextDelta(d.Text)
		}
	case event.KindTextDiscarded:
		if d, ok := e.Payload.(event.TextDiscardedEvent); ok {
			p.TextDiscarded(d.Reason)
		}
	case event.KindToolStart:
		if d, ok := e.Payload.(event.ToolStartEvent); ok {
			p.ToolStart(d.Call)
		}
	case event.KindToolEnd:
		if d, ok := e.Payload.(event.ToolEndEvent); ok {
			p.ToolEnd(d.Use)
		}
	}
}

// WantsModelOutput implements event.ModelOutputConsumer: the model's text
// and tool calls are wanted with --stream.
func (p *progressPrinter) WantsModelOutput() bool { return p.stream }

// WantsActivity implements event.ActivityConsumer: the test baseline,
// validators and MCP connections are shown unless -q.
func (p *progressPrinter) WantsActivity() bool { return p.progress }

// activityLabel is what the status line and the log lines call a.
func activityLabel(a event.Activity) string {
	switch a.Kind {
	case event.ActivityBaseline:
		return "test baseline"
	case event.ActivityMCP:
		return "MCP servers " + a.Name
	case event.ActivityBuildCache:
		return "build cache: " + a.Name
	}
	if a.Detail != "" {
		return a.Name + ": " + firstLine(a.Detail, 120)
	}
	return a.Name
}

func (p *progressPrinter) activityStarted(a event.Activity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.progress {
		return
	}
	label := activityLabel(a)
	p.acts = append(p.acts, waiting{label, p.clock()})
	if p.tty {
		p.endText()
		p.redraw()
		return
	}
	p.endText()
	switch a.Kind {
	case event.ActivityBaseline:
		fmt.Fprintln(p.w, "test baseline: running the test validators before the first iteration…")
	case event.ActivityMCP:
		fmt.Fprintf(p.w, "%s: connecting…\n", label)
		if a.Detail != "" {
			fmt.Fprintf(p.w, "%s: %s\n", label, a.Detail)
		}
	case event.ActivityBuildCache:
		fmt.Fprintf(p.w, "%s: %s…\n", label, a.Detail)
	default:
		fmt.Fprintf(p.w, "%s%s …\n", p.where(), label)
	}
}

func (p *progressPrinter) activityEnded(a event.Activity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.progress {
		return
	}
	label := activityLabel(a)
	for i := len(p.acts) - 1; i >= 0; i-- {
		if p.acts[i].text == label {
			p.acts = append(p.acts[:i], p.acts[i+1:]...)
			break
		}
	}
	if p.tty {
		p.redraw()
		return
	}
	outcome := "passed"
	switch {
	case a.Kind == event.ActivityBaseline:
		return // the baseline's summary line follows
	case a.Kind == event.ActivityMCP && a.Failed:
		outcome = "failed"
	case a.Kind == event.ActivityMCP:
		outcome = "connected"
	case a.Kind == event.ActivityBuildCache && !a.Failed:
		outcome = "ready"
	case a.Failed:
		outcome = "failed"
	}
	name := a.Name
	if a.Kind == event.ActivityMCP {
		name = label
	}
	fmt.Fprintf(p.w, "%s%s %s in %s\n", p.where(), name, outcome, elapsed(a.Took))
}

// queryStarted marks the wait for the model; off a terminal a line says
// so.
func (p *progressPrinter) queryStarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.query = p.clock()
	if !p.progress || p.tty {
		return
	}
	p.endText()
	fmt.Fprintf(p.w, "%swaiting for the model…\n", p.where())
}

// queryEnded ends the wait for the model.
func (p *progressPrinter) queryEnded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.query.IsZero() {
		return
	}
	took := p.clock().Sub(p.query)
	p.query = time.Time{}
	p.what = waiting{}
	if !p.progress {
		return
	}
	if p.tty {
		p.redraw()
		return
	}
	p.endText()
	fmt.Fprintf(p.w, "%sthe model's work ended in %s\n", p.where(), elapsed(took))
}

// where prefixes a log line of the current iteration.
func (p *progressPrinter) where() string {
	if p.iteration == 0 {
		return ""
	}
	return fmt.Sprintf("[iteration %d] ", p.iteration)
}

// elapsed is d as the status line shows it: "0.4s", "12s", "3m04s".
func elapsed(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
func (p *progressPrinter) iterationStarted(n int, step string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.iteration, p.step = n, runreport.VisibleControls(step)
	p.endText()
	p.showStatus("waiting for the model…")
}

func (p *progressPrinter) iterationFinished(it *event.IterationEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endText()
	if !p.progress {
		return
	}
	o, s := it.Outcome, it.Summary
	check := "continue"
	switch {
	case o.Complete:
		check = "complete"
	case o.Stop:
		check = "stop"
	}
	if o.Reason != "" {
		check += ": " + runreport.VisibleControls(firstLine(o.Reason, 200))
	}
	line := fmt.Sprintf("[iteration %d] step %s  tools %d  tokens %d  $%.4f  %s", s.Iteration, runreport.VisibleControls(s.StepID), len(s.ToolsUsed), it.RunUsage.Total(), it.RunCostUSD, check)
	p.clearStatus()
	fmt.Fprintln(p.w, line)
}

// testBaseline prints what a test validator ran before the first
// iteration.
func (p *progressPrinter) testBaseline(b *event.TestBaseline) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.progress {
		return
	}
	p.clearStatus()
	fmt.Fprintf(p.w, "tests %s\n", runreport.BaselineSummary(*b))
	p.redraw()
}

func (p *progressPrinter) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endText()
	p.clearStatus()
	p.acts, p.what = nil, waiting{}
	if p.ticker != nil {
		close(p.ticker)
		p.ticker = nil
	}
}

// showStatus sets what the current iteration waits for and shows it on
// the status line of a terminal; elsewhere it does nothing.
func (p *progressPrinter) showStatus(what string) {
	p.what = waiting{what, p.clock()}
	p.redraw()
}

// redraw puts the live status line on a terminal: the innermost running
// activity, else what the iteration waits for, with its elapsed time. The
// first draw starts a ticker that redraws it every second until end.
func (p *progressPrinter) redraw() {
	if !p.tty || !p.progress || p.midText {
		return
	}
	cur := p.what
	if n := len(p.acts); n > 0 {
		cur = p.acts[n-1]
		if n > 1 {
			cur.text = p.acts[0].text + ": " + cur.text
		}
	}
	if cur.text == "" || (p.iteration == 0 && len(p.acts) == 0) {
		p.clearStatus()
		return
	}
	prefix := ""
	if p.iteration > 0 {
		prefix = fmt.Sprintf("[iteration %d] step %s: ", p.iteration, p.step)
	}
	// The text is cut, never the elapsed time.
	p.status = prefix + firstLine(runreport.VisibleControls(cur.text), max(20, statusWidth-len(prefix)-8)) + " " + elapsed(p.clock().Sub(cur.since))
	fmt.Fprintf(p.w, "\r\033[K%s", p.status)
	if p.ticker == nil {
		p.ticker = make(chan struct{})
		go p.tick(p.ticker)
	}
}

// statusWidth bounds the status line so that it stays on one line of a
// usual terminal (a wrapped line cannot be redrawn in place).
const statusWidth = 100

// tick redraws the status line every second until done is closed.
func (p *progressPrinter) tick(done chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			p.mu.Lock()
			if p.ticker == done && p.status != "" {
				p.redraw()
			}
			p.mu.Unlock()
		}
	}
}

// clearStatus removes the status line so that a full line can take its
// place.
func (p *progressPrinter) clearStatus() {
	if p.status != "" {
		fmt.Fprint(p.w, "\r\033[K")
		p.status = ""
	}
}

// endText ends streamed text: what the redactor held back is printed, and
// the line is finished so that the next line starts at column 0.
func (p *progressPrinter) endText() {
	if p.redact != nil {
		if rest := p.redact.Flush(); rest != "" {
			p.writeText(rest)
		}
	}
	if p.midText {
		fmt.Fprintln(p.w)
		p.midText = false
	}
}

// writeText prints streamed text in place of the status line, its
// terminal controls made visible (runreport.VisibleControls, as show
// prints them): the model's text must not clear the screen, set the
// window title or write the clipboard.
func (p *progressPrinter) writeText(s string) {
	s = runreport.VisibleControls(s)
	if s == "" {
		return
	}
	p.clearStatus()
	fmt.Fprint(p.w, s)
	p.midText = !strings.HasSuffix(s, "\n")
}

// firstLine is the first line of s, cut to at most n bytes (and "…")
// without splitting a UTF-8 character.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}
