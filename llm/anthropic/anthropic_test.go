package anthropic_test

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
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/anthropic"
	"github.com/capstan-dev/capstan/tool"
)

const testKey = "sk-ant-test-SECRET-0123456789"

// sleeps records the backoff delays instead of sleeping.
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

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func newModel(t *testing.T, srv *fakellm.Server, sl *sleeps, ev event.Emitter) *anthropic.Model {
	t.Helper()
	pol := llm.RetryPolicy{Rand: func() float64 { return 0 }}
	if sl != nil {
		pol.Sleep = sl.sleep
	}
	m, err := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: srv.URL, Model: "claude-test",
		HTTPClient: srv.Client(), Retry: pol, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func userReq(text string) *llm.Request {
	return &llm.Request{System: "You are terse.", Messages: []event.Message{{Role: event.RoleUser, Text: text}}}
}

func TestTextTurnStreamsAndCachesPrefix(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{
		{Text: "Hello there, 世界!", Usage: fakellm.Usage{InputTokens: 50, OutputTokens: 7, CacheReadTokens: 40, CacheWriteTokens: 3}},
	}})
	m := newModel(t, srv, nil, nil)
	req := userReq("hi")
	req.System = strings.Repeat("Be terse. ", 500) // above the 1,024-token minimum cacheable prefix
	req.Tools = []tool.Spec{
		{Name: "A", Description: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}`)},
		{Name: "B", Description: "b", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Text != "Hello there, 世界!" || resp.StopReason != "end_turn" {
		t.Fatalf("resp = %+v", resp)
	}
	want := event.Usage{InputTokens: 50, OutputTokens: 7, CacheReadTokens: 40, CacheWriteTokens: 3}
	if resp.Usage != want {
		t.Fatalf("usage = %+v, want %+v", resp.Usage, want)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if !r.Request.Stream {
		t.Error("request was not streamed")
	}
	if got := r.Header.Get("X-Api-Key"); got != "REDACTED" {
		t.Errorf("recorded key header = %q", got)
	}
	var body struct {
		System []struct {
			CacheControl *struct{ Type string } `json:"cache_control"`
		} `json:"system"`
		Tools []struct {
			Name         string                 `json:"name"`
			InputSchema  map[string]any         `json:"input_schema"`
			CacheControl *struct{ Type string } `json:"cache_control"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.System) != 1 || body.System[0].CacheControl == nil || body.System[0].CacheControl.Type != "ephemeral" {
		t.Errorf("system prompt not cached: %s", r.Body)
	}
	// The two tool definitions alone are far below the minimum cacheable
	// prefix: a marker there would be ignored by the API.
	if len(body.Tools) != 2 || body.Tools[0].CacheControl != nil || body.Tools[1].CacheControl != nil {
		t.Errorf("tools below the minimum cacheable length must not be marked: %s", r.Body)
	}
	if got := strings.Count(string(r.Body), `"cache_control"`); got != 2 {
		t.Errorf("want markers on the system prompt and the newest message, got %d: %s", got, r.Body)
	}
	if body.Tools[0].InputSchema["additionalProperties"] != false || body.Tools[0].InputSchema["required"] == nil {
		t.Errorf("input schema lost fields: %v", body.Tools[0].InputSchema)
	}
}

func TestToolCallsAndStructuredOutput(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{
		{Text: "Reading.", ToolCalls: []fakellm.ToolCall{{ID: "toolu_1", Name: "Read", Input: json.RawMessage(`{"file_path":"a/b.txt","limit":3}`)}}},
		{Structured: json.RawMessage(`{"status":"completed","next_action":"complete"}`)},
	}})
	m := newModel(t, srv, nil, nil)
	resp, err := m.Generate(context.Background(), userReq("go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.StopReason != "tool_use" {
		t.Fatalf("resp = %+v", resp)
	}
	c := resp.Message.ToolCalls[0]
	var in map[string]any
	if err := json.Unmarshal(c.Input, &in); err != nil || in["file_path"] != "a/b.txt" || c.ID != "toolu_1" || c.Name != "Read" {
		t.Fatalf("tool call = %+v (%v)", c, err)
	}
	req := userReq("go")
	req.Messages = append(req.Messages, resp.Message,
		event.Message{Role: event.RoleTool, ToolResults: []event.ToolResult{{CallID: "toolu_1", Content: "contents"}}})
	req.OutputSchema = json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}},"required":["status"],"additionalProperties":false}`)
	resp, err = m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	if err := json.Unmarshal(resp.StructuredOutput, &out); err != nil || out["status"] != "completed" {
		t.Fatalf("structured = %s (%v)", resp.StructuredOutput, err)
	}
	last := srv.Requests()[1]
	if !last.Request.HasOutputSchema || last.Request.ToolResults != 1 || last.Request.LastToolResults[0] != "contents" {
		t.Fatalf("second request = %+v", last.Request)
	}
}

func TestTranscriptAfterToolResultsThenNewPromptIsValid(t *testing.T) {
	// A query that ended at max turns leaves the transcript ending in tool
	// results; the next query appends a user prompt. The API rejects two
	// consecutive user messages, so they must be merged.
	srv := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "ok"}}})
	m := newModel(t, srv, nil, nil)
	req := &llm.Request{Messages: []event.Message{
		{Role: event.RoleUser, Text: "first"},
		{Role: event.RoleAssistant, ToolCalls: []event.ToolCall{{ID: "t1", Name: "X", Input: json.RawMessage(`{}`)}}},
		{Role: event.RoleTool, ToolResults: []event.ToolResult{{CallID: "t1", Content: "r", IsError: true}}},
		{Role: event.RoleUser, Text: "second"},
	}}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0].Request
	if got.Messages != 3 || got.LastUserText != "second" || got.ToolResults != 1 {
		t.Fatalf("wire request = %+v", got)
	}
}

// recordingTool is a real tool: it reads a file under dir.
type readTool struct{ dir string }

func (r readTool) Spec() tool.Spec {
	return tool.Spec{Name: "Read", Description: "read a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}`)}
}
func (readTool) Kind() tool.Kind { return tool.KindRead }
func (r readTool) Run(_ context.Context, in json.RawMessage) (tool.Result, error) {
	var a struct {
		FilePath string `json:"file_path"`
	}
	if err := json.Unmarshal(in, &a); err != nil {
		return tool.Result{Content: err.Error(), IsError: true}, nil
	}
	b, err := os.ReadFile(filepath.Join(r.dir, filepath.Base(a.FilePath)))
	if err != nil {
		return tool.Result{Content: err.Error(), IsError: true}, nil
	}
	return tool.Result{Content: string(b)}, nil
}

func TestToolLoopEndToEndThroughOpen(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the answer is 42"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The fake model reads notes.txt, then repeats what the tool returned:
	// the answer can only reach the final text through the real tool, the
	// tool loop and the wire mapping of tool results.
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: testKey, Respond: func(r fakellm.Request) fakellm.Reply {
		if len(r.LastToolResults) > 0 {
			return fakellm.Reply{Text: "The file says: " + r.LastToolResults[0]}
		}
		if r.ToolResults == 0 {
			return fakellm.Reply{Text: "Let me look.", ToolCalls: []fakellm.ToolCall{{Name: "Read", Input: json.RawMessage(`{"file_path":"notes.txt"}`)}}}
		}
		return fakellm.Reply{Text: "again: " + r.LastUserText}
	}})
	env := map[string]string{"ANTHROPIC_API_KEY": testKey, "ANTHROPIC_BASE_URL": srv.URL}
	b, err := llm.Open(context.Background(), "anthropic:claude-test", llm.Config{WorkDir: dir, Tools: []tool.Tool{readTool{dir}},
		Getenv: func(k string) string { return env[k] }, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := b.Query(context.Background(), "what does notes.txt say?", llm.QueryOptions{SystemPrompt: "sys"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Turns != 2 || len(res.ToolUses) != 1 || res.ToolUses[0].Output != "the answer is 42" {
		t.Fatalf("result = %+v", res)
	}
	if got := res.Responses[len(res.Responses)-1]; got != "The file says: the answer is 42" {
		t.Fatalf("final text = %q", got)
	}
	if res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 {
		t.Fatalf("usage not counted: %+v", res.Usage)
	}
	// Second query in the same session carries the transcript.
	res2, err := b.Query(context.Background(), "and again?", llm.QueryOptions{SessionID: res.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if res2.SessionID != res.SessionID {
		t.Fatalf("session changed: %s -> %s", res.SessionID, res2.SessionID)
	}
	if got := srv.Requests()[2].Request.Messages; got != 5 {
		t.Fatalf("resumed request has %d messages, want 5", got)
	}
}

func TestRateLimitHonoursRetryAfterThenSucceeds(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{
		{Fault: &fakellm.Fault{Status: 429, RetryAfter: "2"}},
		{Fault: &fakellm.Fault{Status: 529}},
		{Text: "finally"},
	}})
	sl := &sleeps{}
	m := newModel(t, srv, sl, nil)
	resp, err := m.Generate(context.Background(), userReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Text != "finally" {
		t.Fatalf("text = %q", resp.Message.Text)
	}
	d := sl.all()
	// retry-after: 2 is honoured; the 529 has none: 500ms·2^(2-1) = 1s (jitter 0).
	if len(d) != 2 || d[0] != 2*time.Second || d[1] != time.Second {
		t.Fatalf("delays = %v", d)
	}
	reqs := srv.Requests()
	for i, r := range reqs {
		if got := r.Header.Values("X-Stainless-Retry-Count"); len(got) != 1 || got[0] != []string{"0", "1", "2"}[i] {
			t.Errorf("request %d retry count = %q", i, got)
		}
	}
}

func TestFaultsMapToCodes(t *testing.T) {
	cases := []struct {
		name        string
		fault       fakellm.Fault
		code        string
		recoverable bool
		requests    int
	}{
		{"rate limit exhausted", fakellm.Fault{Status: 429, RetryAfterMs: "1"}, agenterr.CodeSdkRateLimit, true, 4},
		{"overloaded", fakellm.Fault{Status: 529}, agenterr.CodeSdkConnection, true, 4},
		{"server error", fakellm.Fault{Status: 500}, agenterr.CodeSdkConnection, true, 4},
		{"dropped stream", fakellm.Fault{CutAfter: 3}, agenterr.CodeSdkConnection, true, 4},
		{"stream error event", fakellm.Fault{ErrorEventAfter: 2}, agenterr.CodeSdkConnection, true, 4},
		{"stream rate limit event", fakellm.Fault{ErrorEventAfter: 1, Type: "rate_limit_error"}, agenterr.CodeSdkRateLimit, true, 4},
		{"malformed stream line", fakellm.Fault{MalformedAfter: 2}, agenterr.CodeSdkConnection, true, 4},
		{"auth", fakellm.Fault{Status: 401}, agenterr.CodeSdkAuth, false, 1},
		{"forbidden", fakellm.Fault{Status: 403}, agenterr.CodeSdkAuth, false, 1},
		{"bad request", fakellm.Fault{Status: 400, Message: "max_tokens: too large"}, agenterr.CodeSdkRequest, false, 1},
		{"not found", fakellm.Fault{Status: 404}, agenterr.CodeSdkRequest, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fault
			srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(fakellm.Request) fakellm.Reply {
				return fakellm.Reply{Text: "partial text that will be cut", Fault: &f}
			}})
			sl := &sleeps{}
			_, err := newModel(t, srv, sl, nil).Generate(context.Background(), userReq("x"))
			e := agenterr.From(err)
			if e == nil || e.Code != tc.code || e.Recoverable != tc.recoverable || e.Layer != agenterr.LayerSDKBridge {
				t.Fatalf("err = %#v", err)
			}
			if e.Hint == "" && tc.code != agenterr.CodeSdkRequest {
				t.Errorf("no hint: %v", err)
			}
			if n := len(srv.Requests()); n != tc.requests {
				t.Fatalf("%d requests, want %d", n, tc.requests)
			}
			if len(sl.all()) != tc.requests-1 {
				t.Fatalf("slept %d times", len(sl.all()))
			}
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "slow", Delay: time.Minute}}})
	m := newModel(t, srv, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	done := make(chan error, 1)
	go func() { _, err := m.Generate(ctx, userReq("x")); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, agenterr.ErrCanceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Generate did not return after cancel")
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Fault: &fakellm.Fault{Status: 429, RetryAfter: "30"}}
	}})
	m, err := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	// Canceled (Ctrl-C) while it waits out the retry-after.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	defer cancel()
	_, err = m.Generate(ctx, userReq("x"))
	if !errors.Is(err, agenterr.ErrCanceled) {
		t.Fatalf("err = %v", err)
	}
	// A retry-after past the context's deadline (the run's time budget)
	// ends the call at once, recoverable, instead of waiting to be cut.
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	start := time.Now()
	_, err = m.Generate(dctx, userReq("x"))
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeSdkRateLimit || !e.Recoverable || time.Since(start) > 4*time.Second {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
}

func TestMissingKeyIsAuthErrorWithHint(t *testing.T) {
	_, err := llm.Open(context.Background(), "anthropic:x", llm.Config{Getenv: func(string) string { return "" }})
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSdkAuth || !strings.Contains(e.Hint, "ANTHROPIC_API_KEY") {
		t.Fatalf("err = %v", err)
	}
}

func TestBaseURLPrecedence(t *testing.T) {
	good := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "from config"}}})
	env := map[string]string{"ANTHROPIC_API_KEY": testKey, "ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}
	b, err := llm.Open(context.Background(), "anthropic:m", llm.Config{BaseURL: good.URL,
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Query(context.Background(), "hi", llm.QueryOptions{})
	if err != nil || res.Responses[0] != "from config" {
		t.Fatalf("res=%+v err=%v", res, err)
	}
}

func TestKeyNeverLeaksIntoErrorsOrJournal(t *testing.T) {
	dir := t.TempDir()
	w, err := journal.Create(dir, "run-leak")
	if err != nil {
		t.Fatal(err)
	}
	// A hostile or buggy gateway echoes the key in its error messages.
	var n int
	var mu sync.Mutex
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: testKey, Respond: func(fakellm.Request) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		n++
		switch n % 3 {
		case 0:
			return fakellm.Reply{Fault: &fakellm.Fault{Status: 429, RetryAfterMs: "0", Message: "key " + testKey + " is throttled"}}
		case 1:
			return fakellm.Reply{Fault: &fakellm.Fault{ErrorEventAfter: 1, Message: "overloaded for " + testKey}}
		}
		return fakellm.Reply{Fault: &fakellm.Fault{Status: 500, Message: testKey}}
	}})
	b := llm.NewToolLoop(newModel(t, srv, &sleeps{}, event.Journal{Writer: w}), llm.Config{Events: event.Journal{Writer: w}})
	var errs []string
	for i := 0; i < 3; i++ {
		_, err := b.Query(context.Background(), "hi", llm.QueryOptions{})
		if err == nil {
			t.Fatal("expected an error")
		}
		errs = append(errs, err.Error())
		w.Append(journal.Error, map[string]string{"error": err.Error()})
	}
	// an auth failure too
	bad, _ := anthropic.New(anthropic.Config{APIKey: testKey + "x", BaseURL: srv.URL, HTTPClient: srv.Client(), Events: event.Journal{Writer: w}})
	_, err = bad.Generate(context.Background(), userReq("x"))
	if agenterr.CodeOf(err) != agenterr.CodeSdkAuth {
		t.Fatalf("err = %v", err)
	}
	errs = append(errs, err.Error())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), journal.ModelRetry) {
		t.Fatalf("no retry events journaled:\n%s", raw)
	}
	for _, s := range append(errs, string(raw)) {
		if strings.Contains(s, testKey) || strings.Contains(s, "SECRET") {
			t.Fatalf("key leaked: %s", s)
		}
	}
	for _, r := range srv.Requests() {
		for k, v := range r.Header {
			if strings.Contains(strings.Join(v, ","), "SECRET") {
				t.Fatalf("recorded header %s leaks the key", k)
			}
		}
	}
}

func TestThinkingBlocksAreEchoedBackAndSurviveResume(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("forty-two"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		if len(r.LastToolResults) > 0 {
			return fakellm.Reply{Text: "It says " + r.LastToolResults[0]}
		}
		return fakellm.Reply{Thinking: "I should read the notes first.", ToolCalls: []fakellm.ToolCall{{Name: "Read", Input: json.RawMessage(`{"file_path":"notes.txt"}`)}}}
	}})
	w, err := journal.Create(dir, "think")
	if err != nil {
		t.Fatal(err)
	}
	loop := llm.NewToolLoop(newModel(t, srv, nil, nil), llm.Config{Tools: []tool.Tool{readTool{dir}}, Events: event.Journal{Writer: w}})
	res, err := loop.Query(context.Background(), "read notes", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err) // the fake answers 400 if the thinking block was dropped
	}
	if got := res.Responses[len(res.Responses)-1]; got != "It says forty-two" {
		t.Fatalf("final = %q", got)
	}
	for _, r := range res.Responses {
		if strings.Contains(r, "read the notes first") {
			t.Fatal("thinking text leaked into the responses")
		}
	}
	// Resume from the journal in a new bridge: the thinking block must
	// still be sent back.
	_ = w.Close()
	evs, err := journal.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	transcripts := map[string][]event.Message{}
	for _, ev := range evs {
		if ev.Type != journal.SessionMessages {
			continue
		}
		var sm event.SessionMessagesEvent
		if err := json.Unmarshal(ev.Data, &sm); err != nil {
			t.Fatal(err)
		}
		transcripts[sm.SessionID] = append(transcripts[sm.SessionID], sm.Messages...)
	}
	loop2 := llm.NewToolLoop(newModel(t, srv, nil, nil), llm.Config{Tools: []tool.Tool{readTool{dir}}, Transcripts: transcripts})
	res2, err := loop2.Query(context.Background(), "and once more", llm.QueryOptions{SessionID: res.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if res2.SessionRenewed || res2.SessionID != res.SessionID {
		t.Fatalf("resume lost the session: %+v", res2)
	}
	last := srv.Requests()[len(srv.Requests())-1]
	if !strings.Contains(string(last.Body), `"signature":"sig_`) {
		t.Fatalf("resumed request lacks the thinking block: %s", last.Body)
	}
}

func TestAuthTokenForGateways(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: "gw-token-123", Replies: []fakellm.Reply{{Text: "via gateway"}}})
	env := map[string]string{"ANTHROPIC_AUTH_TOKEN": "gw-token-123", "ANTHROPIC_BASE_URL": srv.URL}
	b, err := llm.Open(context.Background(), "anthropic:m", llm.Config{HTTPClient: srv.Client(), Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Query(context.Background(), "hi", llm.QueryOptions{})
	if err != nil || res.Responses[0] != "via gateway" {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	h := srv.Requests()[0].Header
	if h.Get("Authorization") != "REDACTED" || h.Get("X-Api-Key") != "" {
		t.Fatalf("headers = %v", h)
	}
}

func TestCancelAfterStreamStarted(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "a slow, slow answer", EventDelay: time.Minute}}})
	m := newModel(t, srv, &sleeps{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Generate(ctx, userReq("x"))
	if !errors.Is(err, agenterr.ErrCanceled) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatal("cancel did not interrupt the stream")
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("a cancelled stream was retried: %d requests", n)
	}
}

func TestConcurrentTurnsShareOneModel(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Text: "echo " + r.LastUserText}
	}})
	m := newModel(t, srv, nil, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := fmt.Sprintf("prompt-%d", i)
			resp, err := m.Generate(context.Background(), userReq(p))
			if err != nil {
				errs <- err
				return
			}
			if resp.Message.Text != "echo "+p {
				errs <- fmt.Errorf("crossed answers: %q for %q", resp.Message.Text, p)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRefusalIsNotStructuredOutput(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{
		{Text: `{"status":"completed"}`, StopReason: "refusal"},
	}})
	req := userReq("x")
	req.OutputSchema = json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}},"required":["status"],"additionalProperties":false}`)
	resp, err := newModel(t, srv, nil, nil).Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != "refusal" || resp.StructuredOutput != nil {
		t.Fatalf("a refusal was taken as a structured answer: %+v", resp)
	}
}

func TestTemperatureReachesTheWire(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: testKey, Replies: []fakellm.Reply{{Text: "a"}, {Text: "b"}}})
	m := newModel(t, srv, nil, nil)
	temp, seed := 0.0, int64(42)
	req := userReq("hi")
	req.Temperature, req.Seed = &temp, &seed // the Messages API has no seed: ignored
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), userReq("again")); err != nil {
		t.Fatal(err)
	}
	set, unset := string(srv.Requests()[0].Body), string(srv.Requests()[1].Body)
	if !strings.Contains(set, `"temperature":0`) || strings.Contains(set, `"seed"`) {
		t.Fatalf("request: %s", set)
	}
	if strings.Contains(unset, `"temperature"`) {
		t.Fatalf("default overridden: %s", unset)
	}
}

// TestCacheReadSurvivesATurnOfManyParallelToolCalls: a turn with 25
// parallel tool calls adds 50 blocks, beyond the API's 20-block lookback;
// the marker on the previous turn's newest message still lets the next
// request read everything the previous one wrote.
func TestCacheReadSurvivesATurnOfManyParallelToolCalls(t *testing.T) {
	var calls []fakellm.ToolCall
	for i := 0; i < 25; i++ {
		calls = append(calls, fakellm.ToolCall{ID: fmt.Sprintf("toolu_%02d", i), Name: "Read", Input: json.RawMessage(`{"file_path":"a.txt"}`)})
	}
	srv := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{{ToolCalls: calls}, {Text: "done"}}})
	m := newModel(t, srv, nil, nil)
	req := userReq(strings.Repeat("Read the files and summarize them. ", 200)) // above the minimum cacheable length
	first, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	results := event.Message{Role: event.RoleTool}
	for _, c := range first.Message.ToolCalls {
		results.ToolResults = append(results.ToolResults, event.ToolResult{CallID: c.ID, Name: c.Name, Content: "file contents"})
	}
	req.Messages = append(req.Messages, first.Message, results)
	second, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.CacheWriteTokens == 0 || second.Usage.CacheReadTokens < first.Usage.CacheWriteTokens {
		t.Fatalf("first turn wrote %d tokens, second read %d: the second request missed the cache",
			first.Usage.CacheWriteTokens, second.Usage.CacheReadTokens)
	}
	if n := strings.Count(string(srv.Requests()[1].Body), `"cache_control"`); n > fakellm.MaxCacheBreakpoints {
		t.Fatalf("%d cache markers", n)
	}
}

// failedStream is a reply whose stream fails after message_start (which
// reports the request's input) and a few fragments of text.
func failedStream(cut fakellm.Fault) fakellm.Reply {
	return fakellm.Reply{Text: "an answer that breaks off half way", ChunkSize: 4,
		Usage: fakellm.Usage{InputTokens: 1000, CacheReadTokens: 500, OutputTokens: 40}, Fault: &cut}
}

// TestUsageOfFailedAttemptsCounts: an attempt whose stream failed after
// message_start was billed for its input (and the output it streamed);
// when a retry succeeds, the response's usage holds the failed attempt's
// too, and when every attempt fails, the error carries it
// (llm.BilledUsage) so the tool loop counts it in the query's usage.
func TestUsageOfFailedAttemptsCounts(t *testing.T) {
	srv := fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{
		failedStream(fakellm.Fault{ErrorEventAfter: 4}),
		{Fault: &fakellm.Fault{Status: 529}}, // refused before any message: nothing billed
		failedStream(fakellm.Fault{CutAfter: 4}),
		{Text: "whole", Usage: fakellm.Usage{InputTokens: 1000, CacheReadTokens: 500, OutputTokens: 7}},
	}})
	resp, err := newModel(t, srv, &sleeps{}, nil).Generate(context.Background(), userReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	// Each failed attempt: its message_start's usage (output 1).
	if want := (event.Usage{InputTokens: 3000, CacheReadTokens: 1500, OutputTokens: 9}); resp.Usage != want || resp.Message.Text != "whole" {
		t.Fatalf("usage %+v, want %+v (text %q)", resp.Usage, want, resp.Message.Text)
	}

	srv = fakellm.NewAnthropic(t, fakellm.Options{Replies: []fakellm.Reply{
		failedStream(fakellm.Fault{ErrorEventAfter: 4}),
		{Fault: &fakellm.Fault{Status: 529}},
		failedStream(fakellm.Fault{MalformedAfter: 3}),
		{Fault: &fakellm.Fault{Status: 529}},
	}})
	loop := llm.NewToolLoop(newModel(t, srv, &sleeps{}, nil), llm.Config{})
	res, err := loop.Query(context.Background(), "x", llm.QueryOptions{})
	if agenterr.CodeOf(err) != agenterr.CodeSdkConnection {
		t.Fatalf("error %v", err)
	}
	want := event.Usage{InputTokens: 2000, CacheReadTokens: 1000, OutputTokens: 2}
	if got := llm.BilledUsage(err); got != want {
		t.Errorf("billed usage of the error %+v, want %+v", got, want)
	}
	if res == nil || res.Usage != want {
		t.Fatalf("query result %+v, want usage %+v", res, want)
	}
}
