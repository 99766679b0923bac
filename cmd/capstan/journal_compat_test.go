package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// TestRunsRecordedBeforeTheVerdictStageShowAndResume: testdata/journal-v1
// is a run recorded by capstan before the verdict stage and the event
// stream (a declared completion whose validator failed, then the iteration
// budget). It still shows, and resumes to completion with the pending
// retry prompt (with --reload-definition: it recorded no definition
// snapshot).
func TestRunsRecordedBeforeTheVerdictStageShowAndResume(t *testing.T) {
	const runID = "20261124T213825Z-ae5985"
	root := t.TempDir()
	agentDir, work := filepath.Join(root, "agent"), filepath.Join(root, "work")
	if out, err := exec.Command("cp", "-R", filepath.Join("testdata", "journal-v1", "agent"), agentDir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "journal-v1", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	journalText := strings.NewReplacer("@AGENT@", agentDir, "@WORK@", work).Replace(string(raw))
	runDir := filepath.Join(work, ".capstan", "runs", runID)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, "events.jsonl"), []byte(journalText), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := captureConfigCLI(t, "show", runID, "--workdir", work)
	if code != 0 || !strings.Contains(out+errOut, "out-missing") || !strings.Contains(out+errOut, "max_iterations") {
		t.Fatalf("show: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = captureConfigCLI(t, "resume", runID, "--workdir", work, "--trust-workdir-journal", "--reload-definition", "--max-iterations", "3", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Iterations != 2 || !strings.Contains(res.Reason, "verified by out-exists") {
		t.Fatalf("resumed run: %+v", res)
	}
	// The resumed iteration was sent the pending retry prompt.
	events, err := journal.ReadFile(filepath.Join(runDir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sent := false
	for _, ev := range events {
		var p struct{ Source, Text string }
		if ev.Type == journal.PromptResolved && ev.Iteration == 2 && json.Unmarshal(ev.Data, &p) == nil {
			sent = strings.HasPrefix(p.Source, "retry:out-missing") && strings.HasPrefix(p.Text, "out.txt is missing")
		}
	}
	if !sent {
		t.Fatal("the pending retry prompt was not sent on resume")
	}
	// The old failing validator.result has no output: show prints its
	// line alone, before and after the resume's events.
	code, out, errOut = captureConfigCLI(t, "show", runID, "--workdir", work)
	line := "check ✗ out-exists (file) failed: pattern out-missing, exit 1\n"
	if i := strings.Index(out, line); code != 0 || i < 0 || strings.HasPrefix(out[i+len(line):], "           ") {
		t.Fatalf("show after resume: exit %d\n%s\n%s", code, out, errOut)
	}
}
