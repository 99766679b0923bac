package agent

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden journal (testdata/golden_journal.jsonl)")

// goldenScript is a model that first only claims to be done (the file
// validator fails and the run retries with that failure's prompt), then
// writes out.txt with a tool call and claims again (the validator passes
// and the run completes).
const goldenScript = `turns:
  - text: "DONE"
  - expect: {prompt_contains: ["out.txt is missing"]}
    text: "writing out.txt"
    tool_calls:
      - name: Write
        input: {file_path: out.txt, content: "x\n"}
  - text: "wrote it. DONE"
`

// TestJournalMatchesGolden runs a representative agent (two iterations, a
// tool call, a failed verification with its retry prompt, completion) on
// the script provider, offline, with a fixed clock and run id, and
// compares its journal event for event — type, position and payload JSON
// — with testdata/golden_journal.jsonl. Only what is inherently variable
// is normalised, explicitly: times, durations and the hash chain
// (normalizeGolden), the temporary directories and the session id. Run with -update to
// rewrite the golden file after an intended change to the journal.
func TestJournalMatchesGolden(t *testing.T) {
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", goldenScript)
	work := t.TempDir()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg, err := Load(dir, goValues(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir, cfg.RunID, cfg.Now = work, "20260102T030405Z-golden", func() time.Time { return clock }
	// Whether a machine can sandbox differs between machines; this agent
	// runs no command, so it opts out and its journal is the same on all.
	cfg.NoSandbox = true
	res := runToEnd(t, cfg.Agent, cfg)
	if res.CompletionReason != ReasonCompleted {
		t.Fatalf("run ended %s (%s), want completed", res.CompletionReason, res.Reason)
	}
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	// The temporary directories and the session id (random, made by the
	// provider) are this run's own.
	replacer := strings.NewReplacer(dir, "<agent-dir>", work, "<work-dir>", filepath.Dir(res.Journal), "<run-dir>",
		res.SessionID, "<session-id>")
	var got bytes.Buffer
	for _, e := range events {
		line, err := json.Marshal(map[string]any{"seq": e.Seq, "type": e.Type, "iteration": e.Iteration, "step": e.Step,
			"data": normalizeGolden(t, e.Data)})
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(replacer.Replace(string(line)))
		got.WriteByte('\n')
	}
	golden := filepath.Join("testdata", "golden_journal.jsonl")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	gotLines, wantLines := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gotLines) || i < len(wantLines); i++ {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("journal line %d differs from %s:\n got: %s\nwant: %s", i+1, golden, g, w)
		}
	}
}

// goldenVariable are the payload keys whose values differ from run to
// run however the run is driven: wall-clock durations and times the
// journal's payloads carry.
var goldenVariable = map[string]bool{
	"durationMs": true, "duration_ms": true, "timestamp": true, "testBaselineMs": true,
}

// normalizeGolden decodes a payload and replaces the values of the
// goldenVariable keys, at any depth, with "<variable>".
func normalizeGolden(t *testing.T, data json.RawMessage) any {
	t.Helper()
	if len(data) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if goldenVariable[k] {
					x[k] = "<variable>"
				} else {
					x[k] = walk(e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}

// TestIterationEventsEncodeThemselves runs the golden journal's agent and
// requires every payload it journals, but the run's first and last
// (run.start, run.end, written once per run), to encode itself
// (journal.AppendJSONer), so that no event of an iteration goes through
// encoding/json's reflection.
func TestIterationEventsEncodeThemselves(t *testing.T) {
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", goldenScript)
	cfg, err := Load(dir, goValues(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir, cfg.NoSandbox = t.TempDir(), true
	kinds := map[event.Kind]bool{}
	cfg.Events = append(cfg.Events, event.ConsumerFunc(func(e event.Event) {
		if _, ok := e.Payload.(journal.AppendJSONer); !ok && e.Kind != event.KindRunStart && e.Kind != event.KindRunEnd {
			t.Errorf("%s (%T) is journaled through encoding/json", e.Kind, e.Payload)
		}
		kinds[e.Kind] = true
	}))
	if res := runToEnd(t, cfg.Agent, cfg); res.CompletionReason != ReasonCompleted {
		t.Fatalf("run ended %s (%s), want completed", res.CompletionReason, res.Reason)
	}
	for _, k := range []event.Kind{event.KindModelTurn, event.KindSessionMessages, event.KindQueryResult, event.KindCompletionCheck,
		event.KindRetryPrompt, event.KindIterationEnd, event.KindToolCall, event.KindToolIntent} {
		if !kinds[k] {
			t.Errorf("the run journaled no %s event", k)
		}
	}
}

// TestJournalOfFormat1Reads reads a journal written before format 2
// (testdata/journal_format1.jsonl: the golden journal's run, whose step
// machine state after each iteration is a step.state event of its own)
// and a journal of this capstan's format for the same run (the state in
// iteration.end's stepState), and requires both to be intact and to give
// resume the same step state after every iteration.
func TestJournalOfFormat1Reads(t *testing.T) {
	old, err := LoadRun("20260102T030405Z-format1", filepath.Join("testdata", "journal_format1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", goldenScript)
	cfg, err := Load(dir, goValues(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir, cfg.NoSandbox = t.TempDir(), true
	res := runToEnd(t, cfg.Agent, cfg)
	cur, err := LoadRun(res.RunID, res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*RunRecord{old, cur} {
		if err := rec.Integrity.Err(); err != nil {
			t.Fatalf("%s: %v", rec.Journal, err)
		}
		if len(rec.Iterations) != 2 || rec.stepState == nil {
			t.Fatalf("%s: %d iterations, step state %v; want 2 and a state", rec.Journal, len(rec.Iterations), rec.stepState)
		}
	}
	for i := range old.Iterations {
		o, c := old.Iterations[i].stepState, cur.Iterations[i].stepState
		if o == nil || c == nil || !reflect.DeepEqual(o, c) {
			t.Errorf("iteration %d: step state of format 1 %+v, of format %d %+v", i+1, o, journal.Format, c)
		}
	}
	if p := old.Iterations[0].stepState.Pending; p == nil || p.Pattern != "out-missing" {
		t.Errorf("iteration 1 of format 1: pending retry prompt %+v, want the out-missing one", p)
	}
	if got := countType(t, res.Journal, string(event.KindStepState)); got != 0 {
		t.Errorf("format %d journal has %d step.state events, want none", journal.Format, got)
	}
}

func countType(t *testing.T, path, typ string) int {
	t.Helper()
	events, err := journal.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.Type == typ {
			n++
		}
	}
	return n
}
