package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/loop"
	"github.com/capstan-dev/capstan/runreport"
	"github.com/capstan-dev/capstan/tool/builtin"
	"github.com/capstan-dev/capstan/verify/testrun"
)

// progressPrinter shows run progress on stderr: a live status line on a
// terminal, one plain line per iteration otherwise (CI logs). With
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
	redact  *builtin.StreamRedactor
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

// begin prints the run's first progress line. It names where the model's
// requests go when that is not the provider's own endpoint, and which
// setting said so (url "" = the provider's default: nothing to say).
func (p *progressPrinter) begin(runID, agentName, url, source string) {
	if !p.progress {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	to := ""
	if url != "" {
		to = fmt.Sprintf("; the model's requests go to %s (from %s)", runreport.VisibleControls(llm.RedactedBaseURL(url)), source)
	}
	fmt.Fprintf(p.w, "capstan: running %s (run %s)%s\n", runreport.VisibleControls(agentName), runID, to)
}

// Consume implements event.Consumer: the progress line and --stream
// output follow the run's event stream.
func (p *progressPrinter) Consume(e event.Event) {
	switch e.Type {
	case journal.PromptResolved:
		p.iterationStarted(e.Iteration, e.Step)
	case journal.IterationEnd:
		if it, ok := e.Data.(*loop.IterationEvent); ok {
			p.iterationFinished(it)
		}
	case testrun.EventBaseline:
		if b, ok := e.Data.(*testrun.Baseline); ok {
			p.testBaseline(b)
		}
	case event.TextDelta:
		p.TextDelta(e.Data.(string))
	case event.TextDiscarded:
		p.TextDiscarded(e.Data.(string))
	case event.ToolStart:
		p.ToolStart(e.Data.(llm.ToolCall))
	case event.ToolEnd:
		p.ToolEnd(e.Data.(llm.ToolUse))
	}
}

// WantsModelOutput implements event.ModelOutputConsumer: the model's text
// and tool calls are wanted with --stream.
func (p *progressPrinter) WantsModelOutput() bool { return p.stream }

func (p *progressPrinter) iterationStarted(n int, step string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.iteration, p.step = n, runreport.VisibleControls(step)
	p.endText()
	p.showStatus("waiting for the model…")
}

func (p *progressPrinter) iterationFinished(it *loop.IterationEvent) {
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
func (p *progressPrinter) testBaseline(b *testrun.Baseline) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.progress {
		return
	}
	fmt.Fprintf(p.w, "tests %s\n", runreport.BaselineSummary(*b))
}

func (p *progressPrinter) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endText()
	p.clearStatus()
}

// showStatus puts the live status line of the current iteration on a
// terminal; elsewhere it does nothing.
func (p *progressPrinter) showStatus(what string) {
	if !p.tty || !p.progress || p.iteration == 0 {
		return
	}
	p.status = fmt.Sprintf("[iteration %d] step %s: %s", p.iteration, p.step, runreport.VisibleControls(what))
	fmt.Fprintf(p.w, "\r\033[K%s", p.status)
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
