package verdict

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/event"
)

// TestFenceSignal: the run completes on a ```<signalType> block of the
// model's own text carrying the required fields; a block lacking one, with
// broken JSON, with another tag or left open does not complete it.
func TestFenceSignal(t *testing.T) {
	names := `{"type": "signal", "options": {"signalType": "facilitator_decision", "requiredFields": ["recommendations", "reasoning"]}}`
	values := `{"type": "signal", "options": {"signalType": "done", "requiredFields": {"result": "complete", "n": 2}}}`
	cases := []struct {
		name, cfg, text string
		complete        bool
	}{
		{"names present", names, "Finished.\n```facilitator_decision\n{\"recommendations\": [], \"reasoning\": \"ok\"}\n```\n", true},
		{"name missing", names, "```facilitator_decision\n{\"reasoning\": \"ok\"}\n```", false},
		{"name null", names, "```facilitator_decision\n{\"recommendations\": null, \"reasoning\": \"ok\"}\n```", false},
		{"broken json", names, "```facilitator_decision\n{\"recommendations\": \n```", false},
		{"other tag", names, "```json\n{\"recommendations\": [], \"reasoning\": \"ok\"}\n```", false},
		{"unclosed", names, "```facilitator_decision\n{\"recommendations\": [], \"reasoning\": \"ok\"}", false},
		{"second block holds", names, "```facilitator_decision\n{}\n```\nthen\n```facilitator_decision\n{\"recommendations\": 1, \"reasoning\": 2}\n```", true},
		{"tilde fence", names, "~~~facilitator_decision\n{\"recommendations\": [], \"reasoning\": \"ok\"}\n~~~", true},
		{"indented fence", names, "  ```facilitator_decision\n  {\"recommendations\": [], \"reasoning\": \"ok\"}\n  ```", true},
		// A fence with an info string opens no block and closes none: the
		// block runs on to the bare fence, and its body is no JSON.
		{"fence line inside", names, "```facilitator_decision\n{\"recommendations\": [], \"reasoning\": \"ok\"}\n```json\n```", false},
		{"tag is case sensitive", names, "```Facilitator_Decision\n{\"recommendations\": [], \"reasoning\": \"ok\"}\n```", false},
		{"values match", values, "```done\n{\"result\": \"complete\", \"n\": 2}\n```", true},
		{"value differs", values, "```done\n{\"result\": \"partial\", \"n\": 2}\n```", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cfg agentdir.Completion
			if err := json.Unmarshal([]byte(tc.cfg), &cfg); err != nil {
				t.Fatal(err)
			}
			h, err := CompletionFromConfig(cfg, HandlerDeps{})
			if err != nil {
				t.Fatal(err)
			}
			sum := &event.IterationSummary{AssistantResponses: []string{tc.text}}
			r, err := h.Check(context.Background(), CompletionContext{Iteration: 1, Summary: sum})
			if err != nil {
				t.Fatal(err)
			}
			if r.Complete != tc.complete || h.IsComplete() != tc.complete || (tc.complete && h.Reason() == "") {
				t.Fatalf("complete=%v (handler %v, reason %q), want %v", r.Complete, h.IsComplete(), r.Reason, tc.complete)
			}
		})
	}
	for _, bad := range []string{
		`{"type": "signal"}`,
		`{"type": "signal", "options": {"signalType": "s", "requiredFields": 3}}`,
		`{"type": "signal", "options": {"signalType": "s", "other": 1}}`,
	} {
		var cfg agentdir.Completion
		if err := json.Unmarshal([]byte(bad), &cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := CompletionFromConfig(cfg, HandlerDeps{}); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
