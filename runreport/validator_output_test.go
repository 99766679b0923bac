package runreport

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/journal"
)

// failingOutput is what a test runner printed: 30 lines of noise, then
// the failure, with Windows line ends and the control sequences a
// hostile test can print.
func failingOutput() string {
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "=== RUN   TestNoise%02d\r\n", i)
	}
	b.WriteString("--- FAIL: TestAdd (0.00s)\r\n    calc_test.go:8: Add(2, 3) = -1, want 5\x1b]0;pwned\x07\x1b[2J\r\nFAIL\r\n")
	return b.String()
}

func runWithValidatorOutput(t *testing.T, output string, omitted int) *Run {
	return build(t,
		ev{journal.RunStart, 0, m{"agent": "fixer", "model": "script:s.yaml"}},
		ev{journal.IterationStart, 1, nil},
		ev{journal.ValidatorResult, 1, m{"validator": "tests-pass", "type": "command", "valid": false, "pattern": "test-failed", "exitCode": 1,
			"durationMs": 464, "output": output, "outputOmitted": omitted}},
		ev{journal.IterationEnd, 1, m{"outcome": m{"complete": false, "reason": "tests-pass failed"}}},
	)
}

// TestFailedValidatorOutputInTheAccount: show prints the end of a failed
// validator's output under its line — the last 20 lines, with how many
// more the journal holds and how much of the output it does not — and
// --full prints all the journal holds; Markdown and HTML carry it too.
func TestFailedValidatorOutputInTheAccount(t *testing.T) {
	r := runWithValidatorOutput(t, failingOutput(), 51234)
	if v := r.Iterations[0].Verdict.Validators[0]; v.OutputOmitted != 51234 || !strings.HasPrefix(v.Output, "=== RUN   TestNoise01") {
		t.Fatalf("validator result %+v", v)
	}
	var b bytes.Buffer
	if err := WriteText(&b, r, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := "  +100ms   check ✗ tests-pass (command) failed: pattern test-failed, exit 1 in 464ms\n" +
		"           … 13 earlier lines (--full shows them; the 51234 bytes of output before them are not journaled)\n" +
		"           === RUN   TestNoise14\n"
	if !strings.Contains(out, want) || strings.Contains(out, "TestNoise13") {
		t.Fatalf("text account lacks\n%s\ngot:\n%s", want, out)
	}
	if !strings.Contains(out, "           --- FAIL: TestAdd (0.00s)\n           "+
		`    calc_test.go:8: Add(2, 3) = -1, want 5\u001b]0;pwned\u0007\u001b[2J`+"\n           FAIL\n  verdict") {
		t.Fatalf("the failure is not printed, indented, with its controls made visible:\n%s", out)
	}
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Fatalf("control characters reached the output:\n%q", out)
	}

	b.Reset()
	if err := WriteText(&b, r, Options{Full: true}); err != nil {
		t.Fatal(err)
	}
	if full := b.String(); !strings.Contains(full, "           … (the 51234 bytes of output before this are not journaled)\n           === RUN   TestNoise01\n") {
		t.Fatalf("--full does not print all the journal holds:\n%s", full)
	}

	b.Reset()
	if err := WriteMarkdown(&b, r, Options{}); err != nil {
		t.Fatal(err)
	}
	if md := b.String(); !strings.Contains(md, "<details><summary>output</summary>") || !strings.Contains(md, "--- FAIL: TestAdd") ||
		strings.Contains(md, "TestNoise13") || strings.ContainsAny(md, "\x1b\x07") {
		t.Fatalf("markdown account:\n%s", md)
	}

	b.Reset()
	if err := WriteHTML(&b, r, Options{}); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); !strings.Contains(page, "<details><summary>output</summary><pre>… (the 51234 bytes of output before this are not journaled)\n=== RUN   TestNoise01\n") ||
		!strings.Contains(page, "--- FAIL: TestAdd") {
		t.Fatalf("HTML report lacks the output")
	}
}

// TestValidatorWithoutOutput: a journal written before validators' output
// was kept (and a passing validator) shows the validator's line alone.
func TestValidatorWithoutOutput(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sampleRun(t, "done"), Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "exit 1 in 464ms\n  +") {
		t.Fatalf("a validator line without output is followed by more than the next entry:\n%s", b.String())
	}
}

// TestDurationWithTestBaseline: show prints the run's duration with the
// part its test baseline took, and the baseline's own time.
func TestDurationWithTestBaseline(t *testing.T) {
	r := build(t,
		ev{journal.RunStart, 0, m{"agent": "fixer", "model": "script:s.yaml"}},
		ev{"tests.baseline", 0, m{"validator": "tests-pass", "command": "go test -v ./...", "exitCode": 1, "parsed": true, "durationMs": 19700,
			"run": m{"counted": true, "perTest": true, "passed": 1, "failed": 1}}},
		ev{journal.IterationStart, 1, nil},
		ev{journal.IterationEnd, 1, m{"outcome": m{"complete": true}}},
		ev{journal.RunEnd, 1, m{"success": true, "completionReason": "completed", "iterations": 1, "durationMs": 22100, "testBaselineMs": 19700}},
	)
	var b bytes.Buffer
	if err := WriteText(&b, r, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cost $0.0000  22.1s (test baseline 19.7s)\n", "before the first iteration: 2 ran (1 passed, 1 failed), 0 skipped, exit 1 in 19.7s\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("show lacks %q:\n%s", want, b.String())
		}
	}
}
