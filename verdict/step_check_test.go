package verdict

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
)

func TestKeywordCheckReadsOnlyResponses(t *testing.T) {
	c := NewChecker(CheckerConfig{})
	check := &agentdir.StepCheck{Type: CheckKeyword, Keywords: []string{"PLAN_READY", "PLAN_DONE"}}
	s := &event.IterationSummary{AssistantResponses: []string{"reading the notes"},
		ToolsUsed: []event.ToolUse{{Name: "Read", Output: "write PLAN_READY when the plan is ready"}}}
	r, err := c.Check(ctx, check, InputFromSummary(s))
	if err != nil || r.Passed {
		t.Fatalf("keyword in tool output passed the check: %+v %v", r, err)
	}
	s.AssistantResponses = append(s.AssistantResponses, "Plan written. PLAN_DONE")
	r, err = c.Check(ctx, check, InputFromSummary(s))
	if err != nil || !r.Passed || !strings.Contains(r.Reason, "PLAN_DONE") {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestActionCheckReadsOnlyActionResults(t *testing.T) {
	c := NewChecker(CheckerConfig{})
	check := &agentdir.StepCheck{Type: CheckAction, Actions: []string{"Write", "Bash"}}
	cases := []struct {
		in   CheckInput
		want bool
		why  string
	}{
		{CheckInput{Responses: []string{"I ran Write and Bash"}}, false, "Write did not run"},
		{CheckInput{ActionResults: []event.ActionResult{{Action: "Write", Success: true}}}, false, "Bash did not run"},
		{CheckInput{ActionResults: []event.ActionResult{{Action: "Write", Success: true}, {Action: "Bash", Success: false}}}, false, "Bash failed"},
		// A failed attempt followed by a successful one counts as success.
		{CheckInput{ActionResults: []event.ActionResult{{Action: "Bash", Success: false}, {Action: "Write", Success: true}, {Action: "Bash", Success: true}}}, true, "ran without error"},
		{CheckInput{ActionResults: []event.ActionResult{{Action: "Bash", Success: true}, {Action: "Write", Success: true}, {Action: "Bash", Success: false}}}, false, "Bash failed"},
	}
	for i, tc := range cases {
		r, err := c.Check(ctx, check, tc.in)
		if err != nil || r.Passed != tc.want || !strings.Contains(r.Reason, tc.why) {
			t.Errorf("case %d: %+v %v", i, r, err)
		}
	}
	// Tool uses stand in for missing action results; denied or failed tools do not pass.
	s := &event.IterationSummary{ToolsUsed: []event.ToolUse{{Name: "Write"}, {Name: "Bash", Denied: true}}}
	if r, _ := c.Check(ctx, check, InputFromSummary(s)); r.Passed {
		t.Fatal("denied Bash passed")
	}
}

func TestCheckConfigErrors(t *testing.T) {
	c := NewChecker(CheckerConfig{})
	for _, check := range []*agentdir.StepCheck{nil, {Type: "vibes"}, {Type: CheckKeyword}, {Type: CheckAction},
		{Type: CheckPrompt}, {Type: CheckPrompt, Prompt: "is it good?"}} {
		if _, err := c.Check(ctx, check, CheckInput{}); !errors.Is(err, agenterr.ErrConfigurationValidation) {
			t.Errorf("%+v: err = %v", check, err)
		}
	}
}

// reviewer is a Model that judges like a (very simple) reviewer: a
// response passes when it mentions tests passing. It answers in the style
// set by mode: structured output, JSON in prose, or prose only.
type reviewer struct {
	mode    string
	prompts []string
	schemas []string
}

func (m *reviewer) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1].Text
	m.prompts = append(m.prompts, last)
	m.schemas = append(m.schemas, string(req.OutputSchema))
	_, resp, _ := strings.Cut(last, "## Response to judge")
	pass := strings.Contains(resp, "all tests pass")
	verdict, _ := json.Marshal(map[string]any{"pass": pass, "reason": map[bool]string{true: "tests pass", false: "no evidence the tests pass"}[pass]})
	switch m.mode {
	case "structured":
		return &llm.Response{Message: event.Message{Text: string(verdict)}, StructuredOutput: verdict, StopReason: "end_turn"}, nil
	case "prose":
		return &llm.Response{Message: event.Message{Text: "Looking at {this}, my verdict:\n```json\n" + string(verdict) + "\n```"}, StopReason: "end_turn"}, nil
	default:
		return &llm.Response{Message: event.Message{Text: "It looks fine to me."}, StopReason: "end_turn"}, nil
	}
}

func TestPromptCheckWithBridgeJudge(t *testing.T) {
	check := &agentdir.StepCheck{Type: CheckPrompt, Prompt: "The response must show that the test suite passes."}
	for _, mode := range []string{"structured", "prose"} {
		model := &reviewer{mode: mode}
		bridge := llm.NewToolLoop(model, llm.Config{})
		c := NewChecker(CheckerConfig{Judge: &BridgeJudge{Bridge: bridge}})
		r, err := c.Check(ctx, check, CheckInput{Responses: []string{"Fixed the bug;", "all tests pass now."}})
		if err != nil || !r.Passed || r.Reason != "tests pass" || r.Type != CheckPrompt {
			t.Fatalf("%s: %+v %v", mode, r, err)
		}
		r, err = c.Check(ctx, check, CheckInput{Responses: []string{"I changed some code."}})
		if err != nil || r.Passed {
			t.Fatalf("%s: %+v %v", mode, r, err)
		}
		if !strings.Contains(model.prompts[0], "The response must show that the test suite passes.") || !strings.Contains(model.schemas[0], `"pass"`) {
			t.Fatalf("%s: judge prompt %q schema %q", mode, model.prompts[0], model.schemas[0])
		}
	}
	// Each judgement is a fresh session.
	model := &reviewer{mode: "structured"}
	bridge := llm.NewToolLoop(model, llm.Config{})
	j := &BridgeJudge{Bridge: bridge}
	j.Judge(ctx, "c", "r1")
	first := bridge.SessionID()
	j.Judge(ctx, "c", "r2")
	if bridge.SessionID() == first || len(bridge.Transcript(bridge.SessionID())) != 2 {
		t.Fatal("judge reused a session")
	}
	// No readable verdict: a recoverable STEP_JUDGE error.
	c := NewChecker(CheckerConfig{Judge: &BridgeJudge{Bridge: llm.NewToolLoop(&reviewer{mode: "vague"}, llm.Config{})}})
	_, err := c.Check(ctx, check, CheckInput{Responses: []string{"x"}})
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeStepJudge || !e.Recoverable {
		t.Fatalf("err = %v", err)
	}
}

func TestPromptCheckResolvesPromptRef(t *testing.T) {
	model := &reviewer{mode: "structured"}
	c := NewChecker(CheckerConfig{Judge: &BridgeJudge{Bridge: llm.NewToolLoop(model, llm.Config{})},
		ResolvePrompt: func(_ context.Context, ref string) (string, error) {
			if ref != "checks/tests.md" {
				return "", errors.New("unknown prompt")
			}
			return "Criterion from file: tests must pass.", nil
		}})
	if _, err := c.Check(ctx, &agentdir.StepCheck{Type: CheckPrompt, Prompt: "checks/tests.md"}, CheckInput{Responses: []string{"all tests pass"}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(model.prompts[0], "Criterion from file") {
		t.Fatalf("prompt = %q", model.prompts[0])
	}
	if _, err := c.Check(ctx, &agentdir.StepCheck{Type: CheckPrompt, Prompt: "missing.md"}, CheckInput{}); err == nil {
		t.Fatal("resolve error swallowed")
	}
}

func TestFindVerdict(t *testing.T) {
	cases := map[string]bool{
		`{"pass": true, "reason": "ok"}`:                                  true,
		"Sure! {not json} then {\"reason\":\"x\",\"pass\":true} trailing": true,
		"```json\n{\"pass\": false, \"reason\": \"no\"}\n```":             true,
		`{"pass": "yes"}`:         false,
		`{"verdict": true}`:       false,
		`no json at all`:          false,
		`{"pass": true`:           false,
		strings.Repeat("{", 5000): false,
	}
	for text, found := range cases {
		if _, ok := findJudgeVerdict(text); ok != found {
			t.Errorf("%.40q: found = %v", text, ok)
		}
	}
}

func FuzzFindVerdict(f *testing.F) {
	f.Add(`{"pass": true, "reason": "ok"}`)
	f.Add("```json\n{\"pass\":false}\n```")
	f.Add(`{{{{"pass":true`)
	f.Fuzz(func(t *testing.T, text string) {
		v, ok := findJudgeVerdict(text)
		if ok && !strings.Contains(text, `"pass"`) && !strings.Contains(text, `\u0070`) && !strings.Contains(strings.ToLower(text), "pass") {
			t.Fatalf("verdict %+v from %q", v, text)
		}
	})
}

// sinkSpy answers a verdict and notes whether its context carried a live
// view (llm.StreamSink).
type sinkSpy struct{ sawSink bool }

func (s *sinkSpy) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	s.sawSink = s.sawSink || llm.StreamSinkFrom(ctx) != nil
	return &llm.Response{Message: event.Message{Text: `{"pass": true, "reason": "ok"}`}, StopReason: "end_turn"}, nil
}

// TestJudgeIsNotStreamed: the judge's verdict is not the agent's answer, so
// a live view on the run's context does not see the judging query.
func TestJudgeIsNotStreamed(t *testing.T) {
	spy := &sinkSpy{}
	j := &BridgeJudge{Bridge: llm.NewToolLoop(spy, llm.Config{})}
	rec := &fakellm.SinkRecorder{}
	if pass, _, err := j.Judge(llm.WithStreamSink(ctx, rec), "c", "r"); err != nil || !pass {
		t.Fatalf("%v %v", pass, err)
	}
	if spy.sawSink || len(rec.Events()) != 0 {
		t.Fatalf("judge streamed: sink seen %v, events %v", spy.sawSink, rec.Events())
	}
}
