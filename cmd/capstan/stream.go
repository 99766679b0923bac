package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/lazyre"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/runreport"
)

// Limits of the one-line tool summaries.
const (
	maxToolInput  = 80 // runes of a tool call's input shown on its → line
	maxToolStatus = 60 // runes of an error shown on a ← line
)

// streamFlag is the --stream flag of run, resume and skills run.
type streamFlag struct {
	on bool
	fs *pflag.FlagSet // the set it was registered in, to tell a given flag from the default
}

// register adds --stream to fs; cond adds to the default's condition
// (" and not --quiet").
func (f *streamFlag) register(fs *pflag.FlagSet, cond string) {
	f.fs = fs
	fs.BoolVar(&f.on, "stream", false, "show the model's text and tool calls live on stderr (default: on when stderr is a terminal"+cond+"; --stream=false turns it off)")
}

// enabled decides --stream: an explicit --stream or --stream=false wins;
// otherwise it is on when stderr is a terminal and progress output is not
// quiet.
func (f streamFlag) enabled(stderr io.Writer, quiet bool) bool {
	if f.fs != nil && f.fs.Changed("stream") {
		return f.on
	}
	return !quiet && isTerminal(stderr)
}

// streamTo makes p the stream sink of the queries made with the returned
// context (the providers and the tool loops read it there); stdout stays
// reserved for --json. The values of the process's secret-looking
// variables are redacted (see enableStream).
func (p *progressPrinter) streamTo(ctx context.Context) context.Context {
	p.enableStream(processEnviron())
	return llm.WithStreamSink(ctx, p)
}

// enableStream makes p the run's stream sink: text is printed as it
// arrives, and every value of a secret-looking variable of environ (API
// keys, tokens; see proc.IsSecretName) is replaced by [REDACTED] in
// everything printed.
func (p *progressPrinter) enableStream(environ []string) {
	p.stream = true
	p.redact = proc.NewStreamRedactor(environ)
}

// TextDelta implements llm.StreamSink.
func (p *progressPrinter) TextDelta(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeText(p.redact.Push(text))
}

// TextDiscarded implements llm.StreamSink: the break is marked on its own
// line; a retried answer, if the provider retries, starts on the next one.
// The notice does not promise a retry: the failure may also end the query.
func (p *progressPrinter) TextDiscarded(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redact.Drop()
	p.endText()
	p.clearStatus()
	fmt.Fprintf(p.w, "  ⟲ stream interrupted (%s); the text above is discarded\n",
		shorten(runreport.VisibleControls(p.redact.Text(reason)), maxToolStatus))
}

// ToolStart implements llm.StreamSink: "  → Bash  go test ./...".
func (p *progressPrinter) ToolStart(call event.ToolCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endText()
	p.clearStatus()
	line := "  → " + runreport.VisibleControls(call.Name)
	if in := shorten(runreport.VisibleControls(p.redact.Text(toolInputSummary(call.Input))), maxToolInput); in != "" {
		line += "  " + in
	}
	fmt.Fprintln(p.w, line)
	p.showStatus("running " + call.Name + "…")
}

// ToolEnd implements llm.StreamSink: "  ← Bash  exit 1 (0.8s)", or
// "  ✗ Write  denied: …" for a call the policy refused. Tool output is never
// printed, only a short status.
func (p *progressPrinter) ToolEnd(use event.ToolUse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endText()
	p.clearStatus()
	status := shorten(runreport.VisibleControls(p.redact.Text(toolStatus(use))), maxToolStatus)
	name := runreport.VisibleControls(use.Name)
	if use.Denied {
		// A denied call never ran: no duration.
		fmt.Fprintf(p.w, "  ✗ %s  %s\n", name, status)
	} else {
		fmt.Fprintf(p.w, "  ← %s  %s (%.1fs)\n", name, status, float64(use.DurationMs)/1000)
	}
	p.showStatus("waiting for the model…")
}

// toolInputSummary renders a call's input on one line: the most telling
// field of the built-in tools (the command, the path, the pattern) when
// there is one, else the compact JSON.
func toolInputSummary(in json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(in, &m) == nil {
		for _, k := range []string{"command", "file_path", "path", "template", "pattern", "url", "query", "skill", "description"} {
			if s, ok := m[k].(string); ok && s != "" {
				return s
			}
		}
		if len(m) == 0 {
			return ""
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, in) != nil {
		return string(in)
	}
	return b.String()
}

var bashMarker = lazyre.New(`\[(exit status \d+|command timed out[^\]]*|command killed by signal: [^\]]+)\]\s*$`)

// toolStatus is the short outcome of a tool call: "ok", "exit 1",
// "denied: …", or the first line of an error.
func toolStatus(use event.ToolUse) string {
	msg := ""
	if use.IsError {
		msg = errorMessage(use.Output)
	}
	switch {
	case use.Denied && msg != "":
		return "denied: " + msg
	case use.Denied:
		return "denied: " + strings.TrimPrefix(use.Output, "permission denied: ")
	case !use.IsError:
		lines := strings.Count(strings.TrimRight(use.Output, "\n"), "\n") + 1
		if strings.TrimSpace(use.Output) == "" {
			return "ok"
		}
		n := fmt.Sprintf("%d lines", lines)
		if lines == 1 {
			n = "1 line"
		}
		if use.Name == "Bash" {
			return "exit 0, " + n
		}
		return "ok, " + n
	}
	if m := bashMarker().FindStringSubmatch(use.Output); m != nil {
		s := strings.Replace(m[1], "exit status ", "exit ", 1)
		if i := strings.Index(s, ";"); i >= 0 {
			s = s[:i]
		}
		return strings.TrimPrefix(s, "command ")
	}
	if use.Name == "Bash" {
		return "error"
	}
	if msg != "" {
		return "error: " + msg
	}
	return "error: " + use.Output
}

// errorMessage is the message of a structured failure, the answer a skill
// tool gives the model ({"ok": false, "error": {"code": …, "message": …}}),
// or "" when out is not one.
func errorMessage(out string) string {
	var v struct {
		OK    *bool `json:"ok"`
		Error struct{ Code, Message string }
	}
	if json.Unmarshal([]byte(out), &v) != nil || v.OK == nil || *v.OK || v.Error.Code == "" {
		return ""
	}
	if v.Error.Message == "" {
		return v.Error.Code
	}
	return v.Error.Message
}

// shorten puts s on one line (whitespace runs become one space) and caps
// it at n runes.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// processEnviron is the environment whose secrets the stream redacts.
func processEnviron() []string { return os.Environ() }
