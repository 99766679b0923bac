//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
	"github.com/capstan-dev/capstan/tool/builtin"
)

func TestRunScriptJSONAndArgs(t *testing.T) {
	root, _ := skillDir(t, map[string]string{
		"scripts/count.py": `import json, sys
data = sys.stdin.read()
print(json.dumps({"argv": sys.argv[1:], "stdin": data}))
`,
		"scripts/echo.sh":  "echo \"plain $1\"\n",
		"scripts/hello.js": "process.stdout.write(JSON.stringify({js: process.argv.slice(2)}))\n",
	})
	r := sharedRunner(t)
	ctx := context.Background()

	res, err := r.RunScript(ctx, ScriptSpec{Root: root, Path: "scripts/count.py", Args: json.RawMessage(`{"argv":["a","b c"],"stdin":"hello"}`)})
	if err != nil || res.Status != StatusOK {
		t.Fatalf("err %v status %s stderr %q", err, res.Status, res.Stderr)
	}
	var got struct {
		Argv  []string
		Stdin string
	}
	if err := json.Unmarshal(res.Output, &got); err != nil || strings.Join(got.Argv, "|") != "a|b c" || got.Stdin != "hello" {
		t.Errorf("output %s (%v)", res.Output, err)
	}

	// Without "stdin" the whole argument object is piped.
	res, err = r.RunScript(ctx, ScriptSpec{Root: root, Path: "scripts/count.py", Args: json.RawMessage(`{"n":3}`)})
	if err != nil || res.Status != StatusOK {
		t.Fatalf("err %v status %s", err, res.Status)
	}
	if err := json.Unmarshal(res.Output, &got); err != nil || got.Stdin != `{"n":3}` {
		t.Errorf("stdin not the args object: %s", res.Output)
	}

	res, err = r.RunScript(ctx, ScriptSpec{Root: root, Path: "scripts/echo.sh", Args: json.RawMessage(`{"argv":["x"]}`)})
	if err != nil || res.Status != StatusOK || res.Output != nil || res.RawOutput != "plain x\n" || !strings.Contains(res.Note, "not JSON") {
		t.Errorf("raw output: err %v %+v", err, res)
	}

	if _, err := lookProgram("node"); err != nil {
		t.Log("node not installed; skipping the .js case")
		return
	}
	res, err = r.RunScript(ctx, ScriptSpec{Root: root, Path: "scripts/hello.js", Args: json.RawMessage(`{"argv":["n"]}`)})
	if err != nil || res.Status != StatusOK || string(res.Output) != `{"js":["n"]}` {
		t.Errorf("node: err %v status %s out %s stderr %q", err, res.Status, res.Output, res.Stderr)
	}
}

func TestRunScriptAdmission(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "evil.sh"), []byte("echo pwned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, _ := skillDir(t, map[string]string{"bin/tool": "echo hi\n", "ok.sh": "echo ok\n"})
	if err := os.Symlink(filepath.Join(outside, "evil.sh"), filepath.Join(root, "link.sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "linkdir")); err != nil {
		t.Fatal(err)
	}
	r := sharedRunner(t)
	cases := []struct {
		path string
		code string
	}{
		{"../x.sh", agenterr.CodePathEscape},
		{"/etc/passwd.sh", agenterr.CodePathEscape},
		{"link.sh", agenterr.CodePathEscape},
		{"linkdir/evil.sh", agenterr.CodePathEscape},
		{"bin/tool", agenterr.CodeToolInput},
		{"missing.py", agenterr.CodeToolInput},
		{"", agenterr.CodePathEscape},
	}
	for _, c := range cases {
		_, err := r.RunScript(context.Background(), ScriptSpec{Root: root, Path: c.path})
		if agenterr.CodeOf(err) != c.code {
			t.Errorf("%q: err %v, want %s", c.path, err, c.code)
		}
	}
	// build/ replaced by a symlink to elsewhere is refused.
	root2, build2 := skillDir(t, map[string]string{"ok.sh": "echo ok > build/x\n"})
	os.Remove(build2)
	if err := os.Symlink(outside, build2); err != nil {
		t.Fatal(err)
	}
	_, err := r.RunScript(context.Background(), ScriptSpec{Root: root2, Path: "ok.sh"})
	if !errors.Is(err, agenterr.ErrPathEscape) {
		t.Errorf("symlinked build/: err %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Error("wrote through the build/ symlink")
	}
}

func TestCommandRunner(t *testing.T) {
	work := t.TempDir()
	c := &CommandRunner{Runner: sharedRunner(t)}
	ctx := context.Background()
	res, err := c.Run(ctx, tool.CommandSpec{Command: "echo hi > f.txt && cat f.txt && echo oops >&2; echo $HOME $FOO; exit 4", Dir: work, Env: []string{"FOO=bar", "HOME=/root", "PATH=/usr/bin:/bin"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 4 || !strings.HasPrefix(res.Output, "hi\noops\n") || !strings.Contains(res.Output, " bar") || strings.Contains(res.Output, "/root") {
		t.Errorf("%+v", res)
	}
	outside := t.TempDir()
	res, err = c.Run(ctx, tool.CommandSpec{Command: "echo x > " + filepath.Join(outside, "y"), Dir: work, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil || res.ExitCode == 0 || !strings.Contains(res.Output, "Permission denied") {
		t.Errorf("write outside Dir allowed: %+v %v", res, err)
	}
	res, err = c.Run(ctx, tool.CommandSpec{Command: "sleep 20", Dir: work, Timeout: 300 * time.Millisecond, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil || !res.TimedOut || res.ExitCode != -1 {
		t.Errorf("timeout: %+v %v", res, err)
	}
	res, err = c.Run(ctx, tool.CommandSpec{Command: "seq 1 100000", Dir: work, MaxOutput: 1000, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil || !res.Truncated || !strings.HasPrefix(res.Output, "1\n2\n") || !strings.HasSuffix(res.Output, "100000\n") || res.TotalBytes < 500000 {
		t.Errorf("truncation: %v %+v", err, res)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 1 {
		t.Errorf("work dir polluted: %v", entries)
	}
}

// TestBashToolInSandbox plugs the CommandRunner into the built-in Bash tool.
func TestBashToolInSandbox(t *testing.T) {
	work := t.TempDir()
	tools, err := builtin.New(builtin.Config{WorkDir: work, Runner: &CommandRunner{Runner: sharedRunner(t)}})
	if err != nil {
		t.Fatal(err)
	}
	var bash tool.Tool
	for _, tl := range tools {
		if tl.Spec().Name == builtin.NameBash {
			bash = tl
		}
	}
	t.Setenv("PATH", "/root/.pyenv/shims:"+filepath.Join(t.TempDir(), "bin")+":/usr/bin:/bin")
	res, err := bash.Run(context.Background(), json.RawMessage(`{"command":"python3 -c 'print(6*7)' && echo hi > out.txt && cat out.txt"}`))
	if err != nil || res.IsError || !strings.Contains(res.Content, "42") || !strings.Contains(res.Content, "hi") {
		t.Fatalf("%v %+v", err, res)
	}
	res, err = bash.Run(context.Background(), json.RawMessage(`{"command":"cat /etc/shadow; echo x > /tmp/capstan-bash-escape"}`))
	if err != nil || !strings.Contains(res.Content, "Permission denied") {
		t.Fatalf("%v %+v", err, res)
	}
	if _, err := os.Stat("/tmp/capstan-bash-escape"); err == nil {
		t.Error("Bash wrote outside the work dir")
	}
}

// TestNewCommandRunnerFromConfig: the sandbox is the default — an agent
// that says nothing (no sandbox object, or one without "enabled") gets
// the sandbox runner; only "enabled": false opts out.
func TestNewCommandRunnerFromConfig(t *testing.T) {
	sharedRunner(t)
	off, on := false, true
	for name, sb := range map[string]*agentdir.Sandbox{"nil config": nil, "no enabled": {}, "enabled": {Enabled: &on}} {
		if r, err := NewCommandRunner(context.Background(), sb); r == nil || err != nil {
			t.Errorf("%s: %v %v, want the sandbox", name, r, err)
		}
	}
	if r, err := NewCommandRunner(context.Background(), &agentdir.Sandbox{Enabled: &off}); r != nil || err != nil {
		t.Errorf("disabled: %v %v", r, err)
	}
	r, err := NewCommandRunner(context.Background(), &agentdir.Sandbox{Network: &agentdir.SandboxNetwork{All: true}})
	if err != nil || r == nil || !r.Runner.cfg.Network {
		t.Fatalf("network: %v %v", r, err)
	}
}
