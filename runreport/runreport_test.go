package runreport

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/verify"
)

// events builds a journal: each item is (type, iteration, data).
type ev struct {
	typ  string
	it   int
	data any
}

func build(t *testing.T, evs ...ev) *Run {
	t.Helper()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var out []journal.Event
	for i, e := range evs {
		raw, err := json.Marshal(e.data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, journal.Event{Seq: int64(i + 1), Time: t0.Add(time.Duration(i) * 100 * time.Millisecond), Type: e.typ, Iteration: e.it, Data: raw})
	}
	r, err := Build("run-1", out)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type m = map[string]any

// A two-iteration run: the model talks, calls a tool, talks again; the
// validator fails, a retry prompt follows; the next iteration completes.
func sampleRun(t *testing.T, text string) *Run {
	return build(t,
		ev{journal.RunStart, 0, m{"agent": "fixer", "model": "script:s.yaml", "workDir": "/w"}},
		ev{journal.IterationStart, 1, nil},
		ev{journal.PromptResolved, 1, m{"source": "prompts/steps/initial/fix/f_default.md", "text": "Fix the bug."}},
		ev{journal.QueryStart, 1, m{}},
		ev{journal.ModelTurn, 1, m{"turn": 1, "usage": m{"input_tokens": 10, "output_tokens": 2}}},
		ev{journal.ToolCall, 1, m{"name": "Read", "input": m{"file_path": "a.go"}, "output": "package a", "duration_ms": 12}},
		ev{journal.ModelTurn, 1, m{"turn": 2}},
		ev{journal.SessionMessages, 1, m{"messages": []m{{"role": "user", "text": "Fix the bug."}, {"role": "assistant", "text": "Reading a.go first."}, {"role": "tool"}, {"role": "assistant", "text": text}}}},
		ev{journal.QueryResult, 1, m{"responses": []string{"Reading a.go first.", text}}},
		ev{journal.CompletionCheck, 1, m{"complete": true, "declared": true, "reason": "declared"}},
		ev{journal.ValidatorResult, 1, m{"validator": "tests-pass", "type": "command", "valid": false, "pattern": "test-failed", "exitCode": 1, "durationMs": 464}},
		ev{journal.RetryPrompt, 1, m{"pattern": "test-failed", "validator": "tests-pass", "attempt": 1, "maxAttempts": 3, "text": "The tests still fail: TestAdd.", "params": m{"failedTests": []string{"TestAdd"}}}},
		ev{journal.IterationEnd, 1, m{"summary": m{"usage": m{"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 5}, "costUsd": 0.25}, "outcome": m{"complete": false, "reason": "tests-pass failed: pattern test-failed"}}},
		ev{journal.IterationStart, 2, nil},
		ev{journal.PromptResolved, 2, m{"source": "retry:test-failed", "text": "The tests still fail: TestAdd."}},
		ev{journal.ModelTurn, 2, m{"turn": 1}},
		ev{journal.SessionMessages, 2, m{"messages": []m{{"role": "assistant", "text": "Fixed."}}}},
		ev{journal.ValidatorResult, 2, m{"validator": "tests-pass", "type": "command", "valid": true, "exitCode": 0}},
		ev{journal.IterationEnd, 2, m{"summary": m{"usage": m{"input_tokens": 20, "output_tokens": 4}, "costUsd": 0.5}, "outcome": m{"complete": true, "reason": "verified by tests-pass"}}},
		ev{journal.RunEnd, 2, m{"success": true, "completionReason": "completed", "reason": "verified by tests-pass", "iterations": 2, "usage": m{"input_tokens": 30, "output_tokens": 6}, "cost": 0.75, "durationMs": 1900}},
	)
}

func TestTextIsChronological(t *testing.T) {
	r := sampleRun(t, "The bug is in Add.")
	var b bytes.Buffer
	if err := WriteText(&b, r, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	order := []string{"prompt   prompts/steps/initial/fix/f_default.md", "model: Reading a.go first.", `tool ✓ Read {"file_path":"a.go"}  (12ms)`,
		"model: The bug is in Add.", "completion: completion declared", "check ✗ tests-pass (command) failed: pattern test-failed, exit 1 in 464ms",
		"↩ retry prompt 1/3 for pattern test-failed (tests-pass)", `extracted {"failedTests":["TestAdd"]}`, "The tests still fail: TestAdd.", "verdict  continue — tests-pass failed",
		"── iteration 2", "prompt   retry:test-failed (the retry prompt of iteration 1)", "model: Fixed.", "check ✓ tests-pass", "verdict  complete",
		"COMPLETED  completed — verified by tests-pass", "iterations 2  tokens in 30 out 6  cost $0.7500  1.9s"}
	at := 0
	for _, want := range order {
		i := strings.Index(out[at:], want)
		if i < 0 {
			t.Fatalf("missing or out of order %q after offset %d:\n%s", want, at, out)
		}
		at += i + len(want)
	}
	// The retry prompt is printed once, and every usage field is shown.
	if strings.Count(out, "The tests still fail: TestAdd.") != 1 || !strings.Contains(out, "tokens in 10 out 2 cache_read 5 · $0.2500") {
		t.Fatalf("retry prompt twice or usage missing:\n%s", out)
	}
	if strings.Contains(out, `"validator"`) || strings.Contains(out, "{\"pattern\"") {
		t.Fatalf("raw JSON event data in the account:\n%s", out)
	}
}

func TestSelectIteration(t *testing.T) {
	r := sampleRun(t, "x")
	var b bytes.Buffer
	if err := WriteText(&b, r, Options{Iteration: 2}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "── iteration 1") || !strings.Contains(b.String(), "── iteration 2") {
		t.Fatalf("--iteration 2:\n%s", b.String())
	}
	err := WriteMarkdown(&b, r, Options{Iteration: 7})
	if err == nil || err.Error() != "run run-1 has no iteration 7 (it has 1 to 2)" {
		t.Fatalf("err = %v", err)
	}
}

// Text the model wrote cannot break out of the Markdown or HTML structure.
var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	rawLink  = regexp.MustCompile(`[^\\]\]\(http`)
)

func TestHostileTextIsEscaped(t *testing.T) {
	hostile := "</details><script>alert(1)</script> ```\n# heading [x](http://evil.example/a.png) <img src=x onerror=alert(1)>"
	r := sampleRun(t, hostile)
	r.Iterations[0].Entries = append(r.Iterations[0].Entries, Entry{Kind: KindTool, Title: "Bash " + hostile, Detail: "````\n" + hostile, OK: true})

	var md bytes.Buffer
	if err := WriteMarkdown(&md, r, Options{}); err != nil {
		t.Fatal(err)
	}
	// Outside code spans and fences, no raw tag the model wrote survives.
	fence := ""
	for _, line := range strings.Split(md.String(), "\n") {
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "```") {
			if fence == "" {
				fence = trim
			} else if trim == fence {
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		outside := codeSpan.ReplaceAllString(line, "")
		for _, bad := range []string{"<script", "<img"} {
			if strings.Contains(outside, bad) {
				t.Fatalf("markdown has raw %q in line %q", bad, line)
			}
		}
		if rawLink.MatchString(outside) {
			t.Fatalf("markdown has a live link in line %q", line)
		}
	}
	if !strings.Contains(md.String(), "`````\n") {
		t.Fatalf("fence not longer than the backticks in the output:\n%s", md.String())
	}

	var page bytes.Buffer
	if err := WriteHTML(&page, r, Options{}); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if strings.Contains(html, "<script") || strings.Contains(html, "<img") || !strings.Contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("hostile text not escaped in HTML")
	}
}

// The page needs nothing from the network: no external references, and a
// policy that forbids fetching anything.
func TestHTMLIsSelfContained(t *testing.T) {
	var page bytes.Buffer
	if err := WriteHTML(&page, sampleRun(t, "done"), Options{}); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	for _, bad := range []string{"http://", "https://", "src=", "href=", "url(", "@import", "<script", "<link"} {
		if strings.Contains(html, bad) {
			t.Fatalf("page contains %q", bad)
		}
	}
	if !strings.Contains(html, `content="default-src 'none'; style-src 'unsafe-inline'; img-src data:"`) {
		t.Fatal("no Content-Security-Policy")
	}
	if n := strings.Count(html, `<li class="timeline-row"`); n != 2 {
		t.Fatalf("%d timeline rows, want 2", n)
	}
	if strings.Count(html, "<polyline class=\"cost\"") != 1 || strings.Count(html, "<rect class=\"out\"") != 2 {
		t.Fatal("chart missing bars or the cost line")
	}
}

// Terminal control sequences the model printed are shown, not obeyed.
func TestTextNeutralisesTerminalControls(t *testing.T) {
	r := sampleRun(t, "done\x1b]0;pwned\x07\x1b[2J\u009b31m")
	var b bytes.Buffer
	if err := WriteText(&b, r, Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07\u009b") || !strings.Contains(b.String(), `done\u001b]0;pwned\u0007\u001b[2J\u009b31m`) {
		t.Fatalf("control characters reached the output:\n%q", b.String())
	}
}

// A killed run: no run.end, the last iteration cut short.
func TestUnfinishedRun(t *testing.T) {
	r := build(t,
		ev{journal.RunStart, 0, m{"agent": "a"}},
		ev{journal.IterationStart, 1, nil},
		ev{journal.ModelTurn, 1, m{"turn": 1}},
		ev{journal.ToolCall, 1, m{"name": "Bash", "input": m{"command": "sleep 9"}, "is_error": true, "output": "killed"}},
	)
	var b bytes.Buffer
	if err := WriteText(&b, r, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run run-1  UNFINISHED", "tool ✗ Bash", "(cut short: the run stopped during this iteration)", "0 iterations finished"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("missing %q:\n%s", want, b.String())
		}
	}
}

// A provider without a transcript (no session.messages): the responses
// are shown where the query ended.
func TestResponsesWithoutTranscript(t *testing.T) {
	r := build(t,
		ev{journal.IterationStart, 1, nil},
		ev{journal.ModelTurn, 1, m{"turn": 1}},
		ev{journal.ToolCall, 1, m{"name": "Read", "input": m{}}},
		ev{journal.QueryResult, 1, m{"responses": []string{"first", "second"}}},
		ev{journal.CompletionCheck, 1, m{"complete": false}},
	)
	var kinds []string
	for _, e := range r.Iterations[0].Entries {
		kinds = append(kinds, e.Kind+":"+e.Detail)
	}
	if got := strings.Join(kinds, " "); got != "tool: text:first text:second check:" {
		t.Fatalf("entries %s", got)
	}
}

// A skill run has no iterations; each model turn is one, and the act's
// end is the verdict of the last.
func TestSkillRun(t *testing.T) {
	r := build(t,
		ev{journal.RunStart, 0, m{"agent": "skill:report", "model": "script:x"}},
		ev{"skill.act.start", 0, m{"skill": "report", "goal": "weekly status"}},
		ev{journal.ModelTurn, 0, m{"turn": 1, "usage": m{"input_tokens": 100, "output_tokens": 5}}},
		ev{"skill.evidence", 0, m{"tool": "readSkillMd", "ok": true, "reason_short": "Load the instructions.", "file_ids": []string{"SKILL.md"}}},
		ev{journal.ModelTurn, 0, m{"turn": 2}},
		ev{"skill.evidence", 0, m{"tool": "writeArtifact", "ok": false, "reason_short": "Write it.", "error": "schema mismatch", "cost": m{"time_ms": 30}}},
		ev{"skill.act.end", 0, m{"completed": false, "exitReason": "budget", "artifacts": []m{{"handle": "act.r@v1", "path": "r.json", "bytes": 9}},
			"validation": m{"ok": false, "outputs": []m{{"path": "r.json", "ok": false, "error": "missing field"}}}}},
		ev{journal.RunEnd, 0, m{"success": false, "completionReason": "budget", "iterations": 2}},
	)
	var b bytes.Buffer
	if err := WriteText(&b, r, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`skill report  goal "weekly status"`, "── turn 1 · tokens in 100 out 5", "tool ✓ readSkillMd [SKILL.md]", "Load the instructions.",
		"── turn 2", "tool ✗ writeArtifact", "schema mismatch", "verdict  stop — budget", "artifact act.r@v1  r.json  9 bytes", "NOT COMPLETED  budget"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("missing %q:\n%s", want, b.String())
		}
	}
	if v := r.Iterations[1].Verdict; v == nil || len(v.Validators) != 1 || v.Validators[0].Valid {
		t.Fatalf("verdict %+v", v)
	}
}

func FuzzBuild(f *testing.F) {
	f.Add(`{"seq":1,"type":"iteration.start","iteration":1}
{"seq":2,"type":"model.turn","iteration":1,"data":{"turn":1}}
{"seq":3,"type":"tool.call","iteration":1,"data":{"name":"Read","input":{}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		events, _, err := journal.Read(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		r, err := Build("f", events)
		if err != nil {
			return
		}
		var b bytes.Buffer
		for _, w := range []func(*bytes.Buffer) error{
			func(b *bytes.Buffer) error { return WriteText(b, r, Options{}) },
			func(b *bytes.Buffer) error { return WriteMarkdown(b, r, Options{}) },
			func(b *bytes.Buffer) error { return WriteHTML(b, r, Options{}) },
		} {
			if err := w(&b); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestCompareSummary(t *testing.T) {
	for want, c := range map[string]event.TestComparison{
		"no lost tests in tests-pass: 2 ran (1 passed, 1 failed), 1 skipped":       {Validator: "tests-pass", Parsed: true, Counted: true, Passed: 1, Failed: 1, Skipped: 1},
		"no lost tests in tests-pass: tests ran, not counted (no per-test output)": {Validator: "tests-pass", Parsed: true},
		"no lost tests in tests-pass: no test run in its output; lost: pattern tests-none-run (2 ran before the first iteration)": {Validator: "tests-pass",
			Loss: &event.TestLoss{Pattern: "tests-none-run", BaselineRan: 2}},
	} {
		if got := CompareSummary(c); got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
	d := compareDetail(event.TestComparison{Loss: &event.TestLoss{Disappeared: []string{"a.TestX"}, Skipped: []string{"a.TestY"}}})
	if d != "disappeared: a.TestX\nskipped now: a.TestY" {
		t.Fatalf("%q", d)
	}
}

// The test baselines and comparisons of no-lost-tests are in the account
// in every format; test names the model's code printed stay inert.
func TestNoLostTestsInTheAccount(t *testing.T) {
	base := event.TestBaseline{Validator: "tests-pass", Command: "go test -v ./...", ExitCode: 1, Parsed: true,
		Run: event.TestRun{Counted: true, PerTest: true, Failed: 1, Tests: []event.TestCase{{Name: "app.TestAdd\x1b[2J<b>", Outcome: verify.Failed}}}}
	r := build(t,
		ev{journal.RunStart, 0, m{"agent": "fixer"}},
		ev{string(event.KindTestBaseline), 0, base},
		ev{journal.IterationStart, 1, nil},
		ev{journal.CompletionCheck, 1, m{"complete": true, "declared": true, "reason": "declared"}},
		ev{string(event.KindTestCompare), 1, event.TestComparison{Validator: "tests-pass", Parsed: true, Counted: true,
			Loss: &event.TestLoss{Pattern: "tests-none-run", BaselineRan: 1}}},
		ev{journal.IterationEnd, 1, m{"outcome": m{"complete": false}}},
	)
	if len(r.TestBaselines) != 1 || r.TestBaselines[0].Run.Tests[0].Outcome != verify.Failed {
		t.Fatalf("%+v", r.TestBaselines)
	}
	var text, md, html bytes.Buffer
	if err := WriteText(&text, r, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, r, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, r, Options{}); err != nil {
		t.Fatal(err)
	}
	line := "tests-pass (go test -v ./...) before the first iteration: 1 ran (0 passed, 1 failed), 0 skipped, exit 1"
	if !strings.Contains(text.String(), "tests "+line+"\n   failed   app.TestAdd\\u001b[2J<b>") ||
		!strings.Contains(text.String(), "no lost tests in tests-pass: 0 ran (0 passed, 0 failed), 0 skipped; lost: pattern tests-none-run") {
		t.Fatalf("text:\n%s", text.String())
	}
	if !strings.Contains(md.String(), "> tests "+line) || !strings.Contains(html.String(), "<li>"+line+"</li>") {
		t.Fatalf("md:\n%s\nhtml:\n%s", md.String(), html.String())
	}
}

// The run's parameters read as they were given: name=value, sorted, a
// value with spaces quoted — not Go's map syntax.
func TestParamsAsGiven(t *testing.T) {
	r := build(t, ev{journal.RunStart, 0, m{"agent": "a", "params": m{"name": "ada", "topic": "Go tests", "issue": 42}}})
	var b bytes.Buffer
	if err := WriteText(&b, r, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := `params issue=42 name=ada topic="Go tests"` + "\n"; !strings.Contains(b.String(), want) {
		t.Fatalf("missing %q:\n%s", want, b.String())
	}
}

// A run resumed after a kill, and one a driver rewound (package scaleout
// redoes an iteration whose work was lost): the account shows the attempt
// that counted, once, not the cut or uncounted attempt merged into it.
func TestResumedAndRewoundRuns(t *testing.T) {
	bash := func(cmd string) m { return m{"name": "Bash", "input": m{"command": cmd}} }
	end := m{"summary": m{"usage": m{"input_tokens": 1}}, "outcome": m{"complete": false}}
	r := build(t,
		ev{journal.RunStart, 0, m{"agent": "a"}},
		ev{journal.IterationStart, 1, nil},
		ev{journal.ToolCall, 1, bash("echo one")},
		ev{journal.IterationEnd, 1, end},
		ev{journal.IterationStart, 2, nil},
		ev{journal.ToolCall, 2, bash("echo canceled")},
		ev{journal.IterationEnd, 2, m{"outcome": m{"redo": true}}},
		// interrupted before its query finished: not counted; resumed
		ev{journal.RunStart, 0, m{"agent": "a", "resumed": true, "iteration": 1}},
		ev{journal.IterationStart, 2, nil},
		ev{journal.ToolCall, 2, bash("echo killed")},
		// killed; resumed
		ev{journal.RunStart, 0, m{"agent": "a", "resumed": true, "iteration": 1}},
		ev{journal.IterationStart, 2, nil},
		ev{journal.ToolCall, 2, bash("echo two")},
		ev{journal.IterationEnd, 2, end},
		ev{journal.IterationStart, 3, nil},
		ev{journal.ToolCall, 3, bash("echo lost")},
		ev{journal.IterationEnd, 3, end},
		// the worker's commit of iteration 3 was lost: redone from 2
		ev{journal.RunStart, 0, m{"agent": "a", "resumed": true, "rewound": true, "iteration": 2}},
		ev{journal.IterationStart, 3, nil},
		ev{journal.ToolCall, 3, bash("echo three")},
		ev{journal.IterationEnd, 3, end},
	)
	var got []string
	for _, it := range r.Iterations {
		var tools []string
		for _, e := range it.Entries {
			if e.Kind == KindTool {
				tools = append(tools, e.Title)
			}
		}
		got = append(got, strings.Join(tools, "+"))
	}
	want := []string{`Bash {"command":"echo one"}`, `Bash {"command":"echo two"}`, `Bash {"command":"echo three"}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("iterations' tool calls:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "iteration 3 was run again") {
		t.Errorf("warnings: %q", r.Warnings)
	}
}
