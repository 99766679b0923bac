package main

import (
	"bytes"
	"testing"

	"github.com/capstan-dev/capstan/event"
)

func TestProgressPrintsTestBaselines(t *testing.T) {
	var buf bytes.Buffer
	p := newProgressPrinter(&buf)
	for _, b := range []*event.TestBaseline{
		{Validator: "tests-pass", Command: "go test -v ./...", ExitCode: 1, Parsed: true, Run: event.TestRun{Counted: true, Passed: 1, Failed: 2, Skipped: 1}},
		{Validator: "go-plain", Command: "go test ./...", Parsed: true},
		{Validator: "make-test", Command: "make test", ExitCode: 2},
	} {
		p.Consume(event.Event{Kind: event.KindTestBaseline, Payload: b})
	}
	want := "tests tests-pass (go test -v ./...) before the first iteration: 3 ran (1 passed, 2 failed), 1 skipped, exit 1\n" +
		"tests go-plain (go test ./...) before the first iteration: tests ran, not counted (no per-test output), exit 0\n" +
		"tests make-test (make test) before the first iteration: no test run capstan reads in its output, exit 2; lost tests not checked\n"
	if buf.String() != want {
		t.Fatalf("%q", buf.String())
	}
	// --quiet prints nothing.
	buf.Reset()
	p.progress = false
	p.Consume(event.Event{Kind: event.KindTestBaseline, Payload: &event.TestBaseline{Validator: "x"}})
	if buf.Len() != 0 {
		t.Fatalf("%q", buf.String())
	}
}
