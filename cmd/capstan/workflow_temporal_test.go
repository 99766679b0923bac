package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Temporal flags need --temporal, and what cannot act on Temporal is
// refused before anything runs.
func TestWorkflowTemporalFlagsAreChecked(t *testing.T) {
	wd := workflowProject(t)
	store := t.TempDir()
	base := []string{"workflow", "run", "--issue", "7", "--workdir", wd, "--local", store, "--stub-dispatch", "{}"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "2"}, "--concurrency needs --temporal HOST:PORT"},
		{[]string{"--git-repo", "x"}, "--git-repo needs --temporal HOST:PORT"},
		{[]string{"--temporal", "127.0.0.1:1", "--dry-run"}, "drop --temporal"},
		{[]string{"--temporal", "127.0.0.1:1", "--concurrency", "0"}, "--concurrency 0: want at least 1"},
		{[]string{"--temporal", "127.0.0.1:1", "--worker-timeout", "10ms"}, "want at least 1s"},
	} {
		code, _, errOut := runPipelineCLI(t, append(base, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want %q:\n%s", c.args, code, c.want, errOut)
		}
	}
	// A handoff that fires writes files where the agent ran: refused on
	// Temporal; one whose agent no phase dispatches is not.
	file := filepath.Join(wd, ".agent", "workflow.json")
	raw := readFileT(t, file)
	for _, c := range []struct {
		from, want string
		code       int
	}{{"considerer", "has handoffs that fire", exitUsage}, {"reviewer", "connect to Temporal", exitInternal}} {
		h := `"handoffs": [{"id": "h", "when": {"fromAgent": "` + c.from + `", "outcome": "done"}, "emit": {"type": "t", "schemaRef": "s", "path": "p.json"}, "payloadFrom": {"k": "'v'"}, "persistPayloadTo": "none"}],`
		if err := os.WriteFile(file, []byte(strings.Replace(raw, `"rules":`, h+`"rules":`, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runPipelineCLI(t, append(base, "--temporal", "127.0.0.1:1")...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("handoff from %s: exit %d, want %d %q:\n%s", c.from, code, c.code, c.want, errOut)
		}
	}
}
