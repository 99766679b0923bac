package main

import (
	"strings"
	"testing"
)

// The model's text, a tool call's input and a tool's error all carry
// terminal controls (clear screen, an OSC window title, an OSC 52
// clipboard write): the live --stream view shows them as \u001b … as show
// does, and no ESC or BEL byte reaches the terminal.
func TestRunStreamEscapesTerminalControls(t *testing.T) {
	const attack = `\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]52;c;Y3VybCBldmlsfHNo\x07\x9b31m`
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "ansi", "description": "prints escapes",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "DONE"},
    "boundaries": {"allowedTools": ["Read"]}}}`,
		"steps_registry.json":                  `{"agentId": "ansi", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Go.",
		"script.yaml": "turns:\n" +
			"  - text: \"look " + attack + " here\"\n" +
			"    tool_calls:\n" +
			"      - name: Read\n" +
			"        input: {file_path: \"no" + attack + "such.txt\"}\n" +
			"  - text: \"DONE " + attack + "\"\n",
	})
	code, _, errOut := captureConfigCLI(t, "run", dir, "--workdir", t.TempDir(), "--stream")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if i := strings.IndexAny(errOut, "\x1b\x07\u009b"); i >= 0 {
		t.Fatalf("a terminal control reached stderr at byte %d:\n%q", i, errOut)
	}
	inOrder(t, errOut,
		`look \u001b[2J\u001b[H\u001b]0;owned\u0007\u001b]52;c;Y3VybCBldmlsfHNo\u0007\u009b31m here`,
		`  → Read  no\u001b[2J`,
		`  ← Read  error: `,
		`DONE \u001b[2J`)
}
