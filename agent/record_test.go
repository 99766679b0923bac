package agent

import (
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// An iteration killed after its query journaled the session's new
// messages, but before iteration.end, runs again on resume: its messages
// are not part of the restored session (else the transcript would hold
// them twice and a scripted run would skip a turn).
func TestResumeSessionLeavesOutMessagesOfUnfinishedIterations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	w, err := journal.CreateFile(path, 0o700)
	if err != nil {
		t.Fatal(err)
	}
	msgs := func(text string) event.SessionMessagesEvent {
		return event.SessionMessagesEvent{SessionID: "s1", Messages: []event.Message{
			{Role: event.RoleUser, Text: "prompt " + text}, {Role: event.RoleAssistant, Text: text}}}
	}
	w.Append(journal.RunStart, RunStartEvent{RunID: "r"})
	w.SetPosition(1, "s")
	w.Append(journal.IterationStart, nil)
	w.Append(journal.SessionMessages, msgs("one"))
	w.Append(journal.IterationEnd, event.IterationEvent{})
	w.SetPosition(2, "s")
	w.Append(journal.IterationStart, nil)
	w.Append(journal.SessionMessages, msgs("two, killed before it ended"))
	// resumed: iteration 2 again, this time to its end
	w.SetPosition(0, "")
	w.Append(journal.RunStart, RunStartEvent{RunID: "r", Resumed: true})
	w.SetPosition(2, "s")
	w.Append(journal.IterationStart, nil)
	w.Append(journal.SessionMessages, msgs("two"))
	w.Append(journal.IterationEnd, event.IterationEvent{})
	w.SetPosition(3, "s")
	w.Append(journal.IterationStart, nil)
	w.Append(journal.SessionMessages, msgs("three, killed"))
	w.Close()

	rec, err := LoadRun("r", path)
	if err != nil {
		t.Fatal(err)
	}
	got := rec.Sessions["s1"]
	if len(got) != 4 || got[1].Text != "one" || got[3].Text != "two" {
		t.Fatalf("restored session: %+v", got)
	}
}
