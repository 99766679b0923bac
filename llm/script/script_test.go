package script

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/llm"
)

// briefExample is the format example of the provider's documentation.
const briefExample = `turns:                       # consumed in order, one per model call
  - text: "I'll write the file."
    tool_calls:
      - name: Write
        input: {file_path: hello.txt, content: "hi\n"}
  - text: "Done. TASK_COMPLETE"
    usage: {input_tokens: 120, output_tokens: 8}
  - structured: {status: completed, next_action: complete}
  - expect: {prompt_contains: ["test-failed"]}
    text: "fixing"
  - error: {type: rate_limit, retry_after_seconds: 1, message: "slow down"}
`

func mustParse(t *testing.T, src string) *Script {
	t.Helper()
	s, err := Parse("script.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func userReq(prompt string) *llm.Request {
	return &llm.Request{Messages: []event.Message{{Role: event.RoleUser, Text: prompt}}}
}

func TestParseExample(t *testing.T) {
	s := mustParse(t, briefExample)
	if len(s.Turns) != 5 {
		t.Fatalf("turns = %d, want 5", len(s.Turns))
	}
	t0 := s.Turns[0]
	if t0.Text != "I'll write the file." || len(t0.ToolCalls) != 1 || t0.ToolCalls[0].Name != "Write" {
		t.Fatalf("turn 1 = %+v", t0)
	}
	var in map[string]string
	if err := json.Unmarshal(t0.ToolCalls[0].Input, &in); err != nil {
		t.Fatal(err)
	}
	if in["file_path"] != "hello.txt" || in["content"] != "hi\n" {
		t.Fatalf("input = %v", in)
	}
	if t0.Line != 2 || t0.Column != 5 {
		t.Errorf("turn 1 at %d:%d, want 2:5", t0.Line, t0.Column)
	}
	if u := s.Turns[1].Usage; u == nil || u.InputTokens != 120 || u.OutputTokens != 8 {
		t.Errorf("turn 2 usage = %+v", u)
	}
	var st map[string]string
	if err := json.Unmarshal(s.Turns[2].Structured, &st); err != nil || st["status"] != "completed" {
		t.Errorf("turn 3 structured = %s (%v)", s.Turns[2].Structured, err)
	}
	if got := s.Turns[3].PromptContains; len(got) != 1 || got[0] != "test-failed" {
		t.Errorf("turn 4 expect = %v", got)
	}
	if e := s.Turns[4].Error; e == nil || e.Type != ErrorRateLimit || e.RetryAfterSeconds != 1 || e.Message != "slow down" {
		t.Errorf("turn 5 error = %+v", e)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, src  string
		line, col  int
		msgContain string
	}{
		{"unknown key in turn", "turns:\n  - text: hi\n    txet: typo\n", 3, 5, `unknown field "txet"`},
		{"unknown top-level key", "turns:\n  - text: hi\nturn:\n  - text: x\n", 3, 1, `unknown field "turn"`},
		{"unknown key in tool call", "turns:\n  - tool_calls:\n      - name: Read\n        args: {}\n", 4, 9, `unknown field "args"`},
		{"unknown key in usage", "turns:\n  - text: a\n    usage: {input: 3}\n", 3, 13, `unknown field "input"`},
		{"tool call without name", "turns:\n  - text: ok\n  - tool_calls:\n      - input: {a: 1}\n", 4, 9, "turn 2: tool call 1 has no name"},
		{"blank tool name", "turns:\n  - tool_calls:\n      - name: '  '\n", 3, 9, "has no name"},
		{"unknown error type", "turns:\n  - text: a\n  - error:\n      type: timeout\n", 4, 7, `unknown error type "timeout"`},
		{"missing error type", "turns:\n  - error: {message: x}\n", 2, 13, `unknown error type ""`},
		{"error with text", "turns:\n  - text: a\n    error: {type: auth}\n", 3, 13, "cannot also reply"},
		{"negative retry", "turns:\n  - error: {type: rate_limit, retry_after_seconds: -1}\n", 2, 13, "must not be negative"},
		{"empty turn", "turns:\n  - text: a\n  - expect: {prompt_contains: [x]}\n", 3, 5, "turn 2 has no reply"},
		{"structured with tool calls", "turns:\n  - structured: {a: 1}\n    tool_calls: [{name: Read}]\n", 2, 18, "cannot be combined with tool_calls"},
		{"negative usage", "turns:\n  - text: a\n    usage: {output_tokens: -5}\n", 3, 13, "must not be negative"},
		{"empty expectation", "turns:\n  - text: a\n    expect: {prompt_contains: [\"\"]}\n", 3, 14, "empty string"},
		{"input not a mapping", "turns:\n  - tool_calls:\n      - name: Bash\n        input: ls -la\n", 3, 9, "input must be a mapping"},
		{"structured NaN", "turns:\n  - structured: .nan\n", 2, 17, "not representable as JSON"},
		{"no turns", "turns: []\n", 1, 1, "no turns"},
		{"empty file", "", 1, 1, "no turns"},
		{"turns not a list", "turns: 5\n", 1, 8, "sequence"},
		{"syntax error", "turns:\n  - text: [unclosed\n", 2, 11, "invalid script"},
		{"wrong type", "turns:\n  - tool_calls: {name: x}\n", 2, 17, "invalid script"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("agent/script.yaml", []byte(tc.src))
			e := agenterr.From(err)
			if e == nil {
				t.Fatalf("want CONFIG_PARSE error, got %v", err)
			}
			if e.Code != agenterr.CodeConfigurationParse || e.File != "agent/script.yaml" {
				t.Errorf("code/file = %s %s", e.Code, e.File)
			}
			if e.Line != tc.line || e.Column != tc.col {
				t.Errorf("position = %d:%d, want %d:%d (%v)", e.Line, e.Column, tc.line, tc.col, err)
			}
			if !strings.Contains(e.Error(), tc.msgContain) {
				t.Errorf("message %q does not contain %q", e.Error(), tc.msgContain)
			}
			if e.Hint == "" {
				t.Error("no hint")
			}
		})
	}
}

func TestGenerateReplaysTurnsInOrder(t *testing.T) {
	s := mustParse(t, `turns:
  - text: step one
    tool_calls:
      - name: Write
        input: {file_path: a.txt, content: x}
      - name: Read
        input: {file_path: a.txt}
  - tool_calls:
      - name: Bash
        input: {command: ls}
  - text: final
`)
	m := New(s)
	ctx := context.Background()
	var ids []string
	stops := []string{}
	for i := 0; i < 3; i++ {
		resp, err := m.Generate(ctx, userReq("go"))
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if resp.Message.Role != event.RoleAssistant {
			t.Errorf("role = %q", resp.Message.Role)
		}
		for _, c := range resp.Message.ToolCalls {
			ids = append(ids, c.ID)
			if !json.Valid(c.Input) {
				t.Errorf("invalid input JSON %s", c.Input)
			}
		}
		stops = append(stops, resp.StopReason)
	}
	if got := strings.Join(ids, ","); got != "call_1,call_2,call_3" {
		t.Errorf("ids = %s", got)
	}
	if got := strings.Join(stops, ","); got != "tool_use,tool_use,end_turn" {
		t.Errorf("stop reasons = %s", got)
	}
	if m.Remaining() != 0 {
		t.Errorf("remaining = %d", m.Remaining())
	}
}

func TestGenerateToolInputIsNotShared(t *testing.T) {
	s := mustParse(t, "turns:\n  - tool_calls: [{name: Read, input: {file_path: a}}]\n")
	resp, err := New(s).Generate(context.Background(), userReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Message.ToolCalls[0].Input[0] = 'X' // caller scribbles on the reply
	if s.Turns[0].ToolCalls[0].Input[0] != '{' {
		t.Fatal("reply aliases the script's input bytes")
	}
	if resp2, _ := New(s).Generate(context.Background(), userReq("x")); string(resp2.Message.ToolCalls[0].Input) != `{"file_path":"a"}` {
		t.Fatalf("second replay input = %s", resp2.Message.ToolCalls[0].Input)
	}
}

func TestGenerateStructured(t *testing.T) {
	s := mustParse(t, "turns:\n  - structured: {status: completed, n: 2}\n  - text: explained\n    structured: {ok: true}\n")
	m := New(s)
	r1, err := m.Generate(context.Background(), userReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(r1.StructuredOutput, &v); err != nil || v["status"] != "completed" || v["n"] != float64(2) {
		t.Fatalf("structured = %s", r1.StructuredOutput)
	}
	if r1.Message.Text != string(r1.StructuredOutput) {
		t.Errorf("text = %q, want the structured JSON", r1.Message.Text)
	}
	r2, _ := m.Generate(context.Background(), userReq("x"))
	if r2.Message.Text != "explained" || string(r2.StructuredOutput) != `{"ok":true}` {
		t.Errorf("turn 2 = %q %s", r2.Message.Text, r2.StructuredOutput)
	}
}

func TestGenerateUsage(t *testing.T) {
	s := mustParse(t, "turns:\n  - text: hi\n    usage: {input_tokens: 120, output_tokens: 8, cache_read_tokens: 3}\n  - text: the reply text here\n  - text: the reply text here\n")
	m := New(s)
	r1, _ := m.Generate(context.Background(), userReq("x"))
	if r1.Usage != (event.Usage{InputTokens: 120, OutputTokens: 8, CacheReadTokens: 3}) {
		t.Errorf("given usage = %+v", r1.Usage)
	}
	small, _ := m.Generate(context.Background(), userReq("short"))
	big, _ := m.Generate(context.Background(), &llm.Request{System: strings.Repeat("s", 400),
		Messages: []event.Message{{Role: event.RoleUser, Text: strings.Repeat("p", 4000)}}})
	if small.Usage.InputTokens <= 0 || small.Usage.OutputTokens <= 0 {
		t.Fatalf("estimate = %+v", small.Usage)
	}
	if big.Usage.InputTokens < 1100 || big.Usage.InputTokens > 1101 {
		t.Errorf("4400 chars estimated as %d input tokens, want ≈1100", big.Usage.InputTokens)
	}
	if small.Usage.OutputTokens != big.Usage.OutputTokens || small.Usage.OutputTokens != EstimateTokens(len("the reply text here")) {
		t.Errorf("output estimate = %d/%d", small.Usage.OutputTokens, big.Usage.OutputTokens)
	}
}

func TestExpectPromptContains(t *testing.T) {
	src := "turns:\n  - expect: {prompt_contains: [test-failed, \"exit 1\"]}\n    text: fixing\n"
	req := &llm.Request{Messages: []event.Message{
		{Role: event.RoleUser, Text: "first prompt mentions test-failed and exit 1"},
		{Role: event.RoleAssistant, Text: "ok"},
		{Role: event.RoleUser, Text: "retry: test-failed in pkg/foo"},
		{Role: event.RoleTool, ToolResults: []event.ToolResult{{CallID: "c", Content: "exit 1"}}},
	}}
	_, err := New(mustParse(t, src)).Generate(context.Background(), req)
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSdkRequest || e.Recoverable {
		t.Fatalf("want SDK_REQUEST, got %v", err)
	}
	if !strings.Contains(e.Message, `"exit 1"`) || strings.Contains(e.Message, `"test-failed",`) {
		t.Errorf("message should quote only what was missing: %s", e.Message)
	}
	if e.Line != 2 || e.File != "script.yaml" {
		t.Errorf("location = %s", e.Location())
	}
	req.Messages[2].Text = "retry: test-failed, exit 1"
	resp, err := New(mustParse(t, src)).Generate(context.Background(), req)
	if err != nil || resp.Message.Text != "fixing" {
		t.Fatalf("matching prompt: %v %+v", err, resp)
	}
}

func TestSimulatedErrors(t *testing.T) {
	cases := []struct {
		typ         string
		code        string
		recoverable bool
	}{
		{ErrorRateLimit, agenterr.CodeSdkRateLimit, true},
		{ErrorOverloaded, agenterr.CodeSdkConnection, true},
		{ErrorServer, agenterr.CodeSdkConnection, true},
		{ErrorConnection, agenterr.CodeSdkConnection, true},
		{ErrorAuth, agenterr.CodeSdkAuth, false},
		{ErrorSessionNotFound, agenterr.CodeSdkSessionNotFound, true},
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			s := mustParse(t, fmt.Sprintf("turns:\n  - error: {type: %s, retry_after_seconds: 2.5}\n  - text: recovered\n", tc.typ))
			m := New(s)
			_, err := m.Generate(context.Background(), userReq("x"))
			if agenterr.CodeOf(err) != tc.code || agenterr.IsRecoverable(err) != tc.recoverable {
				t.Fatalf("got %v (recoverable=%v), want %s/%v", err, agenterr.IsRecoverable(err), tc.code, tc.recoverable)
			}
			if tc.typ == ErrorRateLimit && !strings.Contains(err.Error(), "retry after 2.5s") {
				t.Errorf("rate limit message lacks retry-after: %v", err)
			}
			// The error consumed its turn; the next call gets the next turn.
			resp, err := m.Generate(context.Background(), userReq("x"))
			if err != nil || resp.Message.Text != "recovered" {
				t.Fatalf("after error: %v", err)
			}
		})
	}
	if !errors.Is(simulate(&SimulatedError{Type: ErrorRateLimit, Message: "slow"}, "t"), agenterr.ErrSdkRateLimit) {
		t.Error("errors.Is does not match the sentinel")
	}
}

func TestExhausted(t *testing.T) {
	m := New(mustParse(t, "turns:\n  - text: one\n  - text: two\n"))
	for i := 0; i < 2; i++ {
		if _, err := m.Generate(context.Background(), userReq("x")); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ { // stays exhausted
		_, err := m.Generate(context.Background(), userReq("x"))
		if !errors.Is(err, agenterr.ErrScriptExhausted) {
			t.Fatalf("want SCRIPT_EXHAUSTED, got %v", err)
		}
		if !strings.Contains(err.Error(), "script.yaml has 2 turns") {
			t.Errorf("message should name the file and turn count: %v", err)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	m := New(mustParse(t, "turns:\n  - text: one\n"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Generate(ctx, userReq("x")); agenterr.CodeOf(err) != agenterr.CodeCanceled {
		t.Fatalf("want CANCELED, got %v", err)
	}
	if m.Remaining() != 1 {
		t.Error("a canceled call consumed a turn")
	}
}

func TestConcurrentGenerateHandsOutEachTurnOnce(t *testing.T) {
	const n = 64
	var b strings.Builder
	b.WriteString("turns:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - text: t%d\n    tool_calls: [{name: Read, input: {file_path: f%d}}]\n", i, i)
	}
	s := mustParse(t, b.String())
	m := New(s)
	var mu sync.Mutex
	texts, ids := map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < n+8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := m.Generate(context.Background(), userReq("x"))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if !errors.Is(err, agenterr.ErrScriptExhausted) {
					t.Error(err)
				}
				return
			}
			texts[resp.Message.Text] = true
			ids[resp.Message.ToolCalls[0].ID] = true
		}()
	}
	wg.Wait()
	if len(texts) != n || len(ids) != n {
		t.Fatalf("distinct texts %d, ids %d; want %d each", len(texts), len(ids), n)
	}
	// Independent cursor per Model.
	if resp, err := New(s).Generate(context.Background(), userReq("x")); err != nil || resp.Message.Text != "t0" {
		t.Fatalf("fresh model: %v", err)
	}
}

func TestProviderRegistration(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("script.yaml", "turns:\n  - text: default file\n")
	write("scripts/alt.yaml", "turns:\n  - text: alt file\n")
	abs := write("elsewhere/abs.yaml", "turns:\n  - text: absolute\n")
	ctx := context.Background()
	for spec, want := range map[string]string{
		"script":                  "default file",
		"script:scripts/alt.yaml": "alt file",
		"script:" + abs:           "absolute",
	} {
		m, err := llm.OpenModel(ctx, spec, llm.Config{AgentDir: dir})
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		resp, err := m.Generate(ctx, userReq("x"))
		if err != nil || resp.Message.Text != want {
			t.Errorf("%s: %v %v", spec, resp, err)
		}
	}
	// A missing file is named where it was looked for, with the folder
	// the name is relative to: the name alone may be a file that exists
	// relative to the current directory.
	_, err := llm.OpenModel(ctx, "script:missing.yaml", llm.Config{AgentDir: dir})
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeConfigurationNotFound || e.File != filepath.Join(dir, "missing.yaml") ||
		!strings.Contains(e.Message, "script:missing.yaml is read relative to "+dir) || !strings.Contains(e.Hint, "create "+filepath.Join(dir, "missing.yaml")) {
		t.Errorf("missing file: %v", err)
	}
	_, err = llm.OpenModel(ctx, "script:scripts", llm.Config{AgentDir: dir})
	if agenterr.CodeOf(err) != agenterr.CodeConfigurationParse {
		t.Errorf("directory: %v", err)
	}
	write("bad.yaml", "turns:\n  - tool_calls: [{input: {}}]\n")
	_, err = llm.Open(ctx, "script:bad.yaml", llm.Config{AgentDir: dir})
	if e := agenterr.From(err); e == nil || e.File != "bad.yaml" || e.Line != 2 {
		t.Errorf("bad file through Open: %v", err)
	}
}

func TestAliasBombIsRefused(t *testing.T) {
	// "Billion laughs": nine levels of nine aliases would expand to 9^9
	// strings. The parser must refuse it before decoding.
	var b strings.Builder
	b.WriteString("turns:\n  - structured:\n      l0: &l0 [x,x,x,x,x,x,x,x,x]\n")
	for i := 1; i < 9; i++ {
		p := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "      l%d: &l%d [%s]\n", i, i, strings.Repeat(p+",", 8)+p)
	}
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeConfigurationParse || !strings.Contains(e.Message, "aliases") {
		t.Fatalf("want CONFIG_PARSE about aliases, got %v", err)
	}
	// Modest alias use is fine.
	s := mustParse(t, "turns:\n  - tool_calls:\n      - name: Write\n        input: &w {file_path: a, content: b}\n      - name: Write\n        input: *w\n")
	if string(s.Turns[0].ToolCalls[1].Input) != `{"content":"b","file_path":"a"}` {
		t.Fatalf("alias input = %s", s.Turns[0].ToolCalls[1].Input)
	}
}

func FuzzScript(f *testing.F) {
	f.Add([]byte(briefExample))
	f.Add([]byte("turns:\n  - text: hi\n"))
	f.Add([]byte("turns:\n  - tool_calls:\n      - name: X\n        input: {1: a, b: [1, {c: d}]}\n"))
	f.Add([]byte("turns:\n  - error: {type: auth}\n"))
	f.Add([]byte("turns: [{text: a}, {structured: [1,2]}]"))
	f.Add([]byte("turns:\n  - text: &x hi\n  - text: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("f.yaml", data)
		if err != nil {
			if agenterr.CodeOf(err) != agenterr.CodeConfigurationParse {
				t.Fatalf("error without CONFIG_PARSE code: %v", err)
			}
			return
		}
		if len(s.Turns) == 0 {
			t.Fatal("accepted a script with no turns")
		}
		m := New(s)
		for i, turn := range s.Turns {
			if turn.Error != nil && (turn.Text != "" || len(turn.ToolCalls) > 0) {
				t.Fatalf("turn %d: error with reply accepted", i)
			}
			for _, c := range turn.ToolCalls {
				if strings.TrimSpace(c.Name) == "" {
					t.Fatalf("turn %d: nameless tool call accepted", i)
				}
				var obj map[string]any
				if err := json.Unmarshal(c.Input, &obj); err != nil {
					t.Fatalf("turn %d: input %q is not a JSON object: %v", i, c.Input, err)
				}
			}
			if turn.Structured != nil && !json.Valid(turn.Structured) {
				t.Fatalf("turn %d: invalid structured JSON", i)
			}
			resp, err := m.Generate(context.Background(), &llm.Request{})
			if turn.Error != nil || len(turn.PromptContains) > 0 {
				if err == nil {
					t.Fatalf("turn %d: expected an error", i)
				}
				continue
			}
			if err != nil || resp == nil {
				t.Fatalf("turn %d: %v", i, err)
			}
		}
		if _, err := m.Generate(context.Background(), &llm.Request{}); !errors.Is(err, agenterr.ErrScriptExhausted) {
			t.Fatalf("after the last turn: %v", err)
		}
	})
}

func TestExpectSystemContains(t *testing.T) {
	src := "turns:\n  - expect: {system_contains: [\"You are the reviewer\"], prompt_contains: [review]}\n    text: ok\n"
	req := &llm.Request{System: "You are the planner.", Messages: []event.Message{{Role: event.RoleUser, Text: "review issue 7"}}}
	_, err := New(mustParse(t, src)).Generate(context.Background(), req)
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSdkRequest || e.Line != 2 {
		t.Fatalf("want SDK_REQUEST at line 2, got %v", err)
	}
	if !strings.Contains(e.Message, `system prompt to contain "You are the reviewer"`) || !strings.Contains(e.Message, "You are the planner.") ||
		!strings.Contains(e.Hint, "expect.system_contains") {
		t.Errorf("message/hint: %s / %s", e.Message, e.Hint)
	}
	req.System = "# Role\nYou are the reviewer of this repository."
	if resp, err := New(mustParse(t, src)).Generate(context.Background(), req); err != nil || resp.Message.Text != "ok" {
		t.Fatalf("matching system prompt: %v %+v", err, resp)
	}
	if _, err := Parse("script.yaml", []byte("turns:\n  - expect: {system_contains: [\"\"]}\n    text: a\n")); err == nil ||
		!strings.Contains(err.Error(), "expect.system_contains has an empty string") {
		t.Errorf("empty system_contains string: %v", err)
	}
}
