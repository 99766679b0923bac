package fakellm

import (
	"context"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
)

// Replay is an llm.Model that answers each turn with the next of Replies,
// as given (nil included, to test a model that answers nothing), and keeps
// a copy of every request's messages in Seen. Once Replies are used up it
// answers "done" without tool calls.
type Replay struct {
	Replies []*llm.Response
	Seen    [][]event.Message
}

// Generate implements llm.Model.
func (m *Replay) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.Seen = append(m.Seen, append([]event.Message(nil), req.Messages...))
	if len(m.Replies) == 0 {
		return &llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: "done"}, StopReason: "end_turn"}, nil
	}
	r := m.Replies[0]
	m.Replies = m.Replies[1:]
	return r, nil
}
