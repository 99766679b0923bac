package skill

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
)

func TestActSandboxViolationEndsRun(t *testing.T) {
	sk := exampleSkill(t)
	secret := filepath.Join(t.TempDir(), "secret.md")
	os.WriteFile(secret, []byte("TOPSECRET"), 0o644)
	os.Symlink(secret, filepath.Join(sk.Root, "link.md"))
	for _, input := range []string{
		`{"path":"../../etc/passwd"}`,
		`{"path":"/etc/passwd"}`,
		`{"path":"link.md"}`,
	} {
		m := &playModel{turns: []playTurn{
			{text: "escape", calls: [][2]string{call("readFile", input), call("listFiles", `{}`)}},
			{text: "never", calls: [][2]string{call("listFiles", `{}`)}},
		}}
		res, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport, Fresh: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitReason != ExitSandboxViolation || res.Metrics.ToolCalls != 1 || !hasUnmet(res, "sandbox_violation") {
			t.Errorf("%s: reason %s calls %d", input, res.ExitReason, res.Metrics.ToolCalls)
		}
		for _, s := range m.seen {
			if strings.Contains(s, "TOPSECRET") || strings.Contains(s, "root:x:") {
				t.Errorf("%s leaked content", input)
			}
		}
	}
}

func TestActScriptsInSandbox(t *testing.T) {
	r := testSandbox()
	if r == nil {
		t.Skip("no sandbox on this machine")
	}
	sk := exampleSkill(t)
	writeTree(t, sk.Root, map[string]string{"scripts/fail.sh": "echo broken >&2; exit 3\n"})
	m := &playModel{turns: []playTurn{
		{text: "count", calls: [][2]string{call("runScript", `{"path":"scripts/stats.py","args":{"argv":["a=done","b=todo"]}}`)}},
		{text: "fail once", calls: [][2]string{call("runScript", `{"path":"scripts/fail.sh"}`)}},
		{text: "same again", calls: [][2]string{call("runScript", `{"path":"scripts/fail.sh"}`)}},
		{text: "retry with params", calls: [][2]string{call("runScript", `{"path":"scripts/fail.sh","args":{"argv":["x"]}}`)}},
		{text: "third", calls: [][2]string{call("runScript", `{"path":"scripts/stats.py","args":{"argv":["c=done"]}}`)}},
	}}
	rec := &fakellm.SinkRecorder{}
	res, err := New(Config{Model: m, Sandbox: r}).Run(llm.WithStreamSink(context.Background(), rec), sk, Input{Goal: "g", Expected: expectReport})
	if err != nil {
		t.Fatal(err)
	}
	// A stream sink sees the memo's refusal and the used-up retry as
	// refused calls, the script's own failures as errors.
	if got, want := strings.Join(rec.Outline(), " "),
		"start:runScript end:runScript start:runScript end:runScript!error start:runScript end:runScript!denied "+
			"start:runScript end:runScript!error start:runScript end:runScript!denied"; got != want {
		t.Errorf("stream outline\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(m.seen[1], `"done_ratio":0.5`) {
		t.Errorf("script output: %s", m.seen[1])
	}
	if !strings.Contains(m.seen[2], `"stderr":"broken"`) || !strings.Contains(m.seen[2], "exit code 3") {
		t.Errorf("failure: %s", m.seen[2])
	}
	if !strings.Contains(m.seen[3], agenterr.CodeSkillRepeatedFailure) {
		t.Errorf("memo: %s", m.seen[3])
	}
	last := res.Evidence[len(res.Evidence)-1]
	if last.OK || !strings.Contains(last.Error, "the one retry after a script failure is used up") {
		t.Errorf("retry budget: %+v", last)
	}
	if ev := res.Evidence[1]; ev.Tool != "runScript" || ev.Stderr != "broken" {
		t.Errorf("stderr not in the evidence: %+v", ev)
	}
	if res.Metrics.ScriptRuns != 3 {
		t.Errorf("script runs %d", res.Metrics.ScriptRuns)
	}
}

func TestActScriptWithoutSandbox(t *testing.T) {
	sk := exampleSkill(t)
	m := &playModel{turns: []playTurn{{text: "count", calls: [][2]string{call("runScript", `{"path":"scripts/stats.py"}`)}}}}
	_, err := New(Config{Model: m}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.seen[1], agenterr.CodeSandboxUnavailable) {
		t.Errorf("%s", m.seen[1])
	}
}

// TestActAdversarialScripts checks the structured failure the model gets
// for scripts that break the sandbox rules.
func TestActAdversarialScripts(t *testing.T) {
	r := testSandbox()
	if r == nil {
		t.Skip("no sandbox on this machine")
	}
	outside := t.TempDir()
	cases := []struct {
		name, script, wantStatus, wantText string
		budgets                            Budgets
	}{
		// Landlock refuses the connect (EACCES) or the empty network
		// namespace has no route (ENETUNREACH).
		{"network", "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=2)\n", "exit", "Permission denied|Network is unreachable", Budgets{}},
		{"write-outside", "open('" + filepath.Join(outside, "x") + "', 'w').write('x')\n", "exit", "Permission denied", Budgets{}},
		{"write-skill-root", "open('evil.txt', 'w').write('x')\n", "exit", "Permission denied", Budgets{}},
		// script_timeout_s is both the CPU and the wall-clock limit: a
		// spin is cpu_limit even when the wall clock ends it first — unless
		// the machine is so loaded (another test's fork bomb running in
		// parallel) that the script barely got a CPU before the clock ran
		// out; then it is an honest timeout. The sandbox package checks the
		// classification itself (TestCPUSpinAtEqualLimitsIsCPULimit).
		{"cpu-spin", "while True:\n    pass\n", "cpu_limit|timeout", "CPU time limit|wall-clock limit", Budgets{ScriptTimeoutS: 1, TimeBudgetMs: 300000}},
		// A hog and a flood are stopped by their own limit long before the
		// CPU limit, with margins: on a loaded machine filling memory (or
		// reclaiming it under a memory cgroup) takes CPU time, and with the
		// default 20 s a busy 2-core machine could reach the CPU limit
		// first (cpu_limit, a verdict that changed under load). The kind of
		// stop is asserted, never how long it took.
		{"memory-hog", "b = bytearray(4 * 1024 * 1024 * 1024)\n", "memory_limit", "address-space limit|MiB of memory", Budgets{ScriptTimeoutS: 300, TimeBudgetMs: 900000}},
		{"flood", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", "output_limit", "stdout exceeded", Budgets{ScriptTimeoutS: 300, TimeBudgetMs: 900000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sk := exampleSkill(t)
			writeTree(t, sk.Root, map[string]string{"scripts/bad.py": c.script})
			m := &playModel{turns: []playTurn{{text: "run", calls: [][2]string{call("runScript", `{"path":"scripts/bad.py"}`)}}}}
			res, err := New(Config{Model: m, Sandbox: r}).Run(context.Background(), sk, Input{Goal: "g", Expected: expectReport, Budgets: c.budgets})
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				OK     bool   `json:"ok"`
				Status string `json:"status"`
				Reason string `json:"reason"`
				Stderr string `json:"stderr"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(m.seen[1])), &got); err != nil {
				t.Fatalf("answer not JSON: %v %.300s", err, m.seen[1])
			}
			if got.OK || !oneOf(got.Status, c.wantStatus) || !containsOneOf(got.Reason+got.Stderr, c.wantText) {
				t.Errorf("model saw %+v", got)
			}
			if res.Evidence[0].OK || res.Evidence[0].Tool != "runScript" {
				t.Errorf("evidence %+v", res.Evidence[0])
			}
			if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
				t.Error("wrote outside")
			}
			if _, err := os.Stat(filepath.Join(sk.Root, "evil.txt")); err == nil {
				t.Error("wrote into the skill root")
			}
		})
	}
}

func oneOf(s, alternatives string) bool {
	for _, a := range strings.Split(alternatives, "|") {
		if s == a {
			return true
		}
	}
	return false
}

func containsOneOf(s, alternatives string) bool {
	for _, a := range strings.Split(alternatives, "|") {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}
