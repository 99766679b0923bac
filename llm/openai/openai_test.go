package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/openai"
	"github.com/capstan-dev/capstan/tool"
)

const testKey = "sk-test-SECRET-abcdef123456"

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.d)
}

func newModel(t *testing.T, srv *fakellm.Server, key string, sl *sleeps, ev event.Emitter) *openai.Model {
	t.Helper()
	pol := llm.RetryPolicy{Rand: func() float64 { return 0 }}
	if sl != nil {
		pol.Sleep = sl.sleep
	}
	m, err := openai.New(openai.Config{APIKey: key, BaseURL: srv.URL, Model: "gpt-test", HTTPClient: srv.Client(), Retry: pol, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func userReq(text string) *llm.Request {
	return &llm.Request{System: "be brief", Messages: []event.Message{{Role: event.RoleUser, Text: text}}}
}

func TestTextTurnWithCachedUsage(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		{Text: "héllo wörld", Usage: fakellm.Usage{InputTokens: 30, OutputTokens: 4, CacheReadTokens: 70, CacheWriteTokens: 20}},
	}})
	resp, err := newModel(t, srv, testKey, nil, nil).Generate(context.Background(), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Text != "héllo wörld" || resp.StopReason != "end_turn" {
		t.Fatalf("resp = %+v", resp)
	}
	// prompt_tokens (120) includes the cached and the written tokens; only
	// the rest is billed at the full input rate.
	if want := (event.Usage{InputTokens: 30, OutputTokens: 4, CacheReadTokens: 70, CacheWriteTokens: 20}); resp.Usage != want {
		t.Fatalf("usage = %+v, want %+v", resp.Usage, want)
	}
	r := srv.Requests()[0]
	if !r.Request.Stream || r.Request.System != "be brief" || r.Header.Get("Authorization") != "REDACTED" {
		t.Fatalf("request = %+v", r)
	}
	if !strings.Contains(string(r.Body), `"include_usage":true`) {
		t.Errorf("usage not requested in stream: %s", r.Body)
	}
}

func TestToolLoopEndToEndAndStructuredOutput(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		if len(r.LastToolResults) > 0 {
			return fakellm.Reply{Structured: json.RawMessage(`{"echo":` + mustJSON(r.LastToolResults[0]) + `}`)}
		}
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{
			{Name: "Echo", Input: json.RawMessage(`{"text":"alpha"}`)},
			{Name: "Echo", Input: json.RawMessage(`{"text":"beta"}`)},
		}}
	}})
	env := map[string]string{"OPENAI_BASE_URL": srv.URL}
	b, err := llm.Open(context.Background(), "openai:llama3.1:8b", llm.Config{Tools: []tool.Tool{echoTool{}},
		HTTPClient: srv.Client(), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Query(context.Background(), "echo twice", llm.QueryOptions{OutputName: "echo result!",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"echo":{"type":"string"}},"required":["echo"],"additionalProperties":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolUses) != 2 || res.ToolUses[0].Output != "ALPHA" || res.ToolUses[1].Output != "BETA" {
		t.Fatalf("tool uses = %+v", res.ToolUses)
	}
	var out struct{ Echo string }
	if err := json.Unmarshal(res.StructuredOutput, &out); err != nil || out.Echo != "ALPHA" {
		t.Fatalf("structured = %s", res.StructuredOutput)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].Request.ToolResults != 2 || reqs[0].Request.Model != "llama3.1:8b" {
		t.Fatalf("requests = %+v", reqs)
	}
	if reqs[0].Header.Get("Authorization") != "" {
		t.Errorf("keyless local server got an Authorization header")
	}
	var body struct {
		ResponseFormat struct {
			Type       string
			JSONSchema struct {
				Name   string
				Strict bool
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.ResponseFormat.Type != "json_schema" || !body.ResponseFormat.JSONSchema.Strict || body.ResponseFormat.JSONSchema.Name != "echo_result_" {
		t.Fatalf("response_format = %+v", body.ResponseFormat)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

type echoTool struct{}

func (echoTool) Spec() tool.Spec {
	return tool.Spec{Name: "Echo", Description: "upper-cases text", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}
}
func (echoTool) Kind() tool.Kind { return tool.KindRead }
func (echoTool) Run(_ context.Context, in json.RawMessage) (tool.Result, error) {
	var a struct{ Text string }
	if err := json.Unmarshal(in, &a); err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Content: strings.ToUpper(a.Text)}, nil
}

func TestFaultsMapToCodes(t *testing.T) {
	cases := []struct {
		name        string
		fault       fakellm.Fault
		code        string
		recoverable bool
		requests    int
	}{
		{"rate limit", fakellm.Fault{Status: 429, Code: "rate_limit_exceeded", RetryAfterMs: "5"}, agenterr.CodeSdkRateLimit, true, 4},
		{"insufficient quota is not retried", fakellm.Fault{Status: 429, Code: "insufficient_quota", Type: "insufficient_quota"}, agenterr.CodeSdkRateLimit, false, 1},
		{"server error", fakellm.Fault{Status: 500}, agenterr.CodeSdkConnection, true, 4},
		{"overloaded", fakellm.Fault{Status: 503}, agenterr.CodeSdkConnection, true, 4},
		{"dropped stream", fakellm.Fault{CutAfter: 2}, agenterr.CodeSdkConnection, true, 4},
		{"stream error", fakellm.Fault{ErrorEventAfter: 1, Type: "server_error"}, agenterr.CodeSdkConnection, true, 4},
		{"malformed stream line", fakellm.Fault{MalformedAfter: 2}, agenterr.CodeSdkConnection, true, 4},
		{"auth", fakellm.Fault{Status: 401, Code: "invalid_api_key"}, agenterr.CodeSdkAuth, false, 1},
		{"bad request", fakellm.Fault{Status: 400}, agenterr.CodeSdkRequest, false, 1},
		{"not found", fakellm.Fault{Status: 404, Code: "model_not_found"}, agenterr.CodeSdkRequest, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fault
			srv := fakellm.NewOpenAI(t, fakellm.Options{Respond: func(fakellm.Request) fakellm.Reply {
				return fakellm.Reply{Text: "some words to stream", Fault: &f}
			}})
			sl := &sleeps{}
			_, err := newModel(t, srv, testKey, sl, nil).Generate(context.Background(), userReq("x"))
			e := agenterr.From(err)
			if e == nil || e.Code != tc.code || e.Recoverable != tc.recoverable {
				t.Fatalf("err = %#v", err)
			}
			if n := len(srv.Requests()); n != tc.requests {
				t.Fatalf("%d requests, want %d (err %v)", n, tc.requests, err)
			}
			if sl.n() != tc.requests-1 {
				t.Fatalf("slept %d times", sl.n())
			}
		})
	}
}

func TestRetryAfterMsHonoured(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Replies: []fakellm.Reply{
		{Fault: &fakellm.Fault{Status: 429, Code: "rate_limit_exceeded", RetryAfterMs: "250"}},
		{Text: "ok"},
	}})
	sl := &sleeps{}
	if _, err := newModel(t, srv, testKey, sl, nil).Generate(context.Background(), userReq("x")); err != nil {
		t.Fatal(err)
	}
	if len(sl.d) != 1 || sl.d[0] != 250*time.Millisecond {
		t.Fatalf("delays = %v", sl.d)
	}
	// The first attempt carries the SDK's own 0, the retry its number.
	for i, r := range srv.Requests() {
		if got := r.Header.Values("X-Stainless-Retry-Count"); len(got) != 1 || got[0] != []string{"0", "1"}[i] {
			t.Errorf("request %d retry count = %q", i, got)
		}
	}
}

func TestCancelMidStream(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "x", Delay: time.Minute}}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := newModel(t, srv, testKey, nil, nil).Generate(ctx, userReq("x"))
	if !errors.Is(err, agenterr.ErrCanceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestMissingKeyWithoutBaseURL(t *testing.T) {
	_, err := llm.Open(context.Background(), "openai:gpt-x", llm.Config{Getenv: func(string) string { return "" }})
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSdkAuth || !strings.Contains(e.Hint, "OPENAI_BASE_URL") {
		t.Fatalf("err = %v", err)
	}
}

func TestProcessEnvKeyIsNotSent(t *testing.T) {
	// Keys come only from Config.Getenv: a key in the process environment
	// must not be sent to a local server the config points at.
	t.Setenv("OPENAI_API_KEY", testKey)
	srv := fakellm.NewOpenAI(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "ok"}}})
	b, err := llm.Open(context.Background(), "openai:m", llm.Config{BaseURL: srv.URL, HTTPClient: srv.Client(),
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Query(context.Background(), "hi", llm.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	if h := srv.Requests()[0].Header; h.Get("Authorization") != "" {
		t.Fatalf("process key was sent: %v", h)
	}
}

// TestProcessEnvHeadersAreNotSent: the headers the SDK takes from the
// process environment (organization, project, OPENAI_CUSTOM_HEADERS) are
// not sent: a request carries only what Config says.
func TestProcessEnvHeadersAreNotSent(t *testing.T) {
	t.Setenv("OPENAI_ORG_ID", "org-env")
	t.Setenv("OPENAI_PROJECT_ID", "proj-env")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Env-One: 1\nX-Env-Two: 2")
	srv := fakellm.NewOpenAI(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "ok"}}})
	if _, err := newModel(t, srv, testKey, nil, nil).Generate(context.Background(), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	h := srv.Requests()[0].Header
	for _, name := range []string{"OpenAI-Organization", "OpenAI-Project", "X-Env-One", "X-Env-Two"} {
		if v := h.Get(name); v != "" {
			t.Errorf("%s from the process environment was sent: %q", name, v)
		}
	}
	if h.Get("Authorization") == "" { // the fake server records it redacted
		t.Errorf("the request lost its key: %v", h)
	}
}

func TestKeyNeverLeaksIntoErrorsOrJournal(t *testing.T) {
	w, err := journal.Create(t.TempDir(), "leak")
	if err != nil {
		t.Fatal(err)
	}
	srv := fakellm.NewOpenAI(t, fakellm.Options{Respond: func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Fault: &fakellm.Fault{Status: 429, Code: "rate_limit_exceeded", Message: "Rate limit reached for key " + testKey}}
	}})
	loop := llm.NewToolLoop(newModel(t, srv, testKey, &sleeps{}, event.Journal{Writer: w}), llm.Config{Events: event.Journal{Writer: w}})
	_, qerr := loop.Query(context.Background(), "hi", llm.QueryOptions{})
	if qerr == nil {
		t.Fatal("expected error")
	}
	w.Append(journal.Error, map[string]string{"error": qerr.Error()})
	_ = w.Close()
	raw, _ := os.ReadFile(w.Path())
	if !strings.Contains(string(raw), journal.ModelRetry) {
		t.Fatalf("no retry events: %s", raw)
	}
	for _, s := range []string{qerr.Error(), string(raw)} {
		if strings.Contains(s, "SECRET") {
			t.Fatalf("key leaked: %s", s)
		}
	}
}

func TestInvalidToolArgumentsBecomeAnInputErrorNotACrash(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		if len(r.LastToolResults) > 0 {
			return fakellm.Reply{Text: "tool said: " + r.LastToolResults[0]}
		}
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "Echo", Input: json.RawMessage(`{"text": "unterminated`)}}}
	}})
	w, err := journal.Create(t.TempDir(), "bad-args")
	if err != nil {
		t.Fatal(err)
	}
	loop := llm.NewToolLoop(newModel(t, srv, testKey, nil, nil), llm.Config{Tools: []tool.Tool{echoTool{}}, Events: event.Journal{Writer: w}})
	res, err := loop.Query(context.Background(), "echo", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolUses) != 1 || !res.ToolUses[0].IsError || !json.Valid(res.ToolUses[0].Input) {
		t.Fatalf("tool use = %+v", res.ToolUses)
	}
	if !strings.HasPrefix(res.Responses[0], "tool said: Error:") {
		t.Fatalf("the model was not told about the bad input: %q", res.Responses)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("journal write failed: %v", err)
	}
	_ = w.Close()
	evs, err := journal.ReadFile(w.Path())
	if err != nil || len(evs) == 0 {
		t.Fatalf("journal unreadable: %v", err)
	}
}

func TestCancelAfterStreamStarted(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "a slow, slow answer", EventDelay: time.Minute}}})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := newModel(t, srv, testKey, &sleeps{}, nil).Generate(ctx, userReq("x"))
	if !errors.Is(err, agenterr.ErrCanceled) {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("a cancelled stream was retried: %d requests", n)
	}
}

func TestTemperatureAndSeedReachTheWire(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{{Text: "a"}, {Text: "b"}}})
	m := newModel(t, srv, testKey, nil, nil)
	temp, seed := 0.0, int64(42)
	req := userReq("hi")
	req.Temperature, req.Seed = &temp, &seed
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), userReq("again")); err != nil {
		t.Fatal(err)
	}
	set, unset := string(srv.Requests()[0].Body), string(srv.Requests()[1].Body)
	if !strings.Contains(set, `"temperature":0`) || !strings.Contains(set, `"seed":42`) {
		t.Fatalf("temperature/seed not sent: %s", set)
	}
	if strings.Contains(unset, `"temperature"`) || strings.Contains(unset, `"seed"`) {
		t.Fatalf("defaults overridden: %s", unset)
	}
}

// TestConsecutiveRequestsShareAByteIdenticalPrefix: automatic prefix
// caching needs every request to start with exactly the bytes of the
// previous one (tools in the same order, the same system prompt, earlier
// messages unchanged), across the turns of a query and across queries of a
// session.
func TestConsecutiveRequestsShareAByteIdenticalPrefix(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		if len(r.LastToolResults) > 0 {
			return fakellm.Reply{Text: "done"}
		}
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "Echo", Input: json.RawMessage(`{"text":"x","b":1,"a":2}`)}}}
	}})
	env := map[string]string{"OPENAI_BASE_URL": srv.URL}
	b, err := llm.Open(context.Background(), "openai:gpt-4.1", llm.Config{Tools: []tool.Tool{echoTool{}, upperTool{}},
		HTTPClient: srv.Client(), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	session := ""
	for _, prompt := range []string{"first", "second"} {
		res, err := b.Query(context.Background(), prompt, llm.QueryOptions{SessionID: session, SystemPrompt: "be brief"})
		if err != nil {
			t.Fatal(err)
		}
		session = res.SessionID
	}
	type prompt struct {
		Tools    json.RawMessage   `json:"tools"`
		Messages []json.RawMessage `json:"messages"`
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		var prev, cur prompt
		if err := json.Unmarshal(reqs[i-1].Body, &prev); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(reqs[i].Body, &cur); err != nil {
			t.Fatal(err)
		}
		if string(prev.Tools) != string(cur.Tools) {
			t.Errorf("request %d: tools changed:\n%s\n%s", i+1, prev.Tools, cur.Tools)
		}
		if len(cur.Messages) <= len(prev.Messages) {
			t.Fatalf("request %d has %d messages, previous %d", i+1, len(cur.Messages), len(prev.Messages))
		}
		for j, m := range prev.Messages {
			if string(m) != string(cur.Messages[j]) {
				t.Errorf("request %d: message %d changed:\n%s\n%s", i+1, j, m, cur.Messages[j])
			}
		}
	}
}

type upperTool struct{ echoTool }

func (upperTool) Spec() tool.Spec {
	return tool.Spec{Name: "Upper", Description: "upper-cases text", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}
}
