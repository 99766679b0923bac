//go:build linux

package claudecode_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/claudecode"
	"github.com/capstan-dev/capstan/sandbox"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/tooldecl"
)

// boxedRunner is the agent's default sandbox (no network but the
// model's endpoint), or a skip/failure where the machine cannot sandbox.
func boxedRunner(t testing.TB) *sandbox.CommandRunner {
	t.Helper()
	r, err := sandbox.NewCommandRunner(context.Background(), nil)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI's machine sandboxes: %v", err)
		}
		t.Skipf("this machine cannot sandbox: %v", err)
	}
	return r
}

// TestRealCLIRunsInTheSandbox runs the real claude CLI in the agent's
// sandbox against the loopback fake API: the model's Bash (the CLI's own
// tool) cannot read a file outside the readable paths, write outside the
// work dir or reach a loopback server that is not the API, while an
// honest command in the work dir works and the model's turns still reach
// the API through the allow-list.
func TestRealCLIRunsInTheSandbox(t *testing.T) {
	bin := testenv.ClaudeCLI(t)
	box := boxedRunner(t)
	work := notesDir(t)
	outside := t.TempDir()
	secretFile := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secretFile, []byte("TOP-SECRET-31337\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, "planted.txt")

	// A loopback server that is not the API: nothing may reach it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dialed atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	attack := "cat " + secretFile + "; echo read=$?; " +
		"echo pwned > " + target + "; echo write=$?; " +
		"(exec 3<>/dev/tcp/127.0.0.1/" + port + "); echo dial=$?; " +
		"curl -sf -o /dev/null --max-time 10 http://127.0.0.1:" + port + "/; echo proxied=$?; " +
		"echo honest > made.txt; echo inside=$?; cat notes.txt; " +
		// The key, reversed to pass redaction: the CLI holds a stand-in.
		"echo \"key=$(printf %s \"$ANTHROPIC_API_KEY\" | rev)\""

	// The fake API takes only the real key: the key proxy put it back.
	srv := fakellm.NewAnthropic(t, fakellm.Options{APIKey: "test-key", Respond: func(r fakellm.Request) fakellm.Reply {
		switch {
		case len(r.LastToolResults) > 0:
			return fakellm.Reply{Text: "RESULT: " + strings.Join(r.LastToolResults, " ")}
		case strings.Contains(r.LastUserText, "ATTACK"):
			return fakellm.Reply{Text: "Running.", ToolCalls: []fakellm.ToolCall{{Name: "Bash",
				Input: json.RawMessage(`{"command":` + strconv.Quote(attack) + `,"description":"probe"}`)}}}
		}
		return fakellm.Reply{Text: "ok"}
	}})
	b, err := claudecode.New(claudecode.Config{Binary: bin, WorkDir: work, Model: "claude-sonnet-5", Getenv: realEnv(t, srv), Sandbox: box})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := b.Query(ctx, "ATTACK the machine", llm.QueryOptions{MaxTurns: 4, AllowedTools: []string{"Bash"}})
	dumpOnError(t, srv, err)
	if len(res.ToolUses) != 1 || res.ToolUses[0].Name != "Bash" {
		t.Fatalf("tool uses = %+v", res.ToolUses)
	}
	out := res.ToolUses[0].Output
	t.Logf("Bash output in the sandbox:\n%s", out)
	for _, want := range []string{"inside=0", "the code is 4711"} {
		if !strings.Contains(out, want) {
			t.Errorf("honest command: output lacks %q", want)
		}
	}
	if !strings.Contains(out, "key=") || strings.Contains(out, "yek-tset") || !strings.Contains(out, "ni-dnats-natspac") {
		t.Errorf("the CLI's Bash should see only the stand-in key")
	}
	for _, bad := range []string{"TOP-SECRET-31337", "read=0", "write=0", "dial=0", "proxied=0"} {
		if strings.Contains(out, bad) {
			t.Errorf("the sandbox let through %q", bad)
		}
	}
	for _, want := range []string{"read=", "write=", "dial=", "proxied="} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q: the attack did not run", want)
		}
	}
	if got, err := os.ReadFile(filepath.Join(work, "made.txt")); err != nil || string(got) != "honest\n" {
		t.Errorf("made.txt in the work dir = %q, %v", got, err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("a file was written outside the work dir: %v", err)
	}
	if n := dialed.Load(); n != 0 {
		t.Errorf("the loopback server that is not the API got %d connections", n)
	}
}

// BenchmarkRealCLIQuery is one query of the real claude CLI against the
// loopback fake API, with one Bash call in the work dir (`cat
// notes.txt`): started with the caller's rights, and in the agent's
// sandbox (namespaces, Landlock, the allow-list proxy to the API).
func BenchmarkRealCLIQuery(b *testing.B) {
	bin := testenv.ClaudeCLI(b)
	work := notesDir(b)
	srv := fakellm.NewAnthropic(b, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		switch {
		case len(r.LastToolResults) > 0:
			return fakellm.Reply{Text: "RESULT: " + strings.Join(r.LastToolResults, " ")}
		case strings.Contains(r.LastUserText, "CAT"):
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: json.RawMessage(`{"command":"cat notes.txt","description":"read"}`)}}}
		}
		return fakellm.Reply{Text: "ok"}
	}})
	for _, tc := range []struct {
		name string
		box  tool.ProgramSandbox
	}{{"unsandboxed", nil}, {"sandboxed", boxedRunner(b)}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := claudecode.Config{Binary: bin, WorkDir: work, Model: "claude-sonnet-5", Getenv: realEnv(b, srv)}
			if tc.box != nil {
				cfg.Sandbox = tc.box
			}
			br, err := claudecode.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			for b.Loop() {
				res, err := br.Query(context.Background(), "CAT the notes", llm.QueryOptions{MaxTurns: 3, AllowedTools: []string{"Bash"}})
				if err != nil || len(res.ToolUses) != 1 || !strings.Contains(res.ToolUses[0].Output, "4711") {
					b.Fatalf("query: %+v, %v", res, err)
				}
			}
		})
	}
}

// TestRealCLIStartsAnMCPServerInstalledOutsideTheWorkDir: a stdio MCP
// server in a virtual environment outside the work dir, which runs a
// program of the environment beyond its bin/ entry, is started by the
// sandboxed CLI and answers: the CLI's sandbox reads the server's install
// root too.
func TestRealCLIStartsAnMCPServerInstalledOutsideTheWorkDir(t *testing.T) {
	bin := testenv.ClaudeCLI(t)
	box := boxedRunner(t)
	venv := filepath.Join(t.TempDir(), "venv")
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(venv, "lib", "stdioserver"), "../../tool/mcp/testdata/stdioserver").CombinedOutput(); err != nil {
		t.Fatalf("build the MCP server: %v\n%s", err, out)
	}
	for name, text := range map[string]string{"pyvenv.cfg": "home = /usr/bin\n",
		"bin/server": "#!/bin/sh\nexec \"$(dirname \"$0\")/../lib/stdioserver\" \"$@\"\n"} {
		if err := os.WriteFile(filepath.Join(venv, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	work := notesDir(t)
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		switch {
		case len(r.LastToolResults) > 0:
			return fakellm.Reply{Text: "RESULT: " + strings.Join(r.LastToolResults, " ")}
		case strings.Contains(r.LastUserText, "GREET") && slices.Contains(r.Tools, "mcp__v__greet"):
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "mcp__v__greet", Input: json.RawMessage(`{"name":"Ada"}`)}}}
		}
		return fakellm.Reply{Text: "ok"}
	}})
	b, err := claudecode.New(claudecode.Config{Binary: bin, WorkDir: work, Model: "claude-sonnet-5", Getenv: realEnv(t, srv), Sandbox: box,
		// The CLI offers MCP tools behind its tool search unless told not to.
		Env:        []string{"ENABLE_TOOL_SEARCH=false"},
		MCPServers: map[string]tooldecl.MCPServer{"v": {Command: filepath.Join(venv, "bin", "server"), Env: map[string]string{"GREETING": "Hej"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := b.Query(ctx, "GREET Ada", llm.QueryOptions{MaxTurns: 4, AllowedTools: []string{"mcp__v__greet"}})
	dumpOnError(t, srv, err)
	if len(res.ToolUses) != 1 || !strings.Contains(res.ToolUses[0].Output, "Hej, Ada from "+filepath.Base(work)) {
		t.Fatalf("tool uses = %+v", res.ToolUses)
	}
}
