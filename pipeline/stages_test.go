package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
)

// replyModel is a small llm.Model that answers each turn with the next
// configured reply and records the requests it saw.
type replyModel struct {
	mu      sync.Mutex
	replies []llm.Response
	reqs    []*llm.Request
}

func (m *replyModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	if len(m.reqs) > len(m.replies) {
		return nil, errors.New("no more replies")
	}
	r := m.replies[len(m.reqs)-1]
	return &r, nil
}

func text(s string) llm.Response {
	return llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: s}, Usage: event.Usage{InputTokens: 10, OutputTokens: 5}}
}

func intentStage(t *testing.T, m llm.Model, prompt string) *ModelStage {
	t.Helper()
	s, err := NewModelStage(ModelStageConfig{
		Contract: Contract{ID: "intent_detection", Post: []string{"reasoning.intents", "reasoning.entities"},
			Keys: []KeySpec{
				{Name: "reasoning.intents", Type: TypeArray, Schema: json.RawMessage(`{"type":"array","items":{"type":"object","required":["type","confidence"],"properties":{"type":{"type":"string"},"confidence":{"type":"number","minimum":0,"maximum":1}}}}`)},
				{Name: "reasoning.entities", Type: TypeObject, AllowEmpty: true},
			}},
		Model: m, Prompt: prompt,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestModelStageSchemaRetryAndFill(t *testing.T) {
	m := &replyModel{replies: []llm.Response{
		text(`{"intents":[{"type":"activity","confidence":7}],"entities":{}}`), // confidence out of range
		text("Sure!\n```json\n{\"intents\":[{\"type\":\"activity\",\"confidence\":0.9}],\"entities\":{\"window\":\"7d\"}}\n```"),
	}}
	mgr := newM(t, DefaultExecutionOptions(), intentStage(t, m, "Detect intents in: {{input.request}} <&>"))
	out, err := mgr.Execute(context.Background(), input(t, "request", "summarize <b>activity</b> & more"))
	if err != nil {
		t.Fatal(err)
	}
	var intents []map[string]any
	_ = out.Decode("reasoning.intents", &intents)
	if len(intents) != 1 || intents[0]["confidence"] != 0.9 {
		t.Fatalf("intents = %v", intents)
	}
	if len(m.reqs) != 2 {
		t.Fatalf("%d model turns", len(m.reqs))
	}
	// The prompt is not HTML-escaped, and the retry tells the model what was wrong.
	if got := m.reqs[0].Messages[0].Text; got != "Detect intents in: summarize <b>activity</b> & more <&>" {
		t.Fatalf("prompt = %q", got)
	}
	if fix := m.reqs[1].Messages[2].Text; !strings.Contains(fix, "rejected") || !strings.Contains(fix, "maximum") {
		t.Fatalf("correction = %q", fix)
	}
	if m.reqs[0].OutputSchema == nil || m.reqs[0].OutputSchemaName != "intent_detection" {
		t.Fatal("no output schema sent")
	}
	runs := decode[[]AgentRun](t, out, KeyAgentRuns)
	if runs[0].Usage == nil || runs[0].Usage.InputTokens != 20 {
		t.Fatalf("usage not recorded: %+v", runs[0])
	}
}

func TestModelStageRejects(t *testing.T) {
	cases := map[string][]llm.Response{
		"extra field": {text(`{"intents":[{"type":"a","confidence":1}],"entities":{},"facts":[]}`), text(`{"intents":[],"entities":{},"x":1}`)},
		"not json":    {text("I think the intent is activity."), text("still prose")},
		"wrong type":  {text(`{"intents":"activity","entities":{}}`), text(`{"intents":{},"entities":{}}`)},
	}
	for name, replies := range cases {
		t.Run(name, func(t *testing.T) {
			m := &replyModel{replies: replies}
			mgr := newM(t, DefaultExecutionOptions(), intentStage(t, m, ""))
			out, err := mgr.Execute(context.Background(), input(t, "request", "x"))
			if !errors.Is(err, agenterr.ErrStageOutput) || !strings.Contains(err.Error(), "intent_detection") {
				t.Fatalf("err = %v", err)
			}
			if out.Has("reasoning.intents") {
				t.Fatal("rejected output reached the context")
			}
		})
	}
	// Structured output is preferred over text; an empty array is caught
	// by the contract, not the schema.
	m := &replyModel{replies: []llm.Response{{StructuredOutput: json.RawMessage(`{"intents":[],"entities":{}}`)}}}
	mgr := newM(t, DefaultExecutionOptions(), intentStage(t, m, ""))
	_, err := mgr.Execute(context.Background(), input(t, "request", "x"))
	if !strings.Contains(err.Error(), "postcondition validation failed: reasoning.intents is empty") {
		t.Fatalf("err = %v", err)
	}
	// The default prompt lists the inputs and the schema.
	if p := m.reqs[0].Messages[0].Text; !strings.Contains(p, "User request: x") || !strings.Contains(p, `"required":["intents","entities"]`) {
		t.Fatalf("default prompt = %q", p)
	}
}

func TestStageConstructors(t *testing.T) {
	m := &replyModel{}
	bad := []ModelStageConfig{
		{Contract: Contract{ID: "a", Post: []string{"x.y"}}},                                       // no model
		{Contract: Contract{ID: "a"}, Model: m},                                                    // no postconditions
		{Contract: Contract{ID: "a", Post: []string{"x.y", "z.y"}}, Model: m},                      // field clash
		{Contract: Contract{ID: "a", Post: []string{"x.y"}}, Model: m, Prompt: "{{#if}}"},          // bad template
		{Contract: Contract{ID: "a", Post: []string{"x.y"}}, Model: m, Schema: []byte(`{"type":`)}, // bad schema
		{Contract: Contract{ID: "a b", Post: []string{"x.y"}}, Model: m},
	}
	for i, c := range bad {
		if _, err := NewModelStage(c); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
	if _, err := NewAgentStage(AgentStageConfig{Contract: Contract{ID: "a", Post: []string{"x.y"}}, Dir: "d"}); err == nil {
		t.Error("agent stage without runner accepted")
	}
}

type runnerFunc func(ctx context.Context, dir string, params map[string]string) (json.RawMessage, error)

func (f runnerFunc) RunAgent(ctx context.Context, dir string, params map[string]string) (json.RawMessage, error) {
	return f(ctx, dir, params)
}

func TestAgentStage(t *testing.T) {
	var gotDir string
	var gotParams map[string]string
	runner := runnerFunc(func(_ context.Context, dir string, params map[string]string) (json.RawMessage, error) {
		gotDir, gotParams = dir, params
		return json.RawMessage(`{"summary":"3 commits"}`), nil
	})
	s, err := NewAgentStage(AgentStageConfig{
		Contract: Contract{ID: "writer", Pre: []string{"enrichment.facts"}, Post: []string{"reasoning.summary"},
			Keys: []KeySpec{{Name: "reasoning.summary", Type: TypeString}}},
		Runner: runner, Dir: "agents/writer",
		Params: map[string]string{"request": "{{input.request}}", "facts": "{{json enrichment.facts}}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	facts := fn("facts", nil, []string{"enrichment.facts"}, setAll(map[string]any{"enrichment.facts": []map[string]any{{"id": "F1", "value": 3}}}))
	mgr := newM(t, DefaultExecutionOptions(), facts, s)
	out, err := mgr.Execute(context.Background(), input(t, "request", "a & b"))
	if err != nil {
		t.Fatal(err)
	}
	if out.String("reasoning.summary") != "3 commits" || gotDir != "agents/writer" || gotParams["request"] != "a & b" ||
		!strings.Contains(gotParams["facts"], `"id": "F1"`) {
		t.Fatalf("summary %q dir %q params %v", out.String("reasoning.summary"), gotDir, gotParams)
	}
	// A result without the promised field is rejected with the schema error.
	bad := runnerFunc(func(context.Context, string, map[string]string) (json.RawMessage, error) {
		return json.RawMessage(`{"other":"x"}`), nil
	})
	s2, _ := NewAgentStage(AgentStageConfig{Contract: Contract{ID: "writer", Pre: []string{"enrichment.facts"}, Post: []string{"reasoning.summary"}}, Runner: bad, Dir: "d"})
	mgr = newM(t, DefaultExecutionOptions(), facts, s2)
	if _, err := mgr.Execute(context.Background(), nil); !errors.Is(err, agenterr.ErrStageOutput) {
		t.Fatalf("err = %v", err)
	}
}

// A model stage takes the first JSON object of a prose answer, skipping
// other JSON values before it.
func TestFirstObject(t *testing.T) {
	cases := map[string]string{
		`{"a":1}`:                                  `{"a":1}`,
		"text {oops} then {\"b\":[1]}":             `{"b":[1]}`,
		"```json\n{\"c\":2}\n```":                  `{"c":2}`,
		"```json\n[1,2]\n```\nor rather {\"d\":3}": `{"d":3}`,
		"none": ``,
	}
	for in, want := range cases {
		if got := string(firstObject(in)); got != want {
			t.Errorf("%q -> %q want %q", in, got, want)
		}
	}
}
