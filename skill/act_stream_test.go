package skill

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
)

// streamingModel plays its turns like playModel and, like a provider,
// streams each turn's text to the sink in the context it was given.
type streamingModel struct{ playModel }

func (m *streamingModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, err := m.playModel.Generate(ctx, req)
	if sink := llm.StreamSinkFrom(ctx); sink != nil && err == nil && resp.Message.Text != "" {
		sink.TextDelta(resp.Message.Text)
	}
	return resp, err
}

// evidenceEvents keeps the skill.evidence events as journaled.
type evidenceEvents struct{ evidence []event.SkillEvidence }

func (e *evidenceEvents) Emit(p event.Payload) {
	if ev, ok := p.(event.SkillEvidence); ok {
		e.evidence = append(e.evidence, ev)
	}
}

func TestActStreamsToolCalls(t *testing.T) {
	sk := exampleSkill(t)
	m := &streamingModel{playModel{turns: []playTurn{
		{text: "a", calls: [][2]string{call("readSkillMd", ``), call("readFile", `{"path":"nope.md"}`), call("frobnicate", `{}`)}},
		// The repeat of the failed read is refused by the AttemptMemo; the
		// third call of the turn is over the tool-call budget.
		{text: "b", calls: [][2]string{call("readFile", `{"path":"nope.md"}`), call("blackboardPut", `{"key":"k","value":1}`), call("blackboardPut", `{"key":"k2","value":2}`)}},
	}}}
	rec := &fakellm.SinkRecorder{}
	events := &evidenceEvents{}
	ctx := llm.WithStreamSink(context.Background(), rec)
	res, err := New(Config{Model: m, Events: events}).Run(ctx, sk,
		Input{Goal: "g", Expected: expectReport, Budgets: Budgets{MaxToolCalls: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitReason != ExitToolCallBudget || res.Metrics.MemoRefusals != 1 {
		t.Fatalf("exit %s, memo refusals %d", res.ExitReason, res.Metrics.MemoRefusals)
	}
	want := []string{
		"text:a",
		"start:readSkillMd", "end:readSkillMd",
		"start:readFile", "end:readFile!error",
		"start:frobnicate", "end:frobnicate!error",
		"text:b",
		"start:readFile", "end:readFile!denied",
		"start:blackboardPut", "end:blackboardPut",
		"start:blackboardPut", "end:blackboardPut!denied",
	}
	if got := rec.Outline(); !slices.Equal(got, want) {
		t.Fatalf("outline\n got %q\nwant %q", got, want)
	}

	// Every ToolStart is closed by the ToolEnd of the same call.
	var starts []event.ToolCall
	var ends []event.ToolUse
	var open *event.ToolCall
	for _, e := range rec.Events() {
		switch e.Kind {
		case "start":
			if open != nil {
				t.Fatalf("start of %s while %s is open", e.Call.ID, open.ID)
			}
			c := e.Call
			open = &c
		case "end":
			if open == nil || e.Use.ID != open.ID || e.Use.Name != open.Name {
				t.Fatalf("end %s/%s does not close %+v", e.Use.ID, e.Use.Name, open)
			}
			starts = append(starts, *open)
			ends = append(ends, e.Use)
			open = nil
		}
	}
	if open != nil {
		t.Fatalf("%s never ended", open.ID)
	}
	if string(ends[0].Input) != "{}" {
		t.Errorf("empty input reported as %q, want {}", ends[0].Input)
	}

	// The ToolEnds agree with the journaled evidence, call for call; the
	// call over the budget never ran, so it has a ToolEnd but no evidence.
	ev := events.evidence
	if len(ev) != len(ends)-1 || !reflect.DeepEqual(ev, res.Evidence) {
		t.Fatalf("%d evidence events for %d ToolEnds (result has %d)", len(ev), len(ends), len(res.Evidence))
	}
	for i, e := range ev {
		u := ends[i]
		if d := digest(u.Name, starts[i].Input); u.Name != e.Tool || d != e.InputsDigest || u.IsError == e.OK {
			t.Errorf("call %d: ToolEnd %s ok=%v digest %s, evidence %s ok=%v digest %s",
				i, u.Name, !u.IsError, d, e.Tool, e.OK, e.InputsDigest)
		}
		if u.DurationMs > e.Cost.TimeMs {
			t.Errorf("call %d: ToolEnd took %d ms, evidence says %d", i, u.DurationMs, e.Cost.TimeMs)
		}
		if !e.OK {
			var answer struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(u.Output), &answer); err != nil || answer.Error.Code+": "+answer.Error.Message != e.Error {
				t.Errorf("call %d: ToolEnd output %s, evidence error %q (%v)", i, u.Output, e.Error, err)
			}
		}
	}
	if refused := ends[3]; !ev[3].Cached || !json.Valid([]byte(refused.Output)) ||
		!strings.Contains(refused.Output, agenterr.CodeSkillRepeatedFailure) {
		t.Errorf("memo refusal: ToolEnd %+v, evidence %+v", refused, ev[3])
	}
	if over := ends[5]; !strings.Contains(over.Output, agenterr.CodeBudgetExceeded) || over.DurationMs != 0 {
		t.Errorf("budget refusal: %+v", over)
	}
}

// Calls after the one that ended the run are answered without running;
// the sink sees them as refused.
func TestActStreamsSkippedCalls(t *testing.T) {
	sk := exampleSkill(t)
	m := &playModel{turns: []playTurn{
		{text: "done", calls: [][2]string{call("finalize", `{"summary":"nothing to do"}`), call("blackboardPut", `{"key":"k","value":1}`)}},
	}}
	rec := &fakellm.SinkRecorder{}
	res, err := New(Config{Model: m}).Run(llm.WithStreamSink(context.Background(), rec), sk, Input{Goal: "g"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start:finalize", "end:finalize", "start:blackboardPut", "end:blackboardPut!denied"}
	if got := rec.Outline(); res.ExitReason != ExitFinalized || !slices.Equal(got, want) {
		t.Fatalf("exit %s, outline %q, want %q", res.ExitReason, got, want)
	}
	if ends := rec.Events(); !strings.Contains(ends[3].Use.Output, "SKIPPED") {
		t.Errorf("skipped call output %s", ends[3].Use.Output)
	}
}
