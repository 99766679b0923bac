package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/tool"
)

// sizeChecker is a Compactor that checks, on every call, the transcript
// size the tool loop kept against a full re-measure of the request.
type sizeChecker struct {
	*Compactor
	t      *testing.T
	checks int
	// stubbed and summarized count the compactions of each kind.
	stubbed, summarized int
}

func (c *sizeChecker) check(req *Request, transcriptBytes int) {
	c.t.Helper()
	c.checks++
	if want := messagesBytes(req.Messages); transcriptBytes != want {
		c.t.Fatalf("check %d: the tool loop kept %d bytes for a transcript of %d bytes (%d messages)", c.checks, transcriptBytes, want, len(req.Messages))
	}
}

func (c *sizeChecker) fitSized(ctx context.Context, req *Request, query int, transcriptBytes int) (Fitted, error) {
	c.check(req, transcriptBytes)
	fit, err := c.Compactor.fitSized(ctx, req, query, transcriptBytes)
	if ev := fit.Compaction; ev != nil {
		if len(ev.StubbedCalls) > 0 {
			c.stubbed++
		}
		if ev.SummarizedMessages > 0 {
			c.summarized++
		}
	}
	return fit, err
}

func (c *sizeChecker) observeSized(req *Request, transcriptBytes int, inputTokens int64) {
	c.check(req, transcriptBytes)
	c.Compactor.observeSized(req, transcriptBytes, inputTokens)
}

// randomModel answers with random text, random tool calls (some carrying
// a secret the loop redacts, some repeating an id), failures, and
// summaries for summary requests.
type randomModel struct{ rnd *rand.Rand }

func (m *randomModel) text(n int) string {
	return strings.Repeat("w", m.rnd.IntN(n)) + " SECRET-VALUE"[:m.rnd.IntN(14)]
}

func (m *randomModel) Generate(_ context.Context, req *Request) (*Response, error) {
	if req.Summary {
		return &Response{Message: event.Message{Role: event.RoleAssistant, Text: "summary " + m.text(300)}}, nil
	}
	// The provider's count: the estimate, give or take (it calibrates
	// the compactor's later estimates).
	usage := event.Usage{InputTokens: EstimateTokens(RequestSize(req)) * int64(90+m.rnd.IntN(40)) / 100, OutputTokens: 10}
	switch r := m.rnd.IntN(10); {
	case r == 0:
		return nil, errors.New("the model's server failed")
	case r < 6:
		msg := event.Message{Role: event.RoleAssistant, Text: m.text(80)}
		for i := range 1 + m.rnd.IntN(3) {
			id := fmt.Sprintf("c%d", m.rnd.IntN(4)) // repeated ids are renamed
			if i == 0 && m.rnd.IntN(3) == 0 {
				id = ""
			}
			msg.ToolCalls = append(msg.ToolCalls, event.ToolCall{ID: id, Name: "Out",
				Input: json.RawMessage(fmt.Sprintf(`{"n":%d,"note":%q}`, m.rnd.IntN(6000), m.text(40)))})
		}
		return &Response{Message: msg, StopReason: "tool_use", Usage: usage}, nil
	}
	return &Response{Message: event.Message{Role: event.RoleAssistant, Text: m.text(400)}, StopReason: "end_turn", Usage: usage}, nil
}

// outTool prints as many bytes as its call asks for.
type outTool struct{}

func (outTool) Spec() tool.Spec {
	return tool.Spec{Name: "Out", Description: "print n bytes", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (outTool) Kind() tool.Kind { return tool.KindRead }
func (outTool) Run(_ context.Context, in json.RawMessage) (tool.Result, error) {
	var v struct{ N int }
	_ = json.Unmarshal(in, &v)
	return tool.Result{Content: strings.Repeat("o", v.N)}, nil
}

// The size of the transcript that the tool loop keeps as it grows is the
// size a full re-measure finds, on every turn, whatever happens between
// turns: answers with text and tool calls, redaction, renamed call ids,
// failed queries (the session is left as it was and the next query
// appends over the failed one's messages), queries that run out of turns,
// compaction by stubs and by summaries, several sessions, and sessions
// seeded for a resume.
func TestKeptTranscriptSizeMatchesAFullMeasure(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 31))
			model := &randomModel{rnd: rnd}
			checker := &sizeChecker{t: t, Compactor: NewCompactor(6_000, model, "m", CompactionOptions{KeepToolResults: 1 + rnd.IntN(3)})}
			seeded := []event.Message{{Role: event.RoleUser, Text: "an earlier prompt", Pinned: true}, {Role: event.RoleAssistant, Text: model.text(500)}}
			loop := NewToolLoop(model, Config{Tools: []tool.Tool{outTool{}}, Context: checker, MaxTurns: 4,
				Redact:      func(s string) string { return strings.ReplaceAll(s, "SECRET-VALUE", "[redacted]") },
				Transcripts: map[string][]event.Message{"resumed": seeded}})
			sessions := []string{"", "resumed"}
			for q := range 60 {
				sid := sessions[rnd.IntN(len(sessions))]
				res, err := loop.Query(context.Background(), fmt.Sprintf("prompt %d %s", q, model.text(200)),
					QueryOptions{SessionID: sid, SystemPrompt: "act", Instructions: q%7 == 0})
				if res != nil && res.SessionID != "" && sid == "" {
					sessions = append(sessions, res.SessionID)
				}
				_ = err // failed queries are part of the sequence
			}
			if checker.checks < 60 || checker.stubbed == 0 || checker.summarized == 0 {
				t.Fatalf("the sequence did not reach every path: %d sized calls, %d compactions by stubs, %d by summaries",
					checker.checks, checker.stubbed, checker.summarized)
			}
		})
	}
}
