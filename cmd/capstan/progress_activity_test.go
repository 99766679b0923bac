package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/event"
)

// Off a terminal, the baseline, each validator, MCP servers and the model
// wait get a line when they start and when they end.
func TestProgressLinesForActivities(t *testing.T) {
	var buf bytes.Buffer
	p := &progressPrinter{w: &buf, progress: true}
	v := event.Activity{Kind: event.ActivityValidator, Name: "tests-pass", Detail: "go test -v ./..."}
	p.Consume(event.Event{Kind: event.KindActivityStart, Payload: event.ActivityStartEvent{Activity: event.Activity{Kind: event.ActivityMCP, Name: "github"}}})
	p.Consume(event.Event{Kind: event.KindActivityEnd, Payload: event.ActivityEndEvent{Activity: event.Activity{Kind: event.ActivityMCP, Name: "github", Took: 1500 * time.Millisecond}}})
	p.Consume(event.Event{Kind: event.KindActivityStart, Payload: event.ActivityStartEvent{Activity: event.Activity{Kind: event.ActivityBaseline}}})
	p.Consume(event.Event{Kind: event.KindActivityStart, Payload: event.ActivityStartEvent{Activity: v}})
	v.Took, v.Failed = 12*time.Second, true
	p.Consume(event.Event{Kind: event.KindActivityEnd, Payload: event.ActivityEndEvent{Activity: v}})
	p.Consume(event.Event{Kind: event.KindActivityEnd, Payload: event.ActivityEndEvent{Activity: event.Activity{Kind: event.ActivityBaseline, Took: 12 * time.Second}}})
	p.Consume(event.Event{Kind: event.KindPromptResolved, Iteration: 1, Step: "s"})
	p.Consume(event.Event{Kind: event.KindQueryStart})
	p.Consume(event.Event{Kind: event.KindQueryResult})
	v.Failed = false
	p.Consume(event.Event{Kind: event.KindActivityStart, Payload: event.ActivityStartEvent{Activity: v}})
	v.Took = 125 * time.Second
	p.Consume(event.Event{Kind: event.KindActivityEnd, Payload: event.ActivityEndEvent{Activity: v}})
	got := buf.String()
	for _, want := range []string{
		"MCP servers github: connecting…\n",
		"MCP servers github connected in 1.5s\n",
		"test baseline: running the test validators before the first iteration…\n",
		"tests-pass: go test -v ./... …\n",
		"tests-pass failed in 12s\n",
		"[iteration 1] waiting for the model…\n",
		"[iteration 1] the model's work ended in ",
		"[iteration 1] tests-pass: go test -v ./... …\n",
		"[iteration 1] tests-pass passed in 2m05s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\r") || strings.Contains(got, "\x1b") {
		t.Errorf("terminal controls off a terminal:\n%q", got)
	}
}

// On a terminal the status line names the innermost activity inside the
// baseline, with the time since it started, and goes back to the model
// wait's text only when a new wait begins.
func TestStatusLineShowsElapsedTime(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	p := &progressPrinter{w: &buf, tty: true, progress: true, now: func() time.Time { return now }}
	defer p.end()
	p.Consume(event.Event{Kind: event.KindActivityStart, Payload: event.ActivityStartEvent{Activity: event.Activity{Kind: event.ActivityBaseline}}})
	p.Consume(event.Event{Kind: event.KindActivityStart, Payload: event.ActivityStartEvent{Activity: event.Activity{Kind: event.ActivityValidator, Name: "tests-pass", Detail: "go test -v ./..."}}})
	now = now.Add(12 * time.Second)
	p.mu.Lock()
	p.redraw()
	p.mu.Unlock()
	if want := "\r\x1b[Ktest baseline: tests-pass: go test -v ./... 12s"; !strings.HasSuffix(buf.String(), want) {
		t.Errorf("status %q, want it to end with %q", buf.String(), want)
	}
	p.Consume(event.Event{Kind: event.KindActivityEnd, Payload: event.ActivityEndEvent{Activity: event.Activity{Kind: event.ActivityValidator, Name: "tests-pass", Detail: "go test -v ./..."}}})
	p.Consume(event.Event{Kind: event.KindActivityEnd, Payload: event.ActivityEndEvent{Activity: event.Activity{Kind: event.ActivityBaseline}}})
	p.Consume(event.Event{Kind: event.KindPromptResolved, Iteration: 1, Step: "fix"})
	now = now.Add(3 * time.Minute)
	p.mu.Lock()
	p.redraw()
	p.mu.Unlock()
	if want := "\r\x1b[K[iteration 1] step fix: waiting for the model… 3m00s"; !strings.HasSuffix(buf.String(), want) {
		t.Errorf("status %q, want it to end with %q", buf.String(), want)
	}
}
