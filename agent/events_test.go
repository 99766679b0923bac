package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/verdict"
)

// recorder is an embedder's consumer of the event stream.
type recorder struct {
	events []event.Event
	output bool
}

func (r *recorder) Consume(e event.Event)  { r.events = append(r.events, e) }
func (r *recorder) WantsModelOutput() bool { return r.output }

// TestEventsConsumerSeesWhatTheJournalRecords: a Config.Events consumer
// gets the run's events in the journal's order, with the same position
// stamps, as typed payloads; model output only when it asks for it.
func TestEventsConsumerSeesWhatTheJournalRecords(t *testing.T) {
	for _, output := range []bool{false, true} {
		rec := &recorder{output: output}
		dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", liarScript)
		cfg, err := Load(dir, goValues(nil))
		if err != nil {
			t.Fatal(err)
		}
		cfg.WorkDir, cfg.Events = t.TempDir(), []event.Consumer{rec}
		res := runToEnd(t, cfg.Agent, cfg)
		journaled, _ := runJournal(t, res)
		var streamed []event.Event
		var texts []string
		for _, e := range rec.events {
			if event.IsModelOutput(e.Kind) {
				if e.Kind == event.KindTextDelta {
					texts = append(texts, e.Payload.(event.TextDeltaEvent).Text)
				}
				continue
			}
			streamed = append(streamed, e)
		}
		if len(streamed) != len(journaled) {
			t.Fatalf("%d events streamed, %d journaled", len(streamed), len(journaled))
		}
		for i, j := range journaled {
			s := streamed[i]
			if string(s.Kind) != j.Type || s.Iteration != j.Iteration || s.Step != j.Step {
				t.Fatalf("event %d: streamed %s@%d/%s, journaled %s@%d/%s", i, s.Kind, s.Iteration, s.Step, j.Type, j.Iteration, j.Step)
			}
		}
		var checks, ends int
		for _, e := range streamed {
			switch d := e.Payload.(type) {
			case *event.CheckEvent:
				checks++
				if d.Verdict != verdict.Retry && d.Verdict != verdict.Stop {
					t.Errorf("check verdict %s", d.Verdict)
				}
			case *event.IterationEvent:
				ends++
			}
		}
		if checks != 3 || ends != 3 {
			t.Fatalf("typed payloads: %d checks, %d iteration ends", checks, ends)
		}
		if got := strings.Join(texts, ""); output != (got != "") {
			t.Fatalf("model output wanted=%v, got %q", output, got)
		}
	}
}

func runJournal(t *testing.T, res *event.RunResult) ([]journal.Event, error) {
	t.Helper()
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	return events, nil
}

// TestAgentEventsIterates: ranging over Agent.Events runs the agent and
// sees its events in order, then the run's error; breaking out cancels
// the run.
func TestAgentEventsIterates(t *testing.T) {
	ctx := context.Background()
	newAgent := func(script string) *Agent {
		cfg, err := Load(verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", script), goValues(nil))
		if err != nil {
			t.Fatal(err)
		}
		cfg.WorkDir = t.TempDir()
		a, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := newAgent(liarScript)
	var types []string
	var last error
	for e, err := range a.Events(ctx) {
		if err != nil {
			last = err
			continue
		}
		types = append(types, string(e.Kind))
	}
	res := a.Stop()
	if !errors.Is(last, agenterr.ErrValidationExhausted) || res.CompletionReason != ReasonValidationExhausted {
		t.Fatalf("last error %v, result %+v", last, res)
	}
	if types[0] != journal.IterationStart || types[len(types)-1] != journal.IterationEnd || slices.Index(types, journal.CompletionCheck) < 0 {
		t.Fatalf("events %v", types)
	}

	// Breaking out after the first iteration ends the run there.
	a = newAgent(liarScript)
	for e := range a.Events(ctx) {
		if e.Kind == event.KindIterationEnd {
			break
		}
	}
	if res := a.Stop(); res.Success || res.Iterations != 1 || res.CompletionReason != "canceled" {
		t.Fatalf("after break: %+v", res)
	}
}
