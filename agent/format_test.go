package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

func structuredAgent(t *testing.T, script string) string {
	return writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "fmt", "description": "structured output",
  "runner": {"model": "script:script.yaml", "completion": {"type": "structured"}, "budgets": {"maxIterations": 5}}}`,
		"steps_registry.json": `{"agentId": "fmt", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "w", "c3": "s",
  "outputSchemaRef": {"file": "out.schema.json", "schema": "answer"}, "onFailure": {"action": "retry", "maxAttempts": 2}}}}`,
		"schemas/out.schema.json": `{"answer": {"type": "object", "properties": {
  "status": {"enum": ["in_progress", "completed"]}, "count": {"type": "integer", "minimum": 0}}, "required": ["status", "count"]}}`,
		"prompts/steps/w/s/f_default.md": "Count the files and report.",
		"script.yaml":                    script,
	})
}

// The step's resolved schema goes to the provider; an answer that does not
// match it triggers a format retry quoting the problems, and JSON inside
// prose is recovered.
func TestFormatRetryAndRecovery(t *testing.T) {
	dir := structuredAgent(t, `turns:
  - text: "There are three files, I think."
  - expect: {prompt_contains: ["did not have the required format", "count"]}
    text: "Sure, here it is:\n`+"```json"+`\n{\"status\": \"completed\", \"count\": 3}\n`+"```"+`\nHope that helps."
`)
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	if !res.Success || res.Iterations != 2 {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	events, _ := journal.ReadFile(res.Journal)
	var kinds []string
	var schemaSent bool
	for _, ev := range events {
		switch ev.Type {
		case journal.RetryPrompt:
			var rp event.RetryPromptEvent
			_ = json.Unmarshal(ev.Data, &rp)
			kinds = append(kinds, rp.Kind)
		case journal.IterationEnd:
			var e struct {
				Summary struct {
					StructuredOutput json.RawMessage `json:"structuredOutput"`
				} `json:"summary"`
			}
			_ = json.Unmarshal(ev.Data, &e)
			if strings.Contains(string(e.Summary.StructuredOutput), `"count":3`) {
				schemaSent = true // recovered from prose and handed on
			}
		}
	}
	if strings.Join(kinds, ",") != "format" || !schemaSent {
		t.Fatalf("retries %v, recovered %v", kinds, schemaSent)
	}
}

// A model that never produces the format exhausts the step's onFailure
// budget instead of looping.
func TestFormatRetryIsBounded(t *testing.T) {
	dir := structuredAgent(t, `turns:
  - text: "no json"
  - text: "still no json"
  - text: "never"
`)
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	if res.Success || res.CompletionReason != ReasonValidationExhausted || res.Iterations != 2 || res.Error == nil || res.Error.Code != "SCHEMA_VALIDATION" {
		t.Fatalf("%+v %+v", res, res.Error)
	}
}
