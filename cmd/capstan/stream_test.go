package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
)

// inOrder fails unless every want occurs in s, each after the previous.
func inOrder(t *testing.T, s string, want ...string) {
	t.Helper()
	rest := s
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("%q missing (or out of order) in\n%s", w, s)
		}
		rest = rest[i+len(w):]
	}
}

// runStreamed runs the CLI with args (a --stream --json run), which must
// exit 0 with nothing but one JSON object on stdout; it returns that object
// and stderr.
func runStreamed(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	code, out, errOut := captureConfigCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not just the JSON result (%v):\n%s", err, out)
	}
	if strings.Contains(out, "→") || strings.Contains(out, "←") {
		t.Fatalf("streamed output on stdout:\n%s", out)
	}
	return res, errOut
}

func TestRunStreamWritesTextAndToolLinesToStderr(t *testing.T) {
	wd := t.TempDir()
	res, errOut := runStreamed(t, "run", "../../examples/hello", "--workdir", wd, "--stream", "--json")
	if res["success"] != true {
		t.Fatalf("result %v", res)
	}
	inOrder(t, errOut,
		"I'll write the greeting file.\n",
		"  → Write  greeting.txt\n",
		"  ← Write  ok, 1 line (",
		"Wrote greeting.txt. GREETING_WRITTEN\n",
		"[iteration 1] step initial.greet",
		"Reading the file first.\n",
		"  → Read  greeting.txt\n",
		"  ← Read  ok",
		"  → Edit  greeting.txt\n",
		"  ← Edit  ok",
		"greeting.txt now has both lines. HELLO_DONE\n",
		"[iteration 2] step continuation.greet",
		"COMPLETED")
	if strings.Contains(errOut, "Have a nice day") {
		t.Errorf("tool input content printed (only the path should be):\n%s", errOut)
	}
}

func TestRunStreamOffByDefaultOffTerminalAndWithFalse(t *testing.T) {
	for _, args := range [][]string{nil, {"--stream=false"}} {
		wd := t.TempDir()
		code, _, errOut := captureConfigCLI(t, append([]string{"run", "../../examples/hello", "--workdir", wd}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		if strings.Contains(errOut, "→ Write") || strings.Contains(errOut, "I'll write the greeting file.") {
			t.Errorf("%v: streamed although stderr is not a terminal:\n%s", args, errOut)
		}
		if !strings.Contains(errOut, "[iteration 1]") {
			t.Errorf("%v: no progress lines:\n%s", args, errOut)
		}
	}
}

func TestRunQuietStreamShowsOnlyTheStream(t *testing.T) {
	wd := t.TempDir()
	code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", wd, "--quiet", "--stream")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	inOrder(t, errOut, "I'll write the greeting file.\n", "  → Write  greeting.txt\n")
	if strings.Contains(errOut, "[iteration") || strings.Contains(errOut, "capstan: running") {
		t.Errorf("--quiet still printed progress:\n%s", errOut)
	}
}

// The agent's script says a secret that is also in the environment; the
// stream prints it redacted.
func TestRunStreamRedactsEnvironmentSecrets(t *testing.T) {
	const secret = "sk-stream-test-0123456789abcdef"
	t.Setenv("STREAMTEST_API_KEY", secret)
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "leaky", "description": "says a key",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "DONE"}}}`,
		"steps_registry.json":                  `{"agentId": "leaky", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Say it.",
		"script.yaml":                          "turns:\n  - text: \"the key is " + secret + ", DONE\"\n",
	})
	code, _, errOut := captureConfigCLI(t, "run", dir, "--workdir", t.TempDir(), "--stream")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if strings.Contains(errOut, secret) || !strings.Contains(errOut, "the key is [REDACTED], DONE") {
		t.Fatalf("stderr:\n%s", errOut)
	}
}

func streamPrinter(environ ...string) (*progressPrinter, *bytes.Buffer) {
	var buf bytes.Buffer
	p := &progressPrinter{w: &buf, progress: true}
	p.enableStream(environ)
	return p, &buf
}

func TestStreamPrinterRedactsSecretsSplitAcrossDeltas(t *testing.T) {
	p, buf := streamPrinter("OPENAI_API_KEY=sk-abcdefghijklmnop", "HOME=/home/someone-long-enough")
	for _, d := range []string{"key: sk-abc", "defgh", "ijklmnop and sk-ab", "c is not it", "\n", "home is /home/someone-long-enough"} {
		p.TextDelta(d)
	}
	p.end()
	want := "key: [REDACTED] and sk-abc is not it\nhome is /home/someone-long-enough\n"
	if buf.String() != want {
		t.Fatalf("printed %q, want %q", buf.String(), want)
	}
}

func TestStreamPrinterMarksDiscardedText(t *testing.T) {
	p, buf := streamPrinter()
	p.TextDelta("Hello stre")
	p.TextDiscarded("anthropic: stream ended before message_stop (dropped connection)")
	p.TextDelta("Hello streaming world")
	p.end()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 || lines[0] != "Hello stre" || !strings.Contains(lines[1], "⟲ stream interrupted") ||
		!strings.Contains(lines[1], "discarded") || lines[2] != "Hello streaming world" {
		t.Fatalf("printed:\n%s", buf.String())
	}
}

func TestStreamPrinterToolLines(t *testing.T) {
	const secret = "ghp_0123456789abcdefSECRET"
	p, buf := streamPrinter("GITHUB_TOKEN=" + secret)
	p.TextDelta("Running the tests")
	long := "go test ./... && curl -H 'Authorization: token " + secret + "' https://example.invalid/\n" + strings.Repeat("x", 200)
	in, _ := json.Marshal(map[string]string{"command": long})
	p.ToolStart(event.ToolCall{ID: "c1", Name: "Bash", Input: in})
	p.ToolEnd(event.ToolUse{ID: "c1", Name: "Bash", Input: in, IsError: true, DurationMs: 812,
		Output: "--- FAIL: TestX\n" + secret + "\n[exit status 1]"})
	p.ToolStart(event.ToolCall{ID: "c2", Name: "Write", Input: json.RawMessage(`{"file_path":"plan.txt","content":"x"}`)})
	p.ToolEnd(event.ToolUse{ID: "c2", Name: "Write", Denied: true, IsError: true, Output: "permission denied: Write is not allowed in plan mode"})
	p.ToolStart(event.ToolCall{ID: "c3", Name: "Custom", Input: json.RawMessage(`{"a": 1,
 "b": [2, 3]}`)})
	p.ToolEnd(event.ToolUse{ID: "c3", Name: "Custom", Output: "fine\nfine", DurationMs: 50})
	p.end()
	got := buf.String()
	if strings.Contains(got, secret) || strings.Contains(got, "FAIL: TestX") {
		t.Fatalf("secret or tool output printed:\n%s", got)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 7 || lines[0] != "Running the tests" {
		t.Fatalf("lines:\n%s", got)
	}
	if !strings.HasPrefix(lines[1], "  → Bash  go test ./... && curl -H 'Authorization: token [REDACTED]'") ||
		!strings.HasSuffix(lines[1], "…") || len([]rune(lines[1])) > len("  → Bash  ")+maxToolInput {
		t.Errorf("call line %q", lines[1])
	}
	for i, want := range map[int]string{
		2: "  ← Bash  exit 1 (0.8s)",
		3: "  → Write  plan.txt",
		4: "  ✗ Write  denied: Write is not allowed in plan mode",
		5: `  → Custom  {"a":1,"b":[2,3]}`,
		6: "  ← Custom  ok, 2 lines (0.1s)",
	} {
		if lines[i] != want {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
}

// Skill tools answer with structured JSON; a failure shows its message.
func TestStreamPrinterSkillToolAnswers(t *testing.T) {
	p, buf := streamPrinter()
	p.ToolStart(event.ToolCall{ID: "c1", Name: "readFile", Input: json.RawMessage(`{"path":"nope.md"}`)})
	p.ToolEnd(event.ToolUse{ID: "c1", Name: "readFile", IsError: true,
		Output: `{"error":{"code":"TOOL_INPUT","hint":"use listFiles","message":"no file \"nope.md\" in the skill"},"ok":false}`})
	p.ToolStart(event.ToolCall{ID: "c2", Name: "readFile", Input: json.RawMessage(`{"path":"nope.md"}`)})
	p.ToolEnd(event.ToolUse{ID: "c2", Name: "readFile", IsError: true, Denied: true,
		Output: `{"error":{"code":"SKILL_REPEATED_FAILURE","message":"refused: this exact action already failed"},"ok":false}`})
	p.ToolStart(event.ToolCall{ID: "c3", Name: "templateExpand", Input: json.RawMessage(`{"template":"t.tmpl","output":"o.md"}`)})
	p.ToolEnd(event.ToolUse{ID: "c3", Name: "templateExpand", Output: `{"ok":true,"path":"o.md"}`})
	p.end()
	want := []string{
		"  → readFile  nope.md",
		`  ← readFile  error: no file "nope.md" in the skill (0.0s)`,
		"  → readFile  nope.md",
		"  ✗ readFile  denied: refused: this exact action already failed",
		"  → templateExpand  t.tmpl",
		"  ← templateExpand  ok, 1 line (0.0s)",
	}
	if got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("printed:\n%s\nwant:\n%s", buf.String(), strings.Join(want, "\n"))
	}
}
