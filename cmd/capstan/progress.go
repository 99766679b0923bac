package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/capstan-dev/capstan/iteration"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/loop"
)

// progressPrinter shows run progress on stderr: a live status line on a
// terminal, one plain line per iteration otherwise (CI logs).
type progressPrinter struct {
	w    io.Writer
	tty  bool
	step string
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressPrinter{w: w, tty: tty}
}

func (p *progressPrinter) begin(runID, agentName string) {
	fmt.Fprintf(p.w, "capstan: running %s (run %s)\n", agentName, runID)
}

// IterationStarted implements loop.Observer.
func (p *progressPrinter) IterationStarted(n int, step string) {
	p.step = step
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K[iteration %d] step %s: waiting for the model…", n, step)
	}
}

// IterationFinished implements loop.Observer.
func (p *progressPrinter) IterationFinished(s *iteration.Summary, o loop.Outcome, total llm.Usage, cost float64) {
	check := "continue"
	switch {
	case o.Complete:
		check = "complete"
	case o.Stop:
		check = "stop"
	}
	if o.Reason != "" {
		check += ": " + firstLine(o.Reason, 80)
	}
	line := fmt.Sprintf("[iteration %d] step %s  tools %d  tokens %d  $%.4f  %s", s.Iteration, s.StepID, len(s.ToolsUsed), total.Total(), cost, check)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progressPrinter) end() {}

func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
