package claudecode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/claudecode"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

var fakeBin string

func TestMain(m *testing.M) {
	sandbox.Init()
	dir, err := os.MkdirTemp("", "fakeclaude")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeBin = filepath.Join(dir, "claude")
	if runtime.GOOS == "windows" {
		fakeBin += ".exe"
	}
	out, err := exec.Command("go", "build", "-o", fakeBin, "./testdata/fakeclaude").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building fake claude: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const secret = "sk-ant-SECRET-987654321"

// events records journal events.
type events struct {
	mu  sync.Mutex
	evs []string
}

func (e *events) Emit(p event.Payload) {
	typ, data := string(p.EventKind()), any(p)
	b, _ := json.Marshal(data)
	e.mu.Lock()
	e.evs = append(e.evs, typ+" "+string(b))
	e.mu.Unlock()
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.evs...)
}

type fakeLog struct {
	Args       []string `json:"args"`
	Stdin      string   `json:"stdin"`
	EnvKey     string   `json:"env_key"`
	EnvBaseURL string   `json:"env_base_url"`
	Pwd        string   `json:"pwd"`
	Env        []string `json:"env"`
}

func newBridge(t *testing.T, scenario string, ev event.Emitter, mut func(*claudecode.Config)) (*claudecode.Bridge, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "log.json")
	env := map[string]string{"ANTHROPIC_API_KEY": secret}
	cfg := claudecode.Config{Binary: fakeBin, WorkDir: t.TempDir(), Events: ev,
		Getenv: func(k string) string { return env[k] },
		Env:    []string{"FAKE_CLAUDE_SCENARIO=" + scenario, "FAKE_CLAUDE_LOG=" + logPath}}
	if mut != nil {
		mut(&cfg)
	}
	b, err := claudecode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, logPath
}

func readLog(t *testing.T, p string) fakeLog {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var l fakeLog
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

func TestQueryCollectsTextToolsUsageAndSession(t *testing.T) {
	ev := &events{}
	b, logPath := newBridge(t, "", ev, func(c *claudecode.Config) {
		c.Model = "claude-opus-x"
		c.MCPServers = map[string]tooldecl.MCPServer{"gh": {Command: "gh-mcp", Args: []string{"--ro"}}, "web": {URL: "http://127.0.0.1:1/mcp"}}
		c.DisallowedTools = []string{"WebFetch"}
	})
	res, err := b.Query(context.Background(), "fix the bug", llm.QueryOptions{SystemPrompt: "Be careful.",
		AllowedTools: []string{"Read", "Bash(git log:*)"}, DisallowedTools: []string{"Bash(rm:*)"}, PermissionMode: "acceptEdits", MaxTurns: 7})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID != "sess-new-1" || b.SessionID() != "sess-new-1" || res.SessionRenewed {
		t.Fatalf("session: %+v", res)
	}
	if !slices.Contains(res.Responses, "Reading the file.") || res.Responses[len(res.Responses)-1] != "You said: fix the bug" {
		t.Fatalf("responses = %q", res.Responses)
	}
	if len(res.ToolUses) != 2 {
		t.Fatalf("tool uses = %+v", res.ToolUses)
	}
	if u := res.ToolUses[0]; u.Name != "Read" || u.Output != "hello from a.txt" || u.IsError || u.Denied {
		t.Errorf("read use = %+v", u)
	}
	if u := res.ToolUses[1]; u.Name != "Bash" || !u.Denied || !u.IsError {
		t.Errorf("denied use = %+v", u)
	}
	want := event.Usage{InputTokens: 40, OutputTokens: 55, CacheWriteTokens: 7, CacheReadTokens: 100}
	if res.Usage != want || res.CostUSD != 0.0123 || res.Turns != 2 || res.StopReason != "end_turn" {
		t.Fatalf("result = %+v", res)
	}
	l := readLog(t, logPath)
	for _, f := range []string{"-p", "--verbose"} {
		if !slices.Contains(l.Args, f) {
			t.Errorf("missing %s in %q", f, l.Args)
		}
	}
	for name, want := range map[string]string{"--output-format": "stream-json", "--input-format": "stream-json",
		"--model": "claude-opus-x", "--allowedTools": "Read,Bash(git log:*)", "--disallowedTools": "WebFetch,Bash(rm:*)",
		"--permission-mode": "acceptEdits", "--max-turns": "7", "--append-system-prompt": "Be careful."} {
		if got, _ := flagValue(l.Args, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, ok := flagValue(l.Args, "--resume"); ok {
		t.Error("--resume on a new session")
	}
	mcp, _ := flagValue(l.Args, "--mcp-config")
	var mc struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(mcp), &mc); err != nil || mc.MCPServers["gh"]["command"] != "gh-mcp" || mc.MCPServers["web"]["type"] != "http" {
		t.Errorf("--mcp-config = %s (%v)", mcp, err)
	}
	var in struct {
		Type    string
		Message struct{ Role, Content string }
	}
	if err := json.Unmarshal([]byte(l.Stdin), &in); err != nil || in.Type != "user" || in.Message.Role != "user" || in.Message.Content != "fix the bug" {
		t.Errorf("stdin = %q", l.Stdin)
	}
	if l.EnvKey != secret {
		t.Errorf("the key from Getenv was not passed to the CLI")
	}
	got := strings.Join(ev.all(), "\n")
	for _, typ := range []string{journal.ModelTurn, journal.ToolCall, journal.ToolDenied, journal.Warning} {
		if !strings.Contains(got, typ+" ") {
			t.Errorf("no %s event in\n%s", typ, got)
		}
	}
	if strings.Contains(got, secret) {
		t.Error("key in journal events")
	}
}

func TestResumeKeepsOrRenewsSession(t *testing.T) {
	b, logPath := newBridge(t, "", nil, nil)
	res, err := b.Query(context.Background(), "again", llm.QueryOptions{SessionID: "sess-old"})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID != "sess-old" || res.SessionRenewed {
		t.Fatalf("res = %+v", res)
	}
	if v, _ := flagValue(readLog(t, logPath).Args, "--resume"); v != "sess-old" {
		t.Fatalf("--resume = %q", v)
	}

	b2, _ := newBridge(t, "renew", nil, nil)
	res, err = b2.Query(context.Background(), "again", llm.QueryOptions{SessionID: "sess-old"})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID != "sess-renewed-2" || !res.SessionRenewed || b2.SessionID() != "sess-renewed-2" {
		t.Fatalf("changed id not adopted: %+v", res)
	}
}

func TestUnknownSessionIsRenewedOnce(t *testing.T) {
	ev := &events{}
	b, logPath := newBridge(t, "unknown-session", ev, nil)
	res, err := b.Query(context.Background(), "continue", llm.QueryOptions{SessionID: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.SessionRenewed || res.SessionID != "sess-new-1" {
		t.Fatalf("res = %+v", res)
	}
	if _, ok := flagValue(readLog(t, logPath).Args, "--resume"); ok {
		t.Fatal("the renewed attempt still passed --resume")
	}
	if !strings.Contains(strings.Join(ev.all(), "\n"), "not found") {
		t.Error("renewal not journaled")
	}
}

func TestVeryLongLines(t *testing.T) {
	b, _ := newBridge(t, "long", nil, nil)
	res, err := b.Query(context.Background(), "read big", llm.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolUses) != 1 || len(res.ToolUses[0].Output) != 2<<20 {
		t.Fatalf("tool output length = %d", len(res.ToolUses[0].Output))
	}
	if res.Responses[0] != fmt.Sprintf("read %d bytes", 2<<20) {
		t.Fatalf("responses = %q", res.Responses)
	}
}

func TestErrorResultsMapToCodes(t *testing.T) {
	cases := []struct {
		scenario    string
		code        string
		recoverable bool
	}{
		{"rate-limit", agenterr.CodeSdkRateLimit, true},
		{"max-turns", agenterr.CodeMaxTurns, true},
		{"auth", agenterr.CodeSdkAuth, false},
		{"auth-retry", agenterr.CodeSdkAuth, false},
		{"crash", agenterr.CodeSdkConnection, true},
	}
	for _, tc := range cases {
		t.Run(tc.scenario, func(t *testing.T) {
			ev := &events{}
			b, _ := newBridge(t, tc.scenario, ev, nil)
			_, err := b.Query(context.Background(), "go", llm.QueryOptions{})
			e := agenterr.From(err)
			if e == nil || e.Code != tc.code || e.Recoverable != tc.recoverable || e.Layer != agenterr.LayerSDKBridge {
				t.Fatalf("err = %v", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("key leaked: %v", err)
			}
			if tc.scenario == "crash" && !strings.Contains(err.Error(), "something broke") {
				t.Errorf("stderr not reported: %v", err)
			}
			if tc.scenario == "rate-limit" && !strings.Contains(strings.Join(ev.all(), "\n"), journal.ModelRetry) {
				t.Error("api_retry frame not journaled")
			}
		})
	}
}

const schema = `{"type":"object","properties":{"status":{"type":"string","enum":["completed","failed"]},"count":{"type":"integer"}},"required":["status"],"additionalProperties":false}`

func TestStructuredOutput(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		count    int
		code     string
	}{
		{"structured", 3, ""},
		{"structured-in-text", 4, ""},
		{"structured-invalid", 0, agenterr.CodeSchemaValidation},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			b, logPath := newBridge(t, tc.scenario, nil, nil)
			res, err := b.Query(context.Background(), "report", llm.QueryOptions{OutputSchema: json.RawMessage(schema)})
			if v, _ := flagValue(readLog(t, logPath).Args, "--json-schema"); v != schema {
				t.Errorf("--json-schema = %q", v)
			}
			if tc.code != "" {
				if agenterr.CodeOf(err) != tc.code || !agenterr.IsRecoverable(err) || res == nil || res.StructuredOutput != nil {
					t.Fatalf("err = %v res = %+v", err, res)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Status string
				Count  int
			}
			if err := json.Unmarshal(res.StructuredOutput, &out); err != nil || out.Status != "completed" || out.Count != tc.count {
				t.Fatalf("structured = %s", res.StructuredOutput)
			}
		})
	}
}

// --base-url (runner.baseUrl) reaches the CLI as ANTHROPIC_BASE_URL, over
// the environment's; without it the environment's is passed on.
func TestBaseURLReachesTheCLI(t *testing.T) {
	for _, tc := range []struct{ baseURL, want string }{
		{"http://127.0.0.1:9/gateway", "http://127.0.0.1:9/gateway"},
		{"", "http://from-env.example"},
	} {
		b, logPath := newBridge(t, "structured", nil, func(c *claudecode.Config) {
			c.BaseURL = tc.baseURL
			get := c.Getenv
			c.Getenv = func(k string) string {
				if k == "ANTHROPIC_BASE_URL" {
					return "http://from-env.example"
				}
				return get(k)
			}
		})
		if _, err := b.Query(context.Background(), "go", llm.QueryOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := readLog(t, logPath).EnvBaseURL; got != tc.want {
			t.Errorf("BaseURL %q: the CLI saw ANTHROPIC_BASE_URL=%q, want %q", tc.baseURL, got, tc.want)
		}
	}
}

// The bridge keeps its compiled output schemas, but each query is checked
// against its own: a second query with a stricter schema is not judged by
// the first one's.
func TestStructuredOutputSchemaPerQuery(t *testing.T) {
	b, _ := newBridge(t, "structured", nil, nil)
	for range 2 {
		if _, err := b.Query(context.Background(), "report", llm.QueryOptions{OutputSchema: json.RawMessage(schema)}); err != nil {
			t.Fatal(err)
		}
	}
	stricter := strings.Replace(schema, `"required":["status"]`, `"required":["status","reason"]`, 1)
	_, err := b.Query(context.Background(), "report", llm.QueryOptions{OutputSchema: json.RawMessage(stricter)})
	if agenterr.CodeOf(err) != agenterr.CodeSchemaValidation || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("the stricter schema was not applied: %v", err)
	}
	if _, err := b.Query(context.Background(), "report", llm.QueryOptions{OutputSchema: json.RawMessage(schema)}); err != nil {
		t.Fatalf("the first schema again: %v", err)
	}
}

func TestMissingBinaryHasInstallHint(t *testing.T) {
	_, err := llm.Open(context.Background(), "claude-code:opus", llm.Config{Getenv: func(k string) string {
		if k == "PATH" {
			return t.TempDir()
		}
		return ""
	}})
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSdkConnection || !strings.Contains(e.Hint, "npm install -g @anthropic-ai/claude-code") {
		t.Fatalf("err = %v", err)
	}
	_, err = claudecode.New(claudecode.Config{Binary: filepath.Join(t.TempDir(), "nope")})
	if agenterr.CodeOf(err) != agenterr.CodeSdkConnection {
		t.Fatalf("err = %v", err)
	}
}

func TestBinaryFromEnvAndPath(t *testing.T) {
	dir := filepath.Dir(fakeBin)
	b, err := llm.Open(context.Background(), "claude-code", llm.Config{Getenv: func(k string) string {
		if k == "PATH" {
			return "/nonexistent" + string(os.PathListSeparator) + dir
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := llm.Open(context.Background(), "claude-code", llm.Config{Getenv: func(k string) string {
		if k == claudecode.EnvBinary {
			return fakeBin
		}
		return ""
	}}); err != nil {
		t.Fatal(err)
	}
}

func TestCancelKillsProcessGroup(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process groups are unix-only")
	}
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep binary")
	}
	childFile := filepath.Join(t.TempDir(), "child")
	b, _ := newBridge(t, "hang", nil, func(c *claudecode.Config) {
		c.Env = append(c.Env, "FAKE_CLAUDE_CHILD="+childFile)
		c.KillGrace = 200 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := b.Query(ctx, "wait", llm.QueryOptions{}); done <- err }()
	var pid int
	for i := 0; i < 200 && pid == 0; i++ {
		time.Sleep(25 * time.Millisecond)
		if s, err := os.ReadFile(childFile); err == nil {
			pid, _ = strconv.Atoi(string(s))
		}
	}
	if pid == 0 {
		t.Fatal("fake claude did not start its child")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, agenterr.ErrCanceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Query did not return after cancel")
	}
	for i := 0; ; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
		if i > 200 {
			t.Fatalf("child %d of the cancelled CLI is still alive", pid)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func TestEmptyPromptRejected(t *testing.T) {
	b, _ := newBridge(t, "", nil, nil)
	if _, err := b.Query(context.Background(), "  ", llm.QueryOptions{}); agenterr.CodeOf(err) != agenterr.CodeSdkRequest {
		t.Fatalf("err = %v", err)
	}
}

func TestMCPConfigRejectsEmptyServer(t *testing.T) {
	_, err := claudecode.MCPConfigJSON(map[string]tooldecl.MCPServer{"x": {}})
	e := agenterr.From(err)
	if e == nil || e.Pointer != "/runner/mcpServers/x" {
		t.Fatalf("err = %v", err)
	}
}

func TestHostileValuesCannotBecomeFlags(t *testing.T) {
	b, logPath := newBridge(t, "", nil, func(c *claudecode.Config) { c.Model = "--dangerously-skip-permissions" })
	_, err := b.Query(context.Background(), "--permission-mode bypassPermissions\n\"; rm -rf /", llm.QueryOptions{
		SystemPrompt: "--permission-mode=bypassPermissions", AllowedTools: []string{"-x", "Bash(rm -rf /:*)"}})
	if err != nil {
		t.Fatal(err)
	}
	l := readLog(t, logPath)
	for _, a := range l.Args {
		switch {
		case a == "--dangerously-skip-permissions", a == "--permission-mode=bypassPermissions", a == "-x", a == "bypassPermissions":
			t.Fatalf("a configured value became a flag: %q in %q", a, l.Args)
		}
	}
	if v, _ := flagValue(l.Args, "--model"); v != "--dangerously-skip-permissions" {
		t.Fatalf("--model = %q", v)
	}
	if v, _ := flagValue(l.Args, "--append-system-prompt"); v != "--permission-mode=bypassPermissions" {
		t.Fatalf("--append-system-prompt = %q", v)
	}
	var in struct{ Message struct{ Content string } }
	if err := json.Unmarshal([]byte(l.Stdin), &in); err != nil || in.Message.Content != "--permission-mode bypassPermissions\n\"; rm -rf /" {
		t.Fatalf("prompt not passed verbatim on stdin: %q", l.Stdin)
	}
}

// TestRedactsSecretsTheCLIReports: the CLI runs the tools itself, so the
// driver redacts the key in the text, tool input, tool result, result
// text and structured output it reports, before the journal sees them.
func TestRedactsSecretsTheCLIReports(t *testing.T) {
	const key = "sk-cc-echo-0123456789abcdef"
	ev := &events{}
	b, _ := newBridge(t, "echo-secret", ev, func(c *claudecode.Config) {
		c.Env = append(c.Env, "FAKE_CLAUDE_ECHO="+key)
		c.Redact = proc.SecretRedactor([]string{"ECHO_API_KEY=" + key})
	})
	res, err := b.Query(context.Background(), "say the key", llm.QueryOptions{OutputSchema: json.RawMessage(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res)
	if strings.Contains(string(out), key) || !strings.Contains(string(out), `"key":"[REDACTED]"`) ||
		!slices.Contains(res.Responses, "done: [REDACTED]") || len(res.ToolUses) != 1 || res.ToolUses[0].Output != "[REDACTED]\n" {
		t.Errorf("result holds the key or lacks redaction: %s", out)
	}
	if got := strings.Join(ev.all(), "\n"); strings.Contains(got, key) || !strings.Contains(got, "echo [REDACTED]") {
		t.Errorf("journal events hold the key or lack the redacted input:\n%s", got)
	}
}

// A query with a boundary rule passes the GitHub boundary commands to the
// CLI as --disallowedTools, after the agent's own deny patterns, with the
// boundary tools of each MCP server the CLI is given.
func TestArgsBoundaryDeniesGitHubCommands(t *testing.T) {
	b, _ := newBridge(t, "ok", nil, func(c *claudecode.Config) {
		c.DisallowedTools = []string{"WebFetch"}
		c.MCPServers = map[string]tooldecl.MCPServer{"web": {URL: "http://127.0.0.1:1/mcp"}, "github": {Command: "gh-mcp"}}
	})
	args := b.Args(llm.QueryOptions{Boundary: "a work step may not", DisallowedTools: []string{"Bash(rm:*)"}}, "")
	got, _ := flagValue(args, "--disallowedTools")
	want := "WebFetch,Bash(rm:*)," + strings.Join(tool.BoundaryDenyPatterns("github", "web"), ",")
	if !strings.Contains(got, ",mcp__github__merge_pull_request,") || !strings.Contains(got, "Bash(gh workflow run:*)") {
		t.Fatalf("--disallowedTools = %q", got)
	}
	if got != want {
		t.Fatalf("--disallowedTools = %q, want %q", got, want)
	}
	if got, _ := flagValue(b.Args(llm.QueryOptions{}, ""), "--disallowedTools"); got != "WebFetch" {
		t.Fatalf("without a boundary: %q", got)
	}
}

// The model's commands run by the CLI's Bash get what capstan's own Bash
// tool gets: Config.CommandEnv (runner.boundaries.env, and in a sandbox
// the user's git identity) in proc.ForCommands' form; nothing else of
// capstan's environment.
func TestCommandEnvReachesTheCLI(t *testing.T) {
	t.Setenv("CAPSTAN_TEST_FROM_HOST", "host")
	t.Setenv("CAPSTAN_TEST_UNLISTED", "unlisted")
	b, logPath := newBridge(t, "", &events{}, func(c *claudecode.Config) {
		c.CommandEnv = []string{"CAPSTAN_TEST_SET=set", "CAPSTAN_TEST_FROM_HOST", "GIT_AUTHOR_NAME=Ada Lovelace"}
	})
	if _, err := b.Query(context.Background(), "hello", llm.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	env := readLog(t, logPath).Env
	for _, want := range []string{"CAPSTAN_TEST_SET=set", "CAPSTAN_TEST_FROM_HOST=host", "GIT_AUTHOR_NAME=Ada Lovelace"} {
		if !slices.Contains(env, want) {
			t.Errorf("the CLI's environment has no %s: %q", want, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "CAPSTAN_TEST_UNLISTED=") {
			t.Errorf("the CLI got %s, which CommandEnv does not name", kv)
		}
	}
}
