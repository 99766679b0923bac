package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/script"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/builtin"
)

// recorder wraps a Model and keeps a deep copy of every request it saw.
type recorder struct {
	llm.Model
	mu   sync.Mutex
	reqs []llm.Request
}

func (r *recorder) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	cp := *req
	cp.Messages = append([]event.Message(nil), req.Messages...)
	cp.Tools = append([]tool.Spec(nil), req.Tools...)
	r.mu.Lock()
	r.reqs = append(r.reqs, cp)
	r.mu.Unlock()
	return r.Model.Generate(ctx, req)
}

func (r *recorder) requests() []llm.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]llm.Request(nil), r.reqs...)
}

// fixture is a work dir with the real built-in tools, a file journal and a
// scripted model.
type fixture struct {
	t       *testing.T
	work    string
	journal *journal.Writer
	rec     *recorder
	loop    *llm.ToolLoop
	cfg     llm.Config
}

func newFixture(t *testing.T, scriptYAML string, mod ...func(*llm.Config)) *fixture {
	t.Helper()
	work := t.TempDir()
	tools, err := builtin.New(builtin.Config{WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	jw, err := journal.Create(work, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jw.Close() })
	s, err := script.Parse("test.yaml", []byte(scriptYAML))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Model: script.New(s)}
	cfg := llm.Config{Model: "scripted", WorkDir: work, Tools: tools, Events: event.Journal{Writer: jw}}
	for _, m := range mod {
		m(&cfg)
	}
	return &fixture{t: t, work: work, journal: jw, rec: rec, loop: llm.NewToolLoop(rec, cfg), cfg: cfg}
}

func (f *fixture) events(typ string) []journal.Event {
	f.t.Helper()
	evs, err := journal.ReadFile(f.journal.Path())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []journal.Event
	for _, e := range evs {
		if typ == "" || e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

var writeAll = llm.QueryOptions{PermissionMode: tool.ModeBypassPermissions}

func TestToolLoopWritesThenReadsBack(t *testing.T) {
	f := newFixture(t, `turns:
  - text: "I'll write the file."
    tool_calls:
      - name: Write
        input: {file_path: notes/hello.txt, content: "hi there\n"}
  - tool_calls:
      - name: Read
        input: {file_path: notes/hello.txt}
  - text: "The file says hi. TASK_COMPLETE"
`)
	res, err := f.loop.Query(context.Background(), "write hello", writeAll)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.work, "notes/hello.txt")); err != nil || string(b) != "hi there\n" {
		t.Fatalf("file = %q, %v", b, err)
	}
	if res.Turns != 3 || len(res.ToolUses) != 2 || res.StopReason != "end_turn" {
		t.Fatalf("result %+v", res)
	}
	if got := strings.Join(res.Responses, "|"); got != "I'll write the file.|The file says hi. TASK_COMPLETE" {
		t.Errorf("responses %q", got)
	}
	if u := res.ToolUses[1]; u.Name != "Read" || u.IsError || u.Output != "     1\thi there\n" {
		t.Errorf("read use %+v", u)
	}
	if res.Usage.InputTokens <= 0 || res.Usage.OutputTokens <= 0 {
		t.Errorf("usage %+v", res.Usage)
	}
	// The model saw the tool results, in order, answering its call ids.
	reqs := f.rec.requests()
	last := reqs[2].Messages
	if len(last) != 5 || last[0].Role != event.RoleUser || last[4].Role != event.RoleTool {
		t.Fatalf("third request transcript: %+v", last)
	}
	tr := last[4].ToolResults[0]
	if tr.CallID != last[3].ToolCalls[0].ID || !strings.Contains(tr.Content, "hi there") {
		t.Errorf("tool result %+v for call %+v", tr, last[3].ToolCalls[0])
	}
	// All six tools were offered in bypass mode.
	if len(reqs[0].Tools) != 6 {
		t.Errorf("%d tools offered", len(reqs[0].Tools))
	}
	if n := len(f.events(journal.ToolCall)); n != 2 {
		t.Errorf("%d tool.call events", n)
	}
	if n := len(f.events(journal.ModelTurn)); n != 3 {
		t.Errorf("%d model.turn events", n)
	}
}

func TestToolLoopDeniedCallIsJournaledNotRun(t *testing.T) {
	f := newFixture(t, `turns:
  - tool_calls:
      - name: Write
        input: {file_path: plan.txt, content: "should not exist"}
  - expect: {prompt_contains: ["make a plan"]}
    text: "Understood, I cannot write in plan mode."
`)
	res, err := f.loop.Query(context.Background(), "make a plan", llm.QueryOptions{PermissionMode: tool.ModePlan, AllowedTools: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.work, "plan.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("denied Write ran: %v", err)
	}
	u := res.ToolUses[0]
	if !u.Denied || !u.IsError || !strings.Contains(u.Output, "permission denied") || !strings.Contains(u.Output, "plan") {
		t.Errorf("use %+v", u)
	}
	denied := f.events(journal.ToolDenied)
	if len(denied) != 1 || len(f.events(journal.ToolCall)) != 0 {
		t.Fatalf("journal: %d denied, %d calls", len(denied), len(f.events(journal.ToolCall)))
	}
	var ev event.ToolUse
	if err := json.Unmarshal(denied[0].Data, &ev); err != nil || ev.Name != "Write" || !ev.Denied {
		t.Errorf("denied event %s", denied[0].Data)
	}
	reqs := f.rec.requests()
	for _, s := range reqs[0].Tools {
		if s.Name == "Write" || s.Name == "Edit" || s.Name == "Bash" {
			t.Errorf("plan mode offered %s", s.Name)
		}
	}
	seen := reqs[1].Messages[2].ToolResults[0]
	if !seen.IsError || !strings.Contains(seen.Content, "permission denied") {
		t.Errorf("model saw %+v", seen)
	}
}

func TestToolLoopDisallowedAndAllowedTools(t *testing.T) {
	f := newFixture(t, `turns:
  - tool_calls:
      - {name: Bash, input: {command: "echo allowed"}}
      - {name: Bash, input: {command: "echo chained; touch pwned"}}
      - {name: Bash, input: {command: "rm -f x"}}
      - {name: Write, input: {file_path: w.txt, content: x}}
  - text: done
`)
	res, err := f.loop.Query(context.Background(), "go", llm.QueryOptions{
		AllowedTools:    []string{"Read", "Bash(echo:*)", "Bash(rm:*)", "Write"},
		DisallowedTools: []string{"Bash(rm:*)"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		denied bool
		out    string
	}{{false, "allowed"}, {true, "not matched by allowedTools"}, {true, "disallowedTools"}, {false, "Created w.txt"}}
	for i, w := range want {
		u := res.ToolUses[i]
		if u.Denied != w.denied || !strings.Contains(u.Output, w.out) {
			t.Errorf("use %d: %+v", i, u)
		}
	}
	if _, err := os.Stat(filepath.Join(f.work, "pwned")); err == nil {
		t.Error("chained command ran")
	}
}

func TestToolLoopUnknownToolListsTools(t *testing.T) {
	f := newFixture(t, "turns:\n  - tool_calls: [{name: Delete, input: {file_path: x}}]\n  - text: ok\n")
	res, err := f.loop.Query(context.Background(), "go", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := res.ToolUses[0]
	if !u.IsError || u.Output != `unknown tool "Delete"; available tools: Glob, Grep, Read` {
		t.Errorf("use %+v", u)
	}
}

func TestToolLoopMaxTurns(t *testing.T) {
	f := newFixture(t, `turns:
  - tool_calls: [{name: Glob, input: {pattern: "*"}}]
  - tool_calls: [{name: Glob, input: {pattern: "*"}}]
  - tool_calls: [{name: Glob, input: {pattern: "*"}}]
  - text: never reached
`)
	res, err := f.loop.Query(context.Background(), "loop", llm.QueryOptions{MaxTurns: 2})
	if !errors.Is(err, agenterr.ErrMaxTurns) || !agenterr.IsRecoverable(err) {
		t.Fatalf("err = %v", err)
	}
	if res == nil || res.Turns != 2 || len(res.ToolUses) != 2 || res.SessionID == "" {
		t.Fatalf("partial result %+v", res)
	}
	// Config.MaxTurns applies when the query sets none.
	f2 := newFixture(t, "turns:\n  - tool_calls: [{name: Glob, input: {pattern: x}}]\n  - text: a\n", func(c *llm.Config) { c.MaxTurns = 1 })
	if _, err := f2.loop.Query(context.Background(), "x", llm.QueryOptions{}); !errors.Is(err, agenterr.ErrMaxTurns) {
		t.Errorf("config max turns: %v", err)
	}
}

func TestToolLoopSessions(t *testing.T) {
	f := newFixture(t, `turns:
  - tool_calls: [{name: Write, input: {file_path: a.txt, content: "one"}}]
  - text: first answer
  - expect: {prompt_contains: ["second prompt"]}
    text: second answer
  - text: fresh session answer
`)
	ctx := context.Background()
	r1, err := f.loop.Query(ctx, "first prompt", writeAll)
	if err != nil {
		t.Fatal(err)
	}
	opts := writeAll
	opts.SessionID = r1.SessionID
	r2, err := f.loop.Query(ctx, "second prompt", opts)
	if err != nil {
		t.Fatal(err)
	}
	if r2.SessionID != r1.SessionID || r2.SessionRenewed || f.loop.SessionID() != r1.SessionID {
		t.Fatalf("session %q → %q (renewed %v)", r1.SessionID, r2.SessionID, r2.SessionRenewed)
	}
	third := f.rec.requests()[2].Messages
	var roles []string
	for _, m := range third {
		roles = append(roles, string(m.Role))
	}
	if strings.Join(roles, ",") != "user,assistant,tool,assistant,user" || third[0].Text != "first prompt" || third[3].Text != "first answer" {
		t.Fatalf("second query transcript: %v %+v", roles, third)
	}
	// An unknown session is renewed with an empty history.
	opts.SessionID = "sess-unknown"
	r3, err := f.loop.Query(ctx, "third prompt", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r3.SessionRenewed || r3.SessionID == "sess-unknown" || r3.SessionID == r1.SessionID {
		t.Fatalf("renewal: %+v", r3)
	}
	if msgs := f.rec.requests()[3].Messages; len(msgs) != 1 || msgs[0].Text != "third prompt" {
		t.Fatalf("renewed session carried history: %+v", msgs)
	}

	// The journal rebuilds every session's transcript exactly.
	rebuilt := llm.TranscriptsFromEvents(f.events(""))
	for _, sid := range []string{r1.SessionID, r3.SessionID} {
		if !reflect.DeepEqual(rebuilt[sid], f.loop.Transcript(sid)) {
			t.Errorf("session %s: rebuilt\n%+v\nlive\n%+v", sid, rebuilt[sid], f.loop.Transcript(sid))
		}
	}
	if len(rebuilt) != 2 || len(rebuilt[r1.SessionID]) != 6 {
		t.Fatalf("rebuilt %d sessions, %d messages", len(rebuilt), len(rebuilt[r1.SessionID]))
	}

	// Resume: a new loop seeded from the journal continues the session.
	s, _ := script.Parse("resume.yaml", []byte("turns:\n  - expect: {prompt_contains: [resumed]}\n    text: continuing\n"))
	rec := &recorder{Model: script.New(s)}
	cfg := f.cfg
	cfg.Transcripts = rebuilt
	cfg.Events = event.Discard
	resumed := llm.NewToolLoop(rec, cfg)
	opts.SessionID = r1.SessionID
	r4, err := resumed.Query(ctx, "resumed prompt", opts)
	if err != nil || r4.SessionRenewed || r4.SessionID != r1.SessionID {
		t.Fatalf("resume: %+v %v", r4, err)
	}
	if msgs := rec.requests()[0].Messages; len(msgs) != 7 || msgs[3].Text != "first answer" {
		t.Fatalf("resumed transcript: %+v", msgs)
	}
}

func TestTranscriptsFromEventsIgnoresNoise(t *testing.T) {
	good, _ := json.Marshal(event.SessionMessagesEvent{SessionID: "s1", Messages: []event.Message{{Role: event.RoleUser, Text: "a"}}})
	more, _ := json.Marshal(event.SessionMessagesEvent{SessionID: "s1", Messages: []event.Message{{Role: event.RoleAssistant, Text: "b"}}})
	evs := []journal.Event{
		{Type: journal.SessionMessages, Data: good},
		{Type: journal.ToolCall, Data: good},
		{Type: journal.SessionMessages, Data: json.RawMessage(`{"session_id": 5}`)},
		{Type: journal.SessionMessages, Data: json.RawMessage(`{"messages": []}`)},
		{Type: journal.SessionMessages},
		{Type: journal.SessionMessages, Data: more},
	}
	got := llm.TranscriptsFromEvents(evs)
	if len(got) != 1 || len(got["s1"]) != 2 || got["s1"][1].Text != "b" {
		t.Fatalf("%+v", got)
	}
}

func TestToolLoopModelErrors(t *testing.T) {
	f := newFixture(t, `turns:
  - tool_calls: [{name: Glob, input: {pattern: "*"}}]
  - error: {type: rate_limit, retry_after_seconds: 3}
`)
	res, err := f.loop.Query(context.Background(), "go", llm.QueryOptions{})
	if !errors.Is(err, agenterr.ErrSdkRateLimit) || !agenterr.IsRecoverable(err) {
		t.Fatalf("err = %v", err)
	}
	if res == nil || res.Turns != 2 || len(res.ToolUses) != 1 || res.Usage.InputTokens == 0 {
		t.Errorf("partial result %+v", res)
	}
	if n := len(f.events(journal.SessionMessages)); n != 0 {
		t.Errorf("failed query committed a transcript (%d events)", n)
	}
	_, err = f.loop.Query(context.Background(), "again", llm.QueryOptions{})
	if !errors.Is(err, agenterr.ErrScriptExhausted) {
		t.Errorf("exhausted: %v", err)
	}
	if _, err := f.loop.Query(context.Background(), "  ", llm.QueryOptions{}); agenterr.CodeOf(err) != agenterr.CodeSdkRequest {
		t.Errorf("empty prompt: %v", err)
	}
}

func TestToolLoopStructuredOutput(t *testing.T) {
	f := newFixture(t, `turns:
  - tool_calls: [{name: Glob, input: {pattern: "*"}}]
  - structured: {status: completed, next_action: {action: closing}}
`)
	res, err := f.loop.Query(context.Background(), "go", llm.QueryOptions{OutputSchema: json.RawMessage(`{"type":"object"}`), OutputName: "verdict"})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(res.StructuredOutput, &v); err != nil || v.Status != "completed" {
		t.Fatalf("structured %s", res.StructuredOutput)
	}
	if r := f.rec.requests()[0]; string(r.OutputSchema) != `{"type":"object"}` || r.OutputSchemaName != "verdict" {
		t.Errorf("schema not passed to the model: %+v", r)
	}
}

// panicTool panics; bigTool returns more than MaxToolOutput; slowTool
// cancels the query's context while it runs.
type testTool struct {
	name string
	run  func(ctx context.Context) (tool.Result, error)
}

func (t testTool) Spec() tool.Spec {
	return tool.Spec{Name: t.name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (t testTool) Kind() tool.Kind { return tool.KindRead }
func (t testTool) Run(ctx context.Context, _ json.RawMessage) (tool.Result, error) {
	return t.run(ctx)
}

func TestToolLoopToolFailures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tools := []tool.Tool{
		testTool{"Panic", func(context.Context) (tool.Result, error) { panic("boom") }},
		testTool{"Big", func(context.Context) (tool.Result, error) {
			return tool.Result{Content: strings.Repeat("é", llm.MaxToolOutput)}, nil
		}},
		testTool{"Fails", func(context.Context) (tool.Result, error) { return tool.Result{}, errors.New("disk on fire") }},
		testTool{"Cancel", func(context.Context) (tool.Result, error) { cancel(); return tool.Result{Content: "ok"}, nil }},
	}
	s, _ := script.Parse("t.yaml", []byte(`turns:
  - tool_calls: [{name: Panic}, {name: Big}, {name: Fails}]
  - tool_calls: [{name: Cancel}]
  - text: unreachable
`))
	loop := llm.NewToolLoop(script.New(s), llm.Config{Tools: tools})
	res, err := loop.Query(ctx, "go", llm.QueryOptions{})
	if agenterr.CodeOf(err) != agenterr.CodeCanceled {
		t.Fatalf("err = %v", err)
	}
	u := res.ToolUses
	if len(u) != 4 {
		t.Fatalf("%d uses", len(u))
	}
	if !u[0].IsError || !strings.Contains(u[0].Output, "boom") {
		t.Errorf("panic: %+v", u[0])
	}
	if len(u[1].Output) > llm.MaxToolOutput+64 || !strings.Contains(u[1].Output, "[output truncated: 204800 bytes total]") || strings.ContainsRune(u[1].Output, '\uFFFD') {
		t.Errorf("big: %d bytes, tail %q", len(u[1].Output), u[1].Output[len(u[1].Output)-60:])
	}
	if !u[2].IsError || !strings.Contains(u[2].Output, "disk on fire") {
		t.Errorf("fails: %+v", u[2])
	}
}

func TestOpenScriptWithBuiltinTools(t *testing.T) {
	agentDir, work := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(agentDir, "script.yaml"), []byte(`turns:
  - tool_calls: [{name: Bash, input: {command: "echo from-bash > out.txt"}}]
  - text: done
`), 0o644)
	tools, err := builtin.New(builtin.Config{WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	b, err := llm.Open(context.Background(), "script", llm.Config{AgentDir: agentDir, WorkDir: work, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := b.Query(context.Background(), "run it", llm.QueryOptions{AllowedTools: []string{"Bash(echo:*)"}})
	if err != nil {
		t.Fatal(err)
	}
	// The redirect makes the prefix rule refuse the command.
	if !res.ToolUses[0].Denied {
		t.Fatalf("redirected command was allowed: %+v", res.ToolUses[0])
	}
	if _, err := os.Stat(filepath.Join(work, "out.txt")); err == nil {
		t.Fatal("denied command ran")
	}
	if b.SessionID() != res.SessionID {
		t.Error("SessionID mismatch")
	}
}

func TestToolLoopConcurrentSessions(t *testing.T) {
	var b strings.Builder
	b.WriteString("turns:\n")
	for i := 0; i < 16; i++ {
		b.WriteString("  - tool_calls: [{name: Glob, input: {pattern: \"*\"}}]\n  - text: answer\n")
	}
	f := newFixture(t, b.String())
	// Turns are shared, so concurrent queries get an arbitrary mix of
	// tool-call and text turns; every query must still end with its own
	// session and a consistent transcript.
	var wg sync.WaitGroup
	results := make([]*event.QueryResult, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = f.loop.Query(context.Background(), "concurrent", llm.QueryOptions{MaxTurns: 32})
		}(i)
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("query %d: %v", i, errs[i])
		}
		if seen[r.SessionID] {
			t.Fatalf("session %s shared", r.SessionID)
		}
		seen[r.SessionID] = true
		tr := f.loop.Transcript(r.SessionID)
		if tr[0].Text != "concurrent" || tr[len(tr)-1].Role != event.RoleAssistant || len(tr[len(tr)-1].ToolCalls) != 0 {
			t.Errorf("query %d transcript %+v", i, tr)
		}
	}
	if got := llm.TranscriptsFromEvents(f.events("")); len(got) != 8 {
		t.Errorf("journal rebuilt %d sessions", len(got))
	}
}

// sloppyModel returns tool calls without ids, with repeated ids or with
// the id the loop would give a call without one, then a nil response, as a
// buggy (or hostile) provider might.
type sloppyModel struct{ n int }

func (m *sloppyModel) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	m.n++
	switch m.n {
	case 1:
		return &llm.Response{Message: event.Message{ToolCalls: []event.ToolCall{
			{ID: "call_t1_2", Name: "Glob", Input: json.RawMessage(`{"pattern":"*"}`)},
			{Name: "Glob", Input: json.RawMessage(`{"pattern":"*"}`)},
			{ID: "dup", Name: "Glob", Input: json.RawMessage(`{"pattern":"*"}`)},
			{ID: "dup", Name: "Glob"},
		}}}, nil
	case 2:
		return &llm.Response{Message: event.Message{Text: "done"}}, nil
	}
	return nil, nil
}

func TestToolLoopNormalizesCallIDs(t *testing.T) {
	work := t.TempDir()
	tools, _ := builtin.New(builtin.Config{WorkDir: work})
	loop := llm.NewToolLoop(&sloppyModel{}, llm.Config{Tools: tools})
	res, err := loop.Query(context.Background(), "go", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := loop.Transcript(res.SessionID)
	calls, results := tr[1].ToolCalls, tr[2].ToolResults
	seen := map[string]bool{}
	for i, c := range calls {
		if c.ID == "" || seen[c.ID] || results[i].CallID != c.ID {
			t.Fatalf("call %d id %q, result for %q", i, c.ID, results[i].CallID)
		}
		seen[c.ID] = true
	}
	if res.ToolUses[3].IsError != true || res.ToolUses[3].Output == "" {
		// The last call has no input: Glob reports the missing pattern.
		t.Errorf("last use %+v", res.ToolUses[3])
	}
	if _, err := loop.Query(context.Background(), "again", llm.QueryOptions{}); agenterr.CodeOf(err) != agenterr.CodeSdkRequest {
		t.Errorf("nil response: %v", err)
	}
}

// Each query is checked by its own policy, also when the loop reuses the
// middleware of an earlier query with the same options, and when the
// caller changes its pattern slice in place between queries.
func TestToolLoopPolicyPerQuery(t *testing.T) {
	write := `  - tool_calls:
      - {name: Write, input: {file_path: w.txt, content: x}}
  - text: done
`
	f := newFixture(t, "turns:\n"+strings.Repeat(write, 5))
	allowed := []string{"Read", "Write"}
	var outcomes []bool
	for i, mode := range []string{tool.ModePlan, tool.ModeAcceptEdits, tool.ModePlan, tool.ModeDefault, tool.ModeDefault} {
		if i == 4 {
			allowed[1] = "Glob" // the same slice, changed in place
		}
		res, err := f.loop.Query(context.Background(), "write", llm.QueryOptions{PermissionMode: mode, AllowedTools: allowed})
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, res.ToolUses[0].Denied)
	}
	if want := []bool{true, false, true, false, true}; !slices.Equal(outcomes, want) {
		t.Fatalf("denied per query %v, want %v", outcomes, want)
	}
}

// kindCounter counts how often the policy asks for its kind.
type kindCounter struct {
	testTool
	n *atomic.Int64
}

func (k kindCounter) Kind() tool.Kind { k.n.Add(1); return tool.KindRead }

func TestToolLoopMatchesPatternsOncePerPolicy(t *testing.T) {
	s, err := script.Parse("s.yaml", []byte("turns:\n  - text: a\n  - text: b\n  - text: c\n"))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	tools := []tool.Tool{kindCounter{testTool{name: "A"}, &n}, kindCounter{testTool{name: "B"}, &n}}
	loop := llm.NewToolLoop(script.New(s), llm.Config{Tools: tools})
	opts := llm.QueryOptions{AllowedTools: []string{"A", "B(x)"}}
	for i := 0; i < 2; i++ {
		if _, err := loop.Query(context.Background(), "go", opts); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.Load(); got != 2 {
		t.Fatalf("the policy was evaluated %d times for 2 tools over 2 queries with the same patterns, want 2", got)
	}
	// Another policy is evaluated afresh.
	if _, err := loop.Query(context.Background(), "go", llm.QueryOptions{AllowedTools: []string{"A"}}); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("a new policy evaluated %d tools, want 1", got-2)
	}
}

// TestToolLoopConcurrentQueriesOfOneSession: queries extend the session's
// transcript in place; two at once on the same session must not write
// into each other's messages (run with -race).
func TestToolLoopConcurrentQueriesOfOneSession(t *testing.T) {
	var b strings.Builder
	b.WriteString("turns:\n")
	for i := 0; i < 41; i++ {
		b.WriteString("  - text: answer\n")
	}
	s, err := script.Parse("s.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	events := &eventLog{}
	loop := llm.NewToolLoop(script.New(s), llm.Config{Events: events})
	first, err := loop.Query(context.Background(), "start", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := loop.Query(context.Background(), fmt.Sprintf("prompt %d", i), llm.QueryOptions{SessionID: first.SessionID}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	// Every query journaled its own prompt and answer, once.
	seen := map[string]bool{}
	for _, raw := range events.sessionMessages[1:] {
		var ev event.SessionMessagesEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		if len(ev.Messages) != 2 || seen[ev.Messages[0].Text] || ev.Messages[1].Text != "answer" {
			t.Fatalf("query journaled %+v", ev.Messages)
		}
		seen[ev.Messages[0].Text] = true
	}
	if len(seen) != 40 {
		t.Fatalf("%d queries journaled", len(seen))
	}
}

// eventLog keeps the session.messages events, encoded when emitted.
type eventLog struct {
	mu              sync.Mutex
	sessionMessages []json.RawMessage
}

func (e *eventLog) Emit(p event.Payload) {
	typ, data := string(p.EventKind()), any(p)
	if typ != journal.SessionMessages {
		return
	}
	b, _ := json.Marshal(data)
	e.mu.Lock()
	e.sessionMessages = append(e.sessionMessages, b)
	e.mu.Unlock()
}

// TestToolLoopOffersEachToolNameOnce: of two tools with one name, the one
// given last is offered (once, in name order with the others) and runs.
func TestToolLoopOffersEachToolNameOnce(t *testing.T) {
	say := func(out string) tool.Tool {
		return tool.Func("echo", "Says "+out+".", func(context.Context, struct{}) (string, error) { return out, nil })
	}
	f := newFixture(t, `turns:
  - tool_calls:
      - name: echo
        input: {}
  - text: done
`, func(c *llm.Config) { c.Tools = append([]tool.Tool{say("first")}, append(c.Tools, say("second"))...) })
	res, err := f.loop.Query(context.Background(), "echo", writeAll)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolUses) != 1 || res.ToolUses[0].Output != "second" {
		t.Fatalf("tool uses %+v", res.ToolUses)
	}
	var names []string
	for _, s := range f.rec.requests()[0].Tools {
		names = append(names, s.Name)
		if s.Name == "echo" && s.Description != "Says second." {
			t.Errorf("offered echo: %q", s.Description)
		}
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) || !slices.Contains(names, "echo") {
		t.Errorf("offered tools %v", names)
	}
}

// TestToolLoopOffersWhatEachPolicyLets: a query offered every tool, one
// whose policy leaves tools out and one offered every tool again each
// send the tools their policy lets them use, in name order, each with its
// own spec, in a list made to their number; a tool the model calls runs
// as the one of its name.
func TestToolLoopOffersWhatEachPolicyLets(t *testing.T) {
	f := newFixture(t, `turns:
  - text: a
  - text: b
  - tool_calls:
      - {name: Write, input: {file_path: w.txt, content: x}}
  - text: c
`)
	all := make(map[string]tool.Spec)
	for _, tl := range f.cfg.Tools {
		all[tl.Spec().Name] = tl.Spec()
	}
	for _, opts := range []llm.QueryOptions{writeAll, {PermissionMode: tool.ModePlan}, writeAll} {
		if _, err := f.loop.Query(context.Background(), "go", opts); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.rec.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, req := range reqs {
		var names []string
		for _, s := range req.Tools {
			names = append(names, s.Name)
			if w := all[s.Name]; s.Description != w.Description || string(s.InputSchema) != string(w.InputSchema) {
				t.Errorf("request %d offers %s with another spec", i, s.Name)
			}
		}
		if !slices.IsSorted(names) {
			t.Errorf("request %d offers %v, not in name order", i, names)
		}
		if cap(req.Tools) != len(req.Tools) {
			t.Errorf("request %d: an append to its %d tools would write into a list of %d", i, len(req.Tools), cap(req.Tools))
		}
		if want := len(all); (i == 1) == (len(names) == want) || len(names) == 0 {
			t.Errorf("request %d offers %d of %d tools: %v", i, len(names), want, names)
		}
	}
	if data, err := os.ReadFile(filepath.Join(f.work, "w.txt")); err != nil || string(data) != "x" {
		t.Errorf("Write did not run: %q %v", data, err)
	}
}
