package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/proc"
	"github.com/capstan-dev/capstan/tool"
)

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// state is the field after the parenthesised command name
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// pollWait bounds waitGone and readPID: generous, since on a loaded CI
// machine under -race starting a shell can take seconds; a passing test
// returns as soon as its condition holds.
const pollWait = 20 * time.Second

// waitGone polls until pid is gone (the kill is synchronous, but reaping
// by init is not).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(pollWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	t.Fatalf("process %d still running", pid)
}

func readPID(t *testing.T, e *env, name string) int {
	t.Helper()
	for deadline := time.Now().Add(pollWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s, ok := e.read(name); ok && strings.HasSuffix(s, "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no pid file %s", name)
	return 0
}

func TestBashBasics(t *testing.T) {
	e := newEnv(t)
	out := mustOK(t, e.call("Bash", m{"command": "pwd; echo out; echo err >&2", "description": "print"}))
	lines := strings.Split(out, "\n")
	if len(lines) != 3 || lines[1] != "out" || lines[2] != "err" {
		t.Errorf("output %q", out)
	}
	if real, _ := filepath.EvalSymlinks(e.work); lines[0] != real {
		t.Errorf("pwd = %q, want %q", lines[0], real)
	}
	r := e.call("Bash", m{"command": "echo failing; exit 3"})
	if !r.IsError || r.Content != "failing\n[exit status 3]" {
		t.Errorf("exit status: %+v", r)
	}
	r = e.call("Bash", m{"command": "definitely-not-a-command-xyz"})
	if !r.IsError || !strings.Contains(r.Content, "[exit status 127]") {
		t.Errorf("missing command: %+v", r)
	}
	if out := mustOK(t, e.call("Bash", m{"command": "true"})); out != "(no output)" {
		t.Errorf("empty output: %q", out)
	}
	// No stdin: cat returns at once.
	if out := mustOK(t, e.call("Bash", m{"command": "cat; echo done"})); out != "done" {
		t.Errorf("stdin: %q", out)
	}
	r = e.call("Bash", m{"command": "kill -TERM $$"})
	if !r.IsError || !strings.Contains(r.Content, "killed by signal: terminated") {
		t.Errorf("signal: %+v", r)
	}
	mustFail(t, e.call("Bash", m{"command": "  "}), "command is empty")
	mustFail(t, e.call("Bash", m{"command": "ls", "timeout": -5}), "timeout must be a positive")
	mustFail(t, e.call("Bash", m{"command": "ls", "run_in_background": true}), "unknown field")
}

// TestBashTimeoutKillsProcessGroup: a command that times out is killed
// with the background process it started. On a loaded machine the shell
// may not reach "echo $!" before a short timeout; the call is then
// repeated with a longer one (the kill is synchronous, so a pid file that
// is not complete when the call returns never will be).
func TestBashTimeoutKillsProcessGroup(t *testing.T) {
	e := newEnv(t)
	for _, timeout := range []time.Duration{300 * time.Millisecond, time.Second, 4 * time.Second, 16 * time.Second} {
		_ = os.Remove(filepath.Join(e.work, "bg.pid"))
		start := time.Now()
		r := e.call("Bash", m{"command": "sleep 30 & echo $! > bg.pid; sleep 30", "timeout": timeout.Milliseconds()})
		if !r.IsError || !strings.Contains(r.Content, "timed out after "+timeout.String()) {
			t.Fatalf("result %+v", r)
		}
		if d := time.Since(start); d > timeout+20*time.Second {
			t.Fatalf("took %v", d)
		}
		if s, ok := e.read("bg.pid"); ok && strings.HasSuffix(s, "\n") {
			waitGone(t, readPID(t, e, "bg.pid"))
			return
		}
		t.Logf("the shell did not start its background sleep within %s; again with a longer timeout", timeout)
	}
	t.Fatal("the shell never started its background sleep")
}

func TestBashBackgroundProcessesDoNotOutliveCommand(t *testing.T) {
	e := newEnv(t)
	// The sleeper keeps the output pipe open; the call must still return
	// promptly and the sleeper must be gone.
	out := mustOK(t, e.call("Bash", m{"command": "sleep 30 & echo $! > bg.pid; echo started"}))
	if out != "started" {
		t.Errorf("output %q", out)
	}
	waitGone(t, readPID(t, e, "bg.pid"))
	// Same with the sleeper's output detached from the pipe.
	mustOK(t, e.call("Bash", m{"command": "nohup sleep 30 >/dev/null 2>&1 & echo $! > bg2.pid"}))
	waitGone(t, readPID(t, e, "bg2.pid"))
}

func TestBashCancelKillsProcessGroup(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.tools["Bash"].Run(ctx, []byte(`{"command":"sleep 30 & echo $! > bg.pid; sleep 30"}`))
		done <- err
	}()
	pid := readPID(t, e, "bg.pid")
	cancel()
	select {
	case err := <-done:
		if agenterr.CodeOf(err) != agenterr.CodeCanceled {
			t.Errorf("err = %v, want CANCELED", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	waitGone(t, pid)
}

func TestBashEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-leak")
	t.Setenv("OPENAI_API_KEY", "sk-openai-leak")
	t.Setenv("GITHUB_TOKEN", "ghp-leak")
	t.Setenv("MY_SECRET", "s3cret-leak")
	t.Setenv("db_password", "pw-leak")
	t.Setenv("PASSED_TOKEN", "passed-on-purpose")
	t.Setenv("CAPSTAN_HARMLESS", "visible")
	t.Setenv("CAPSTAN_UNLISTED", "not-passed")
	t.Setenv("DATABASE_URL", "postgres://app:pw-leak@db/x")
	// Names outside the old suffix rules (issue: GH_PAT, SECRET_KEY_BASE,
	// OPENAI_API_KEY_2).
	t.Setenv("GH_PAT", "pat-leak")
	t.Setenv("SECRET_KEY_BASE", "base-leak")
	t.Setenv("OPENAI_API_KEY_2", "sk-2-leak")
	t.Setenv("CAPSTAN_GLOB_TOKEN", "glob-leak")
	e := newEnv(t, func(c *Config) {
		c.Env = []string{"PASSED_TOKEN", "EXTRA=1", "NOT_SET_ANYWHERE", "CAPSTAN_H*", "CAPSTAN_GLOB*"}
	})
	out := mustOK(t, e.call("Bash", m{"command": "env"}))
	if strings.Contains(out, "leak") {
		t.Fatalf("a secret reached the command:\n%s", out)
	}
	// A secret passed on purpose reaches the command, but its value is
	// redacted in the result like every secret value.
	for _, want := range []string{"PASSED_TOKEN=" + proc.Redacted, "EXTRA=1", "CAPSTAN_HARMLESS=visible", "PATH="} {
		if !strings.Contains(out, want) {
			t.Errorf("env lacks %s", want)
		}
	}
	if strings.Contains(out, "NOT_SET_ANYWHERE") {
		t.Error("an unset pass-through variable appeared")
	}
	if strings.Contains(out, "CAPSTAN_UNLISTED") {
		t.Error("a variable outside the base and the allow-list reached the command")
	}
	// The variable must not be readable by any other route either.
	if out := mustOK(t, e.call("Bash", m{"command": `echo "[${ANTHROPIC_API_KEY:-unset}]"; cat /proc/self/environ | tr '\0' '\n' | grep -c ANTHROPIC || true`})); out != "[unset]\n0" {
		t.Errorf("ANTHROPIC_API_KEY visible: %q", out)
	}
}

func TestBashOutputCapKeepsHeadAndTail(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxOutputBytes = 1000 })
	r := e.call("Bash", m{"command": "echo FIRST; head -c 200000 /dev/zero | tr '\\0' x; echo; echo LAST"})
	out := mustOK(t, r)
	if len(out) > 1200 {
		t.Errorf("output is %d bytes", len(out))
	}
	if !strings.HasPrefix(out, "FIRST\n") || !strings.HasSuffix(out, "LAST") || !strings.Contains(out, "bytes of output omitted") {
		t.Errorf("output %q", out)
	}
}

func TestBashTimeoutClamp(t *testing.T) {
	var got tool.CommandSpec
	rec := runnerFunc(func(_ context.Context, s tool.CommandSpec) (tool.CommandResult, error) {
		got = s
		return tool.CommandResult{Output: "ok\n"}, nil
	})
	t.Setenv("ANTHROPIC_API_KEY", "sk-leak")
	e := newEnv(t, func(c *Config) { c.Runner = rec; c.BashTimeout = time.Hour; c.MaxOutputBytes = 777 })
	e.call("Bash", m{"command": "x"})
	if got.Timeout != MaxBashTimeout || got.MaxOutput != 777 || got.Command != "x" {
		t.Errorf("spec %+v", got)
	}
	if real, _ := filepath.EvalSymlinks(e.work); got.Dir != real {
		t.Errorf("dir %q", got.Dir)
	}
	for _, kv := range got.Env {
		if strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") {
			t.Error("runner received the API key")
		}
	}
	out := mustOK(t, e.call("Bash", m{"command": "x", "timeout": 9e9}))
	if got.Timeout != MaxBashTimeout || !strings.Contains(out, "exceeds the maximum") {
		t.Errorf("clamp: %v %q", got.Timeout, out)
	}
	e.call("Bash", m{"command": "x", "timeout": 1500})
	if got.Timeout != 1500*time.Millisecond {
		t.Errorf("timeout = %v", got.Timeout)
	}
	e2 := newEnv(t, func(c *Config) { c.Runner = rec })
	e2.call("Bash", m{"command": "x"})
	if got.Timeout != DefaultBashTimeout {
		t.Errorf("default timeout = %v", got.Timeout)
	}
	// A runner failure is a tool error, not a result.
	failing := runnerFunc(func(context.Context, tool.CommandSpec) (tool.CommandResult, error) {
		return tool.CommandResult{}, errors.New("sandbox unavailable")
	})
	e3 := newEnv(t, func(c *Config) { c.Runner = failing })
	if _, err := e3.tools["Bash"].Run(context.Background(), []byte(`{"command":"ls"}`)); err == nil {
		t.Error("runner error was swallowed")
	}
}

type runnerFunc func(context.Context, tool.CommandSpec) (tool.CommandResult, error)

func (f runnerFunc) Run(ctx context.Context, s tool.CommandSpec) (tool.CommandResult, error) {
	return f(ctx, s)
}

func TestExecRunnerNilEnvIsEmpty(t *testing.T) {
	t.Setenv("CAPSTAN_PARENT_VAR", "inherited")
	res, err := ExecRunner{}.Run(context.Background(), tool.CommandSpec{Command: "env", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Output, "CAPSTAN_PARENT_VAR") {
		t.Error("nil Env inherited the parent environment")
	}
}

func TestHeadTail(t *testing.T) {
	cases := []struct {
		max    int
		chunks []string
	}{
		{10, []string{"hello"}},
		{10, []string{"0123456789"}},
		{10, []string{"0123456789", "A"}},
		{10, []string{"0123456789ABCDEFGHIJ"}},
		{10, []string{"01", "23", "45", "67", "89", "AB", "CD", "EF", "GH", "IJ", "KL"}},
		{7, []string{strings.Repeat("z", 100), "end"}},
		{1, []string{"abc"}},
	}
	for _, c := range cases {
		h := newHeadTail(c.max)
		all := strings.Join(c.chunks, "")
		for _, ch := range c.chunks {
			h.Write([]byte(ch))
		}
		out, trunc, total := h.result()
		if total != int64(len(all)) || trunc != (len(all) > c.max) {
			t.Errorf("%v: total %d trunc %v", c, total, trunc)
		}
		if !trunc {
			if out != all {
				t.Errorf("%v: %q", c, out)
			}
			continue
		}
		half := c.max / 2
		wantHead, wantTail := all[:half], all[len(all)-(c.max-half):]
		if !strings.HasPrefix(out, wantHead+"\n[... ") || !strings.HasSuffix(out, " ...]\n"+wantTail) {
			t.Errorf("%v: %q (head %q tail %q)", c, out, wantHead, wantTail)
		}
		if !strings.Contains(out, fmt.Sprintf("[... %d bytes", len(all)-len(wantHead)-len(wantTail))) {
			t.Errorf("%v: omitted count wrong: %q", c, out)
		}
	}
}

func FuzzHeadTail(f *testing.F) {
	f.Add(10, []byte("0123456789ABCDEFGHIJ"), uint8(3))
	f.Add(4, []byte("héllo wörld"), uint8(1))
	f.Fuzz(func(t *testing.T, max int, data []byte, step uint8) {
		if max <= 0 || max > 1<<16 || step == 0 {
			return
		}
		h := newHeadTail(max)
		for i := 0; i < len(data); i += int(step) {
			h.Write(data[i:min(len(data), i+int(step))])
		}
		out, trunc, total := h.result()
		if total != int64(len(data)) {
			t.Fatalf("total %d", total)
		}
		if !trunc {
			if out != string(data) {
				t.Fatalf("untruncated output differs")
			}
			return
		}
		if len(out) > max+64 {
			t.Fatalf("output %d bytes for max %d", len(out), max)
		}
		tail := string(data[len(data)-(max-max/2):])
		if !strings.HasSuffix(string(data), tail) || !strings.HasPrefix(out, trimPartialRune(string(data[:max/2]))) {
			t.Fatalf("head/tail wrong: %q", out)
		}
	})
}

func TestExecRunnerEscapedDescendantDoesNotHang(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	res, err := ExecRunner{}.Run(context.Background(), tool.CommandSpec{
		Command: "setsid sleep 30 & echo $! > esc.pid; echo parent-done",
		Dir:     dir, Env: []string{"PATH=" + os.Getenv("PATH")}, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "esc.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			defer syscall.Kill(pid, syscall.SIGKILL) // the process this test started
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run waited %v for a process that left the group", d)
	}
	if !strings.Contains(res.Output, "parent-done") || res.ExitCode != 0 || res.TimedOut {
		t.Errorf("result %+v", res)
	}
}

func TestExecRunnerFloodIsBounded(t *testing.T) {
	res, err := ExecRunner{}.Run(context.Background(), tool.CommandSpec{
		Command: "head -c 50000000 /dev/zero | tr '\\0' y; echo; echo END",
		Dir:     t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, MaxOutput: 4096, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.TotalBytes != 50000005 || len(res.Output) > 4200 || !strings.HasSuffix(res.Output, "END\n") {
		t.Errorf("truncated=%v total=%d len=%d tail=%q", res.Truncated, res.TotalBytes, len(res.Output), res.Output[len(res.Output)-20:])
	}
}

// TestExecRunnerKillsSetsidDescendants: a descendant that left the
// process group and session (setsid) is gone when the command returns and
// when the command times out.
func TestExecRunnerKillsSetsidDescendants(t *testing.T) {
	if !proc.SupervisorAvailable() {
		t.Fatal("proc.InitSupervisor was not called in TestMain")
	}
	for _, tc := range []struct {
		name    string
		command string
		timeout time.Duration
	}{
		{"returns", "setsid -f sh -c 'echo $$ > esc.pid; exec sleep 300'; while [ ! -s esc.pid ]; do sleep 0.01; done; echo parent-done", 20 * time.Second},
		{"times out", "setsid -f sh -c 'echo $$ > esc.pid; exec sleep 300'; while [ ! -s esc.pid ]; do sleep 0.01; done; echo parent-done; sleep 300", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res, err := ExecRunner{}.Run(context.Background(), tool.CommandSpec{
				Command: tc.command, Dir: dir, Env: []string{"PATH=" + os.Getenv("PATH")}, Timeout: tc.timeout,
			})
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "esc.pid"))
			if err != nil {
				t.Fatalf("no pid file: %v (%+v)", err, res)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL) // the process this test started
				t.Fatalf("setsid descendant %d outlived the command (%+v)", pid, res)
			}
			if !strings.Contains(res.Output, "parent-done") {
				t.Errorf("output %q", res.Output)
			}
		})
	}
}

// TestToolResultsAreRedactedByValue: a secret value that a tool reads from
// a file or a command prints is replaced in the result, whatever the route.
func TestToolResultsAreRedactedByValue(t *testing.T) {
	t.Setenv("DEPLOY_TOKEN", "dt-0123456789-secret")
	t.Setenv("DATABASE_URL", "postgres://app:db-pass-98765@db/x")
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.work, ".env"), []byte("DEPLOY_TOKEN=dt-0123456789-secret\npw=db-pass-98765\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		tool string
		in   m
	}{
		{"Read", m{"file_path": ".env"}},
		{"Grep", m{"pattern": "secret", "path": ".", "output_mode": "content", "glob": ".env"}},
		{"Bash", m{"command": "cat .env; printf 'dt-0123456789-%s\\n' secret"}},
	} {
		out := e.call(call.tool, call.in).Content
		if strings.Contains(out, "dt-0123456789-secret") || strings.Contains(out, "db-pass-98765") {
			t.Errorf("%s leaked a secret value: %q", call.tool, out)
		}
		if !strings.Contains(out, proc.Redacted) {
			t.Errorf("%s: no redaction marker in %q", call.tool, out)
		}
	}
}

// Config.EnvLater is read by Bash's first command, once, and its entries
// are set in that command's environment and every later one's (replacing
// an entry of the same name); a tool whose model runs no command never
// calls it (an agent reads the user's git identity there, with git
// processes).
func TestBashEnvLaterIsReadByTheFirstCommandOnce(t *testing.T) {
	calls := 0
	e := newEnv(t, func(c *Config) {
		c.Env = []string{"GIT_AUTHOR_NAME=from-env", "EXTRA=1"}
		c.EnvLater = func() []string {
			calls++
			return []string{"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com"}
		}
	})
	mustOK(t, e.call("Glob", m{"pattern": "*"}))
	if calls != 0 {
		t.Fatalf("EnvLater called %d times before any command", calls)
	}
	for range 2 {
		out := mustOK(t, e.call("Bash", m{"command": "env | grep -E '^(GIT_AUTHOR_|EXTRA=)' | sort"}))
		if want := "EXTRA=1\nGIT_AUTHOR_EMAIL=ada@example.com\nGIT_AUTHOR_NAME=Ada"; out != want {
			t.Errorf("command env:\n%s\nwant:\n%s", out, want)
		}
	}
	if calls != 1 {
		t.Errorf("EnvLater called %d times, want 1", calls)
	}
}
