package llm

import (
	"encoding/json"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// TranscriptsFromEvents rebuilds session transcripts from a run journal:
// the session.messages events, in journal order, each appending the
// messages one query added to its session, or replacing the transcript
// when the query compacted it. The result can be passed as
// Config.Transcripts so that a resumed run continues its sessions. Events of
// other types are ignored, as are session.messages events whose data does
// not decode (a journal written by capstan always decodes).
func TranscriptsFromEvents(events []journal.Event) map[string][]event.Message {
	out := map[string][]event.Message{}
	for _, ev := range events {
		if ev.Type != journal.SessionMessages || len(ev.Data) == 0 {
			continue
		}
		var sm event.SessionMessagesEvent
		if err := json.Unmarshal(ev.Data, &sm); err != nil || sm.SessionID == "" {
			continue
		}
		if sm.Replace {
			out[sm.SessionID] = sm.Messages
			continue
		}
		out[sm.SessionID] = append(out[sm.SessionID], sm.Messages...)
	}
	return out
}
