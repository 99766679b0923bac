package fakellm

import (
	"strings"
	"sync"

	"github.com/capstan-dev/capstan/event"
)

// SinkEvent is one sink call.
type SinkEvent struct {
	// Kind is "text", "discard", "start" or "end".
	Kind string
	// Text is the delta (text) or the reason (discard).
	Text string
	// Call is set for start events, Use for end events.
	Call event.ToolCall
	Use  event.ToolUse
}

// SinkRecorder is an llm.StreamSink that keeps every call in order. It is safe
// for concurrent use.
type SinkRecorder struct {
	mu     sync.Mutex
	events []SinkEvent
}

// TextDelta implements llm.StreamSink.
func (r *SinkRecorder) TextDelta(text string) { r.add(SinkEvent{Kind: "text", Text: text}) }

// TextDiscarded implements llm.StreamSink.
func (r *SinkRecorder) TextDiscarded(reason string) { r.add(SinkEvent{Kind: "discard", Text: reason}) }

// ToolStart implements llm.StreamSink.
func (r *SinkRecorder) ToolStart(call event.ToolCall) { r.add(SinkEvent{Kind: "start", Call: call}) }

// ToolEnd implements llm.StreamSink.
func (r *SinkRecorder) ToolEnd(use event.ToolUse) { r.add(SinkEvent{Kind: "end", Use: use}) }

func (r *SinkRecorder) add(e SinkEvent) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of the calls so far.
func (r *SinkRecorder) Events() []SinkEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]SinkEvent(nil), r.events...)
}

// Texts returns the text deltas in order.
func (r *SinkRecorder) Texts() []string {
	var out []string
	for _, e := range r.Events() {
		if e.Kind == "text" {
			out = append(out, e.Text)
		}
	}
	return out
}

// Outline renders the calls compactly, one per element: "text:<delta>",
// "discard", "start:<tool>" or "end:<tool>" (with "!denied" or "!error"
// appended when the use says so). Consecutive text deltas are joined, so
// the outline does not depend on how a provider fragments its text.
func (r *SinkRecorder) Outline() []string {
	var out []string
	for _, e := range r.Events() {
		switch e.Kind {
		case "text":
			if n := len(out); n > 0 && strings.HasPrefix(out[n-1], "text:") {
				out[n-1] += e.Text
				continue
			}
			out = append(out, "text:"+e.Text)
		case "discard":
			out = append(out, "discard")
		case "start":
			out = append(out, "start:"+e.Call.Name)
		case "end":
			s := "end:" + e.Use.Name
			switch {
			case e.Use.Denied:
				s += "!denied"
			case e.Use.IsError:
				s += "!error"
			}
			out = append(out, s)
		}
	}
	return out
}
