package main

import (
	"bytes"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/verify/testrun"
)

func TestProgressPrintsTestBaselines(t *testing.T) {
	var buf bytes.Buffer
	p := newProgressPrinter(&buf)
	for _, b := range []*testrun.Baseline{
		{Validator: "tests-pass", Parsed: true, Run: testrun.Run{Counted: true, Passed: 1, Failed: 2, Skipped: 1}},
		{Validator: "go-plain", Parsed: true},
		{Validator: "make-test"},
	} {
		p.Consume(event.Event{Type: testrun.EventBaseline, Data: b})
	}
	want := "[before iteration 1] tests-pass: 3 tests ran (1 passed, 2 failed), 1 skipped\n" +
		"[before iteration 1] go-plain: tests ran, not counted (no per-test output)\n" +
		"[before iteration 1] make-test: no test run capstan reads in its output; lost tests not checked\n"
	if buf.String() != want {
		t.Fatalf("%q", buf.String())
	}
	// --quiet prints nothing.
	buf.Reset()
	p.progress = false
	p.Consume(event.Event{Type: testrun.EventBaseline, Data: &testrun.Baseline{Validator: "x"}})
	if buf.Len() != 0 {
		t.Fatalf("%q", buf.String())
	}
}
