package llm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
)

// FuzzLoopCallIDs: whatever ids a model gives its tool calls (none,
// repeated, the ids the loop itself would generate), every call of the
// transcript has a distinct id and is answered by exactly one result, in
// order.
func FuzzLoopCallIDs(f *testing.F) {
	f.Add(",dup,dup")
	f.Add("call_t1_2,,call_t1_2_2,")
	f.Add("a,b,c")
	f.Add(",,,,")
	f.Fuzz(func(t *testing.T, ids string) {
		parts := strings.Split(ids, ",")
		if len(parts) > 64 {
			parts = parts[:64]
		}
		var calls []event.ToolCall
		for _, id := range parts {
			calls = append(calls, event.ToolCall{ID: id, Name: "Nothing"})
		}
		m := &fakellm.Replay{Replies: []*llm.Response{{Message: event.Message{ToolCalls: calls}}}}
		lp := llm.Loop{Model: m}
		msgs, res, err := lp.Run(context.Background(), []event.Message{{Role: event.RoleUser, Text: "go"}})
		if err != nil || res.Turns != 2 || len(msgs) != 4 {
			t.Fatalf("err %v, %d turns, %d messages", err, res.Turns, len(msgs))
		}
		got, results := msgs[1].ToolCalls, msgs[2].ToolResults
		if len(got) != len(parts) || len(results) != len(got) {
			t.Fatalf("%d calls, %d results for %d asked", len(got), len(results), len(parts))
		}
		seen := map[string]bool{}
		for i, c := range got {
			if c.ID == "" || seen[c.ID] || results[i].CallID != c.ID || !results[i].IsError {
				t.Fatalf("call %d: id %q, result %+v", i, c.ID, results[i])
			}
			seen[c.ID] = true
		}
	})
}
