package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// longAgent reads a 12 KB file in each of 65 iterations through the script
// provider, with a declared context window of 20,000 tokens: about six
// iterations of tool output.
func longAgent(t *testing.T, compaction string) (dir, wd string) {
	t.Helper()
	const iterations = 65
	var script strings.Builder
	script.WriteString("turns:\n")
	for i := 1; i <= iterations; i++ {
		done := ""
		if i == iterations {
			done = " ALL_DONE"
		}
		fmt.Fprintf(&script, "  - tool_calls: [{name: Read, input: {file_path: big.txt}}]\n  - text: \"read it, pass %d%s\"\n", i, done)
	}
	dir = writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "long", "description": "a long run",
  "runner": {"model": "script:script.yaml", "contextWindow": 20000` + compaction + `,
    "completion": {"type": "keyword", "keyword": "ALL_DONE"},
    "budgets": {"maxIterations": 70}}}`,
		"steps_registry.json":                  `{"agentId": "long", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Read big.txt and report; pass {uv-iteration}.",
		"script.yaml":                          script.String(),
	})
	wd = t.TempDir()
	big := strings.Repeat("a line of a large test log that the model reads again and again\n", 190)
	if err := os.WriteFile(filepath.Join(wd, "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, wd
}

func TestLongRunCompactsWithinTheWindowAndShowsIt(t *testing.T) {
	dir, wd := longAgent(t, "")
	code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", wd, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("run exit %d\n%s\n%s", code, out, errOut)
	}
	var res struct {
		Success    bool   `json:"success"`
		Iterations int    `json:"iterations"`
		RunID      string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Success || res.Iterations != 65 {
		t.Fatalf("result %+v (%v)\n%s", res, err, out)
	}
	code, out, _ = captureConfigCLI(t, "show", res.RunID, "--workdir", wd)
	if code != 0 || !strings.Contains(out, "context: context compacted: ~") || !strings.Contains(out, "tool outputs stubbed") || !strings.Contains(out, "tokens in ") ||
		!strings.Contains(out, "COMPLETED") {
		t.Fatalf("show (exit %d) lacks the compaction or the usage split:\n%.3000s", code, out)
	}
}

func TestLongRunWithCompactionOffStopsWithContextOverflow(t *testing.T) {
	dir, wd := longAgent(t, `, "compaction": {"enabled": false}`)
	code, out, _ := captureConfigCLI(t, "run", dir, "--workdir", wd, "--json", "--quiet")
	if code == 0 || !strings.Contains(out, `"CONTEXT_OVERFLOW"`) {
		t.Fatalf("run exit %d, want a CONTEXT_OVERFLOW failure:\n%.2000s", code, out)
	}
}
