package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// boundsAgent is an agent whose model makes, in its first turn, calls Read
// calls of big.txt (a file of fileBytes), and then says DONE.
func boundsAgent(t *testing.T, calls, perTurn int) string {
	t.Helper()
	var script strings.Builder
	script.WriteString("turns:\n  - text: reading everything\n    tool_calls:\n")
	for i := range calls {
		if i == 0 {
			script.WriteString("      - {name: Read, input: &r {file_path: big.txt}}\n")
			continue
		}
		script.WriteString("      - {name: Read, input: *r}\n")
	}
	script.WriteString("  - text: DONE\n")
	limit := ""
	if perTurn > 0 {
		limit = fmt.Sprintf(`, "maxToolCallsPerTurn": %d`, perTurn)
	}
	return writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "greedy", "description": "reads a lot",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "DONE"},
    "boundaries": {"allowedTools": ["Read"]` + limit + `}}}`,
		"steps_registry.json":                  `{"agentId": "greedy", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Read.",
		"script.yaml":                          script.String(),
	})
}

// workWithFile is a work dir holding big.txt of lines × 100 bytes.
func workWithFile(t *testing.T, lines int) string {
	t.Helper()
	wd := t.TempDir()
	line := strings.Repeat("x", 99) + "\n"
	if err := os.WriteFile(filepath.Join(wd, "big.txt"), []byte(strings.Repeat(line, lines)), 0o644); err != nil {
		t.Fatal(err)
	}
	return wd
}

// journalEvents decodes a journal's events (type and data).
func journalEvents(t *testing.T, path string) []struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
} {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// One turn of 2,500 Read calls of a 10 KB file: 64 run (the default
// bound), the other 2,436 are answered with an error the model reads, and
// the journal stays a few megabytes (each result is journaled five times:
// its tool.call, the session's messages, the query's result and the
// iteration's summary twice; every call run would make that about 125 MB).
func TestOneTurnOfManyToolCallsIsBounded(t *testing.T) {
	const calls = 2500
	wd := workWithFile(t, 100)
	code, out, errOut := captureConfigCLI(t, "run", boundsAgent(t, calls, 0), "--workdir", wd, "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	paths := runJournals(t, wd)
	if len(paths) != 1 {
		t.Fatalf("%d journals", len(paths))
	}
	st, err := os.Stat(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 8<<20 {
		t.Errorf("journal is %d bytes: a turn's tool calls are not bounded", st.Size())
	}
	ran, denied := 0, 0
	var deniedOut string
	for _, e := range journalEvents(t, paths[0]) {
		var use struct{ Output string }
		switch e.Type {
		case "tool.call":
			ran++
		case "tool.denied":
			denied++
			_ = json.Unmarshal(e.Data, &use)
			deniedOut = use.Output
		case "session.messages":
			var m struct {
				Messages []struct {
					ToolResults []struct {
						Content string `json:"content"`
					} `json:"tool_results"`
				}
			}
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatal(err)
			}
			results := 0
			for _, msg := range m.Messages {
				results += len(msg.ToolResults)
			}
			if results != calls {
				t.Errorf("the transcript answers %d calls, want every one of %d", results, calls)
			}
		}
	}
	if ran != 64 || denied != calls-64 {
		t.Errorf("%d calls ran and %d were refused; want 64 and %d", ran, denied, calls-64)
	}
	if !strings.Contains(deniedOut, "not run: more than 64 tool calls in one turn") ||
		!strings.Contains(deniedOut, "maxToolCallsPerTurn") || !strings.Contains(deniedOut, "next turn") {
		t.Errorf("the model reads %q", deniedOut)
	}
}

// maxToolCallsPerTurn in agent.json sets the bound.
func TestMaxToolCallsPerTurnIsConfigurable(t *testing.T) {
	wd := workWithFile(t, 1)
	code, out, errOut := captureConfigCLI(t, "run", boundsAgent(t, 5, 2), "--workdir", wd, "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	ran, denied := 0, 0
	for _, e := range journalEvents(t, runJournals(t, wd)[0]) {
		switch e.Type {
		case "tool.call":
			ran++
		case "tool.denied":
			denied++
			if !strings.Contains(string(e.Data), "more than 2 tool calls in one turn") {
				t.Errorf("denied with %s", e.Data)
			}
		}
	}
	if ran != 2 || denied != 3 {
		t.Errorf("%d ran, %d refused; want 2 and 3", ran, denied)
	}
}

// 60 Read calls of a 100 KB file (6 MB of results) in one turn: the turn
// keeps 4 MiB of results; the result that passes the budget is cut with a
// marker and the later ones keep only the marker.
func TestOneTurnKeepsABoundedNumberOfBytes(t *testing.T) {
	wd := workWithFile(t, 1000)
	code, out, errOut := captureConfigCLI(t, "run", boundsAgent(t, 60, 0), "--workdir", wd, "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	kept, cut := 0, 0
	for _, e := range journalEvents(t, runJournals(t, wd)[0]) {
		if e.Type != "tool.call" {
			continue
		}
		var use struct{ Output string }
		if err := json.Unmarshal(e.Data, &use); err != nil {
			t.Fatal(err)
		}
		kept += len(use.Output)
		if strings.Contains(use.Output, "[output cut: this turn's tool results reached 4194304 bytes, the most one turn keeps;") {
			cut++
		}
	}
	if kept > 4<<20+60*300 {
		t.Errorf("the turn kept %d bytes of tool results", kept)
	}
	if cut < 10 {
		t.Errorf("%d results carry the cut marker", cut)
	}
}
