package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// TestMultiStepAgent drives a plan → gateway → sub-steps flow with a
// model-judged check and a webhook escalation through the real agent.
func TestMultiStepAgent(t *testing.T) {
	var mu sync.Mutex
	var posts []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		posts = append(posts, m)
		mu.Unlock()
	}))
	defer hook.Close()

	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "multi", "description": "multi-step",
  "runner": {"model": "script:script.yaml", "completion": {"type": "stepFlow"},
    "boundaries": {"permissionMode": "plan"}, "budgets": {"maxIterations": 10}}}`,
		"steps_registry.json": `{"agentId": "multi", "entryStep": "plan",
  "steps": {
    "plan": {"stepId": "plan", "c2": "work", "c3": "plan",
      "check": {"type": "prompt", "prompt": "The response is a numbered plan.",
        "onPass": {"next": "route"}, "onFail": {"retry": true}}},
    "route": {"stepId": "route", "type": "gateway", "c2": "work", "c3": "route",
      "check": {"type": "keyword", "keywords": ["URGENT"], "onPass": {"next": "hotfix"}, "onFail": {"next": "build"}}},
    "hotfix": {"stepId": "hotfix", "c2": "work", "c3": "hotfix"},
    "build": {"stepId": "build", "c2": "work", "c3": "build", "subSteps": ["build.code", "build.test"],
      "check": {"type": "keyword", "keywords": ["TESTS_DONE"], "onPass": {"complete": true}, "onFail": {"escalate": true}},
      "escalation": {"escalateTo": "build", "notificationMethod": "webhook", "webhookUrl": "` + hook.URL + `", "returnFlow": "resume"}},
    "build.code": {"stepId": "build.code", "type": "subStep", "c2": "work", "c3": "code",
      "check": {"type": "keyword", "keywords": ["CODE_DONE"], "onPass": {"next": "build.test"}, "onFail": {"retry": true}}},
    "build.test": {"stepId": "build.test", "type": "subStep", "c2": "work", "c3": "test",
      "check": {"type": "keyword", "keywords": ["TESTS_DONE"], "onPass": {"next": "build"}, "onFail": {"next": "build"}}}
  }}`,
		"prompts/steps/work/plan/f_default.md":   "Write a numbered plan.",
		"prompts/steps/work/route/f_default.md":  "(gateway: never sent)",
		"prompts/steps/work/hotfix/f_default.md": "Hot fix.",
		"prompts/steps/work/build/f_default.md":  "Build.",
		"prompts/steps/work/code/f_default.md":   "Write the code.",
		"prompts/steps/work/test/f_default.md":   "Test the code.",
		"script.yaml": `turns:
  - expect: {prompt_contains: ["Write a numbered plan."]}
    text: "1. code 2. test"
  - expect: {prompt_contains: ["The response is a numbered plan.", "1. code 2. test"]}
    structured: {pass: true, reason: "it is numbered"}
  - expect: {prompt_contains: ["Write the code."]}
    text: "CODE_DONE"
  - expect: {prompt_contains: ["Test the code."]}
    text: "two tests fail"
  - expect: {prompt_contains: ["Write the code."]}
    text: "CODE_DONE again"
  - expect: {prompt_contains: ["Test the code."]}
    text: "TESTS_DONE"
`,
	})
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	events, _ := journal.ReadFile(res.Journal)
	var path []string
	for _, ev := range events {
		if ev.Type == journal.StepTransition {
			var mv event.StepMove
			_ = json.Unmarshal(ev.Data, &mv)
			path = append(path, mv.From+">"+mv.To+":"+mv.Kind)
		}
	}
	if !res.Success || res.Iterations != 5 {
		t.Fatalf("%+v %+v\ntransitions: %v", res, res.Error, path)
	}
	// plan passes the judged check, the gateway routes to build (no model
	// call), the failing sub-step fails the parent, whose escalation posts
	// the webhook and resumes it; the second pass completes the flow.
	want := "plan>route:next route>build.code:next build.code>build.test:subStep build.test>build.code:resume build.code>build.test:subStep build.test>build:complete"
	if got := strings.Join(path, " "); got != want {
		t.Fatalf("transitions\n got %s\nwant %s", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 1 || posts[0]["step"] != "build" || posts[0]["iteration"] != float64(3) || posts[0]["agent"] != "multi" {
		t.Fatalf("webhook posts %v", posts)
	}
}

// A step with a model of its own (steps.<id>.model) talks to that model in
// its own session; the run's model keeps its session across the detour.
func TestStepModelHasItsOwnBridgeAndSession(t *testing.T) {
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "two-models", "description": "writer and reviewer",
  "runner": {"model": "script:writer.yaml", "completion": {"type": "keyword", "keyword": "SHIP_IT"},
    "pricing": {"reviewer.yaml": {"input": 1000000, "output": 0}}}}`,
		"steps_registry.json": `{"agentId": "two-models", "entryStep": "write", "steps": {
    "write": {"stepId": "write", "c2": "w", "c3": "write",
      "check": {"type": "keyword", "keywords": ["DRAFTED"], "onPass": {"next": "review"}, "onFail": {"retry": true}}},
    "review": {"stepId": "review", "c2": "w", "c3": "review", "model": "script:reviewer.yaml",
      "check": {"type": "keyword", "keywords": ["APPROVED"], "onPass": {"next": "write"}, "onFail": {"retry": true}}}}}`,
		"prompts/steps/w/write/f_default.md":  "Write or finish the draft.",
		"prompts/steps/w/review/f_default.md": "Review the draft.",
		"writer.yaml": `turns:
  - text: "DRAFTED"
  - text: "final: SHIP_IT"
`,
		"reviewer.yaml": `turns:
  - expect: {prompt_contains: ["Review the draft."]}
    text: "APPROVED"
    usage: {input_tokens: 3, output_tokens: 1}
`,
	})
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir()})
	if !res.Success || res.Iterations != 3 {
		t.Fatalf("%+v %+v", res, res.Error)
	}
	rec, err := LoadRun(res.RunID, res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	s1, s2, s3 := rec.Iterations[0].Summary, rec.Iterations[1].Summary, rec.Iterations[2].Summary
	if s1.SessionID == "" || s1.SessionID != s3.SessionID || s2.SessionID == s1.SessionID || res.SessionID != s1.SessionID {
		t.Fatalf("sessions: write %s, review %s, write %s, run %s", s1.SessionID, s2.SessionID, s3.SessionID, res.SessionID)
	}
	// The reviewer's session holds only its own exchange, and its turn is
	// priced with the reviewer's price.
	if n := len(rec.Sessions[s2.SessionID]); n != 2 {
		t.Fatalf("reviewer session has %d messages", n)
	}
	if s2.CostUSD != 3 || s1.CostUSD != 0 {
		t.Fatalf("costs: writer %v, reviewer %v", s1.CostUSD, s2.CostUSD)
	}
}
