package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/proc"
)

// TestRunKeepsKeysFromBash reproduces the attack through the real
// CLI: a scripted model runs Bash commands that read env, their own
// environ, their parent's, capstan's (found through the parent) and
// capstan's memory. No key may appear in anything the run writes — the
// journal, the transcript, the CLI output — while the probe's own output
// is recorded.
func TestRunKeepsKeysFromBash(t *testing.T) {
	// Everything is also printed reversed: redaction by value cannot
	// recognise a transformed key, so only keeping it out of reach helps.
	const probe = `{ echo PROBE-RAN; env; tr '\0' '\n' < /proc/self/environ; tr '\0' '\n' < /proc/$PPID/environ; ` +
		`C=$(awk '{print $4}' /proc/$PPID/stat); tr '\0' '\n' < /proc/$C/environ; ` +
		`head -c 4096 /proc/$C/mem | tr -cd '[:print:]'; } 2>&1 | tee /dev/stderr | rev; echo PROBE-END`
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "probe", "description": "looks for keys",
  "runner": {"model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "default"}}}`,
		"steps_registry.json":                  `{"agentId": "probe", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Find the keys.",
		"script.yaml":                          "turns:\n  - tool_calls: [{name: Bash, input: {command: " + strings.ReplaceAll(jsonString(probe), "\n", " ") + "}}]\n  - text: \"ALL_DONE\"\n",
	})
	wd, state := t.TempDir(), t.TempDir()
	secrets := map[string]string{
		"ANTHROPIC_API_KEY":     "sk-ant-e2e-0123456789abcdef",
		"OPENAI_API_KEY":        "sk-openai-e2e-0123456789",
		"GITHUB_TOKEN":          "ghp_e2e0123456789abcdef",
		"AWS_SECRET_ACCESS_KEY": "aws-e2e-secret-0123456789",
		"DATABASE_URL":          "postgres://app:db-e2e-password-42@db/x",
		// Credentials under names no secret rule knows: only the
		// allow-list keeps them out of reach (no redaction would catch
		// them).
		"ACME_CONN_STRING": "acme-e2e-conn-0123456789",
		"VAULT_ROLE_ID":    "vault-e2e-role-0123456789",
		"PGPASSWORD":       "pg-e2e-password-0123456789",
		"OP_SESSION_team":  "op-e2e-session-0123456789",
	}
	cmd := cliCommand("run", dir, "--workdir", wd)
	for k, v := range secrets {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "HOME="+state, "CAPSTAN_STATE_DIR="+filepath.Join(state, "state"), "XDG_STATE_HOME="+filepath.Join(state, "state"), "XDG_DATA_HOME="+filepath.Join(state, "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	leaks := func(where, text string) {
		for k, v := range secrets {
			needle := v
			if k == "DATABASE_URL" {
				needle = "db-e2e-password-42"
			}
			if strings.Contains(text, needle) || strings.Contains(text, reverse(needle)) {
				t.Errorf("%s contains the value of %s", where, k)
			}
		}
	}
	leaks("CLI output", string(out))
	ran := false
	for _, root := range []string{wd, state} {
		_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || !fi.Mode().IsRegular() {
				return nil
			}
			b, _ := os.ReadFile(p)
			leaks(p, string(b))
			ran = ran || strings.Contains(string(b), "PROBE-END")
			return nil
		})
	}
	if !ran {
		t.Fatalf("the probe's output was not recorded anywhere; output:\n%s", out)
	}
}

// reverse reverses an ASCII string.
func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// TestRunLeavesNoProcessBehind: in a run that opted out of the sandbox, a
// validator command that starts a setsid background job (outside any
// process group capstan kills) does not leave it running after `capstan
// run` exits: capstan adopts and kills it. (Sandboxed, the PID namespace
// ends it; the pid it writes would be the namespace's.)
func TestRunLeavesNoProcessBehind(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "orphan", "description": "leaves a job behind",
  "runner": {"model": "script:script.yaml", "boundaries": {"sandbox": {"enabled": false}},
    "completion": {"type": "keyword", "keyword": "ALL_DONE", "validators": ["spawn"]}}}`,
		"steps_registry.json": `{"agentId": "orphan", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main", "completionConditions": [{"validator": "spawn"}]}},
  "validators": {"spawn": {"type": "command", "command": "setsid -f sh -c 'echo $$ > orphan.pid; exec sleep 300'; while [ ! -s orphan.pid ]; do sleep 0.01; done", "successWhen": "exitCode:0", "failurePattern": "test-failed"}}}`,
		"prompts/steps/work/main/f_default.md": "Do it.",
		"script.yaml":                          "turns:\n  - text: \"ALL_DONE\"\n",
	})
	wd := t.TempDir()
	out, err := cliCommand("run", dir, "--workdir", wd).CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(wd, "orphan.pid"))
	if err != nil {
		t.Fatalf("the validator did not run: %v\n%s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(pid, 0) == nil {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(st), ") Z") {
			_ = syscall.Kill(pid, syscall.SIGKILL) // the process this test caused
			t.Fatalf("the validator's setsid job %d outlived capstan run", pid)
		}
	}
}

// TestRunRedactsSecretsTheModelEchoes: a model that learned a key (from a
// pasted prompt, a file it read) echoes it in its text and in a Write
// input. The journal, `capstan show` and the file written carry
// [REDACTED] instead; the journal's session transcript, which later
// requests and resume are built from, holds no trace of the value.
func TestRunRedactsSecretsTheModelEchoes(t *testing.T) {
	const key = "sk-echo-e2e-0123456789abcdef"
	t.Setenv("ECHO_E2E_API_KEY", key)
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "echo", "description": "echoes a key",
  "runner": {"model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "boundaries": {"allowedTools": ["Write"], "permissionMode": "acceptEdits"}}}`,
		"steps_registry.json":                  `{"agentId": "echo", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Write the key down.",
		"script.yaml": "turns:\n  - text: \"the key is " + key + "\"\n    tool_calls: [{name: Write, input: {file_path: key.txt, content: \"" + key + "\"}}]\n" +
			"  - text: \"still " + key + "\"\n  - text: \"ALL_DONE " + key + "\"\n",
	})
	wd := t.TempDir()
	code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("run exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, key) {
		t.Errorf("run output holds the key:\n%s\n%s", out, errOut)
	}
	var res struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.RunID == "" {
		t.Fatalf("no run id (%v):\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(wd, "key.txt")); err != nil || string(b) != proc.Redacted {
		t.Errorf("key.txt = %q, %v; want %q", b, err, proc.Redacted)
	}
	journals := runJournals(t, wd)
	if len(journals) != 1 {
		t.Fatalf("journals: %v", journals)
	}
	b, err := os.ReadFile(journals[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), key) || !strings.Contains(string(b), "the key is "+proc.Redacted) {
		t.Errorf("journal holds the key or lacks the redacted text:\n%s", b)
	}
	events, err := journal.ReadFile(journals[0])
	if err != nil {
		t.Fatal(err)
	}
	for id, msgs := range llm.TranscriptsFromEvents(events) {
		m, _ := json.Marshal(msgs)
		if strings.Contains(string(m), key) || !strings.Contains(string(m), proc.Redacted) {
			t.Errorf("session %s transcript holds the key or no redaction: %s", id, m)
		}
	}
	code, out, _ = captureConfigCLI(t, "show", res.RunID, "--workdir", wd)
	if code != 0 || strings.Contains(out, key) || !strings.Contains(out, proc.Redacted) {
		t.Errorf("show (exit %d) holds the key or no redaction:\n%s", code, out)
	}
}
