package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/journal"
)

// `pipeline run --journal-dir W` where W/.capstan/runs is a link planted
// to a folder outside W: no file is created through the link (capstan
// refuses it, naming it); without the link the copy is written in W.
func TestJournalDirDoesNotFollowAPlantedLink(t *testing.T) {
	repo := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	w, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(w, ".capstan"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(w, journal.RunsDir)); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runPipelineCLI(t, "pipeline", "run", "--now", fixedNow, "--repo", repo, "--journal-dir", w, "x")
	if code != exitUsage || !strings.Contains(errOut, "is a symbolic link") {
		t.Fatalf("exit %d, want %d refusing the link\n%s", code, exitUsage, errOut)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("files were created through the link outside the journal dir: %v", entries)
	}
	// A link in place of the run folder's parent, planted while nothing
	// runs, is refused the same way; a real folder works.
	if err := os.Remove(filepath.Join(w, journal.RunsDir)); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut = runPipelineCLI(t, "pipeline", "run", "--now", fixedNow, "--repo", repo, "--journal-dir", w, "x"); code != exitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if runs, err := journal.List(w); err != nil || len(runs) != 1 {
		t.Fatalf("copies in %s: %v %v", w, runs, err)
	}
}

// A run an older capstan kept under the work dir is not resumed: its
// journal, step state and pinned definition are files the agent could
// have written (or planted, as a run that never was). The refusal's hint,
// pasted, resumes it with --trust-workdir-journal, which says first that
// its record is unverified; a run kept in the state directory does not.
func TestResumeOfAWorkDirJournalShowsTheBanner(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "old", "description": "needs two iterations",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "DONE"}, "budgets": {"maxIterations": 1}}}`,
		"steps_registry.json":                  `{"agentId": "old", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Say DONE.",
		"script.yaml":                          "turns:\n  - text: not yet\n  - text: DONE\n",
	})
	work := t.TempDir()
	if code, _, errOut := captureConfigCLI(t, "run", dir, "--workdir", work); code != exitNotCompleted {
		t.Fatalf("run: exit %d, want %d (budget)\n%s", code, exitNotCompleted, errOut)
	}
	paths := runJournals(t, work)
	if len(paths) != 1 {
		t.Fatalf("%d journals", len(paths))
	}
	runDir := filepath.Dir(paths[0])
	id := filepath.Base(runDir)
	const banner = "unverified: recorded inside the work dir, which the agent can write"
	_, _, errOut := captureConfigCLI(t, "resume", id, "--max-iterations", "2", "--workdir", work)
	if strings.Contains(errOut, banner) {
		t.Fatalf("a run in the state directory was called unverified:\n%s", errOut)
	}
	// The same run, moved to where an older capstan kept its journals.
	legacy := filepath.Join(work, journal.RunsDir, id)
	if err := os.MkdirAll(filepath.Dir(legacy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(runDir, legacy); err != nil {
		t.Fatal(err)
	}
	journalPath := filepath.Join(legacy, journal.FileName)
	before, err := os.ReadFile(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := captureConfigCLI(t, "resume", id, "--max-iterations", "3", "--workdir", work)
	if code != exitUsage || !strings.Contains(errOut, "resume: "+banner+": run "+id+"'s journal is ") || !strings.Contains(errOut, "so it is not resumed") {
		t.Fatalf("resume of a work-dir journal: exit %d, want %d refusing it\n%s", code, exitUsage, errOut)
	}
	if after, _ := os.ReadFile(journalPath); string(after) != string(before) {
		t.Fatal("the refused resume wrote to the work-dir journal")
	}
	code, out := pasteShell(t, t.TempDir())(pastedCommand(t, errOut, "resume it with: "))
	if !strings.Contains(out, "capstan: "+banner+": run "+id+"'s journal is ") || strings.Contains(out, "so it is not resumed") {
		t.Fatalf("the pasted hint: exit %d\n%s", code, out)
	}
}

// writeLegacyRun copies a completed run's journal to where an older
// capstan kept it, <work>/.capstan/runs/<id>/events.jsonl, and removes it
// from the state directory; it returns the run's id.
func writeLegacyRun(t *testing.T, work string) string {
	t.Helper()
	code, _, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", work)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	paths := runJournals(t, work)
	if len(paths) != 1 {
		t.Fatalf("%d journals", len(paths))
	}
	id := filepath.Base(filepath.Dir(paths[0]))
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(work, journal.RunsDir, id, journal.FileName)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Dir(paths[0])); err != nil {
		t.Fatal(err)
	}
	return id
}

// A run kept under the work dir (where the agent can write) is never
// shown or listed as a plain completed run: runs, show (text, md) and
// report carry the unverified banner.
func TestWorkDirJournalIsShownUnverified(t *testing.T) {
	work := t.TempDir()
	id := writeLegacyRun(t, work)
	banner := "unverified: recorded inside the work dir, which the agent can write"

	code, out, errOut := captureConfigCLI(t, "runs", "--workdir", work)
	if code != 0 || !strings.Contains(out, "completed (unverified)") || !strings.Contains(errOut, banner) {
		t.Fatalf("runs: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, id) && !strings.Contains(line, "(unverified)") {
			t.Errorf("listed without the mark: %q", line)
		}
	}
	code, out, errOut = captureConfigCLI(t, "runs", "--workdir", work, "--json")
	if code != 0 || !strings.Contains(out, `"unverified": true`) || !strings.Contains(out, `"status": "completed (unverified)"`) {
		t.Fatalf("runs --json: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = captureConfigCLI(t, "show", id, "--workdir", work, "--json")
	if code != 0 || !strings.Contains(out, `"unverified": true`) || !strings.Contains(out, `"unverifiedReason": "`+banner+`"`) || !strings.Contains(out, `"runId": "`+id+`"`) {
		t.Fatalf("show --json: exit %d\n%.2000s\n%s", code, out, errOut)
	}
	code, out, errOut = captureConfigCLI(t, "show", id, "--workdir", work)
	if code != 0 || !strings.HasPrefix(out, banner+"\n") || !strings.Contains(out, "COMPLETED (UNVERIFIED)") {
		t.Fatalf("show: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = captureConfigCLI(t, "show", id, "--workdir", work, "--format", "md")
	if code != 0 || !strings.Contains(out, "> **"+banner+"**") || !strings.Contains(out, "COMPLETED (UNVERIFIED)") {
		t.Fatalf("show --format md: exit %d\n%s", code, out)
	}
	code, out, _ = captureConfigCLI(t, "report", id, "--workdir", work, "-o", "-")
	if code != 0 || !strings.Contains(out, banner) || !strings.Contains(out, "COMPLETED (UNVERIFIED)") {
		t.Fatalf("report: exit %d\n%.3000s", code, out)
	}
	// A journal under the work dir that is a link (to a record kept
	// elsewhere) is not read at all.
	p := filepath.Join(work, journal.RunsDir, id, journal.FileName)
	elsewhere := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.Rename(p, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, p); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = captureConfigCLI(t, "runs", "--workdir", work); strings.Contains(out, id) {
		t.Errorf("a linked journal was listed:\n%s", out)
	}
}
