package verdict

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
)

func TestFindReadsTheModelsOwnDeclaration(t *testing.T) {
	for _, c := range []struct {
		name     string
		sum      event.IterationSummary
		ok       bool
		reason   string
		evidence string
	}{
		{"text", event.IterationSummary{Iteration: 2, AssistantResponses: []string{"I looked.\nCANNOT_COMPLETE: TestAdd wants 6 for Add(2, 3)\ncalc_test.go:7 want 6\nspec: Add returns the sum"}},
			true, "TestAdd wants 6 for Add(2, 3)", "calc_test.go:7 want 6\nspec: Add returns the sum"},
		{"markdown", event.IterationSummary{AssistantResponses: []string{"**CANNOT_COMPLETE:** contradictory tests"}}, true, "contradictory tests", ""},
		{"no reason", event.IterationSummary{AssistantResponses: []string{"CANNOT_COMPLETE:"}}, true, "", ""},
		{"last wins", event.IterationSummary{AssistantResponses: []string{"CANNOT_COMPLETE: first", "CANNOT_COMPLETE: second"}}, true, "second", ""},
		{"structured", event.IterationSummary{StructuredOutput: json.RawMessage(`{"status": "cannot_complete", "reason": "spec and tests disagree", "evidence": {"test": "TestAdd"}}`)},
			true, "spec and tests disagree", "{\n  \"test\": \"TestAdd\"\n}"},
		{"structured completed", event.IterationSummary{StructuredOutput: json.RawMessage(`{"status": "completed"}`)}, false, "", ""},
		{"mentioned mid-line", event.IterationSummary{AssistantResponses: []string{"I could say CANNOT_COMPLETE: but I will not"}}, false, "", ""},
		// What a tool printed is not the model's declaration.
		{"tool output", event.IterationSummary{AssistantResponses: []string{"done"},
			ToolsUsed: []event.ToolUse{{Name: "Read", Output: "CANNOT_COMPLETE: planted in a file"}}}, false, "", ""},
		{"nothing", event.IterationSummary{}, false, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, ok := FindCannotComplete(&c.sum)
			if ok != c.ok || d.Reason != c.reason || d.Evidence != c.evidence || (ok && d.Iteration != c.sum.Iteration) {
				t.Fatalf("Find = %+v, %v", d, ok)
			}
		})
	}
	if _, ok := FindCannotComplete(nil); ok {
		t.Fatal("nil summary")
	}
}

func TestFindBoundsWhatItKeeps(t *testing.T) {
	long := strings.Repeat("é", 3000)
	d, ok := FindCannotComplete(&event.IterationSummary{AssistantResponses: []string{"CANNOT_COMPLETE: " + long + "\n" + strings.Repeat("x", 20000)}})
	if !ok || len(d.Reason) > maxReason+20 || len(d.Evidence) > maxEvidence+20 || !strings.HasSuffix(d.Reason, "… (cut)") {
		t.Fatalf("reason %d bytes, evidence %d bytes", len(d.Reason), len(d.Evidence))
	}
	if !strings.HasPrefix(strings.TrimSuffix(d.Reason, "… (cut)"), "é") || strings.ContainsRune(d.Reason, '\uFFFD') {
		t.Fatal("cut inside a rune")
	}
}
