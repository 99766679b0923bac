package runreport

import (
	"bytes"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// A pipeline run's account names the pipeline, its model and request, and
// every stage with its outcome, its violations and its agent run; a
// pipeline's run.end, whose error is a message, is read too.
func TestPipelineRun(t *testing.T) {
	r := build(t,
		ev{journal.RunStart, 0, m{"command": "pipeline run", "request": "what changed", "repo": ".", "file": "p.yaml", "model": "script:s.yaml"}},
		ev{string(event.KindPipelineStage), 0, m{"agent_id": "collect", "status": "succeeded", "attempts": 1, "keys_written": []string{"custom.facts"}, "duration_ms": 1.5}},
		ev{"agent.run", 0, m{"dir": "agents/writer", "result": m{"runId": "20261124T120000Z-abcdef", "success": false, "completionReason": "max_iterations"}}},
		ev{string(event.KindPipelineStage), 0, m{"agent_id": "writer", "status": "violated", "attempts": 2, "duration_ms": 30}},
		ev{string(event.KindPipelineViolation), 0, m{"agent_id": "writer", "kind": "postcondition", "key": "custom.headline", "message": "custom.headline is empty"}},
		ev{journal.RunEnd, 0, m{"success": false, "status": "failed", "errorCode": "CONTRACT_VIOLATION",
			"error": "CONTRACT_VIOLATION: pipeline stopped: agent writer: postcondition validation failed: custom.headline is empty"}},
	)
	if r.Pipeline == nil || len(r.Pipeline.Stages) != 2 || r.Outcome == nil || r.Outcome.ErrorCode != "CONTRACT_VIOLATION" {
		t.Fatalf("%+v %+v", r.Pipeline, r.Outcome)
	}
	var text bytes.Buffer
	if err := WriteText(&text, r, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"run run-1  NOT COMPLETED",
		"pipeline p.yaml  model script:s.yaml",
		`request "what changed"`,
		"✓ collect  succeeded  1ms  wrote custom.facts",
		"✗ writer  violated  2 attempts  30ms",
		"violation: postcondition custom.headline: custom.headline is empty",
		"agent agents/writer: run 20261124T120000Z-abcdef not completed (max_iterations)",
		"NOT COMPLETED  failed",
		"error CONTRACT_VIOLATION: pipeline stopped",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "agent  model") {
		t.Errorf("text shows an empty agent:\n%s", text.String())
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pipeline p.yaml: NOT COMPLETED", "`script:s.yaml`", "`writer` violated", "custom.headline is empty"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, r, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pipeline p.yaml", "stage writer", "violated", "script:s.yaml"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

// The standard pipeline without a model says so.
func TestStandardPipelineWithoutModel(t *testing.T) {
	r := build(t,
		ev{journal.RunStart, 0, m{"command": "pipeline run", "request": "x", "repo": ".", "file": "", "model": ""}},
		ev{journal.RunEnd, 0, m{"success": true, "status": "completed"}},
	)
	var text bytes.Buffer
	if err := WriteText(&text, r, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "pipeline the standard pipeline  model none") || !strings.Contains(text.String(), "COMPLETED  completed") {
		t.Fatalf("%s", text.String())
	}
}
