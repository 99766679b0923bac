package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/journal"
)

// A pipeline stage of kind agent runs a real capstan agent; its structured
// result fills the stage's postconditions.
func TestPipelineAgentStageRunsACapstanAgent(t *testing.T) {
	dir := writeFiles(t, withWriterAgent("kites", "Kites fly higher than ever", map[string]string{
		"p.yaml": writerPipeline,
	}))
	t.Chdir(dir) // agent stages act and journal in the current directory
	if out, err := exec.Command("git", "init", "-q").CombinedOutput(); err != nil {
		t.Skipf("git init: %v %s", err, out) // pipeline run reads --repo (default .)
	}
	code, out, errOut := captureConfigCLI(t, "pipeline", "run", "--file", "p.yaml", "--json", "kites")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var ctx map[string]any
	if err := json.Unmarshal([]byte(out), &ctx); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "Kites fly higher than ever") {
		t.Fatalf("the agent's structured result did not fill custom.headline:\n%s", out)
	}
	// The agent's own run is journaled and readable.
	code, out, _ = captureConfigCLI(t, "runs", "--json")
	if code != 0 || !strings.Contains(out, `"agent": "writer"`) || !strings.Contains(out, `"status": "completed"`) {
		t.Fatalf("runs:\n%s", out)
	}
	// The pipeline run is listed next to it, and each names the other.
	var runs []struct {
		RunID string `json:"runId"`
		Agent string `json:"agent"`
	}
	if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 2 {
		t.Fatalf("runs: %v\n%s", err, out)
	}
	ids := map[string]string{}
	for _, r := range runs {
		ids[r.Agent] = r.RunID
	}
	if ids["pipeline"] == "" || ids["writer"] == "" || !strings.Contains(errOut, "(capstan show "+ids["pipeline"]+")") {
		t.Fatalf("runs %v; stderr:\n%s", runs, errOut)
	}
	// The agent's run ran with its definition pinned, as `capstan run` does.
	code, out, _ = captureConfigCLI(t, "show", ids["writer"])
	if code != 0 || !strings.Contains(out, "definition sha256:") ||
		!strings.Contains(out, "stage of pipeline run "+ids["pipeline"]+"  (capstan show "+ids["pipeline"]+")") {
		t.Fatalf("show:\n%s", out)
	}
	if code, out, _ = captureConfigCLI(t, "show", ids["pipeline"]); code != 0 || !strings.Contains(out, "agent agents/writer: run "+ids["writer"]+" completed") {
		t.Fatalf("show pipeline:\n%s", out)
	}
}

// withWriterAgent adds to files the "writer" agent under agents/writer: one
// step that asks for a headline about its topic parameter and is answered,
// by the script provider, with the given headline as structured output
// (checked against the step's schema). The script expects the prompt to
// name topic.
// writerPipeline is a pipeline of one agent stage, the writer agent of
// withWriterAgent, given the request as its topic.
const writerPipeline = `version: 1
inputs: [request]
stages:
  - id: writer
    kind: agent
    dir: agents/writer
    params: {topic: "{{input.request}}"}
    preconditions: [input.request]
    postconditions: [custom.headline]
`

func withWriterAgent(topic, headline string, files map[string]string) map[string]string {
	files["agents/writer/agent.json"] = `{"version": "1.0.0", "name": "writer", "description": "writes a headline",
  "parameters": {"topic": {"type": "string", "description": "topic", "required": true}},
  "runner": {"model": "script:script.yaml", "completion": {"type": "iterationBudget", "maxIterations": 1}}}`
	files["agents/writer/steps_registry.json"] = `{"agentId": "writer", "entryStep": "w", "steps": {"w": {"stepId": "w", "c2": "work", "c3": "w",
  "uvVariables": ["topic"], "outputSchemaRef": {"file": "out.schema.json", "schema": "headline"}}}}`
	files["agents/writer/schemas/out.schema.json"] = `{"headline": {"type": "object", "properties": {"headline": {"type": "string"}}, "required": ["headline"]}}`
	files["agents/writer/prompts/steps/work/w/f_default.md"] = "Write a headline about {uv-topic}."
	files["agents/writer/script.yaml"] = "turns:\n  - expect: {prompt_contains: [\"Write a headline about " + topic + ".\"]}\n" +
		"    structured: {headline: \"" + headline + "\"}\n"
	return files
}

// capstan show and capstan report of a pipeline run name the pipeline, its
// model and each stage's outcome, the failed agent stage's run included.
// The run is kept in the state directory, whatever --journal-dir was: the
// commands it prints, pasted in any directory, show it, report it and list
// it, and so do completion and capstan runs --all; the copy in the journal
// dir, which the agent can write, is never what they read.
func TestShowOfAPipelineRun(t *testing.T) {
	dir := writeFiles(t, withWriterAgent("kites", "Kites", map[string]string{
		"p.yaml": writerPipeline,
	}))
	sh := pasteShell(t, dir)
	elsewhere := pasteShell(t, t.TempDir())
	code, out := sh("git init -q && capstan pipeline run --file p.yaml --journal-dir j not-kites")
	if code == 0 {
		t.Fatalf("a stage whose agent fails: exit 0\n%s", out)
	}
	// The journal line ends with the show command, which works pasted
	// from any directory.
	show := pastedCommand(t, out, "events.jsonl  (")
	id := strings.TrimPrefix(show, "capstan show ")
	if !regexp.MustCompile(`^\d{8}T\d{6}Z-[0-9a-f]{6}$`).MatchString(id) {
		t.Fatalf("show command %q\n%s", show, out)
	}
	if !strings.Contains(out, "journal copy: j/.capstan/runs/"+id+"/events.jsonl\n") {
		t.Fatalf("no journal copy printed:\n%s", out)
	}
	code, out = elsewhere(show)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", show, code, out)
	}
	for _, want := range []string{"pipeline p.yaml  model none", `request "not-kites"`, "work dir " + dir + "\n", "✗ writer  failed", "agent ", "not completed", "NOT COMPLETED"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if code, out := elsewhere("capstan report " + id + " --format markdown -o -"); code != 0 || !strings.Contains(out, "pipeline p.yaml: NOT COMPLETED") || !strings.Contains(out, "`writer` failed") {
		t.Errorf("report: exit %d\n%s", code, out)
	}
	// capstan runs --all lists it from anywhere, with its work dir; capstan
	// runs lists it once in its work dir, and also in the journal dir.
	if code, rout := elsewhere("capstan runs --all"); code != 0 || !regexp.MustCompile(id+` +pipeline +not completed .*`+regexp.QuoteMeta(dir)).MatchString(rout) {
		t.Fatalf("runs --all: exit %d\n%s", code, rout)
	}
	for _, line := range []string{"capstan runs", "capstan runs --workdir j"} {
		if code, rout := sh(line); code != 0 || strings.Count(rout, id) != 1 || !regexp.MustCompile(id+` +pipeline +not completed`).MatchString(rout) {
			t.Fatalf("%s: exit %d\n%s", line, code, rout)
		}
	}
	// It is no agent run: resume refuses it with a show command that works.
	if code, rout := elsewhere("capstan resume " + id); code != exitUsage || !strings.Contains(rout, "is a pipeline run") {
		t.Fatalf("resume: exit %d\n%s", code, rout)
	} else if s := pastedCommand(t, rout, "see how it ended with: "); s != show {
		t.Fatalf("resume names %q, want %q", s, show)
	}
	// Shell completion offers its id anywhere.
	if code, cout := elsewhere("capstan __complete show ''"); code != 0 || !strings.Contains(cout, id+"\n") {
		t.Fatalf("completion: exit %d\n%s", code, cout)
	}
	// The agent stage's run, which the pipeline's account names, names
	// its pipeline run with a command that works pasted.
	m := regexp.MustCompile(`agent agents/writer: run (\S+) not completed`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no agent stage run in:\n%s", out)
	}
	stage := m[1]
	if code, out := elsewhere("capstan show " + stage); code != 0 || !strings.Contains(out, "stage of pipeline run "+id+"  (") {
		t.Fatalf("show %s: exit %d\n%s", stage, code, out)
	} else if back := pastedCommand(t, out, "stage of pipeline run "+id+"  ("); back != show {
		t.Fatalf("the stage names %q, want %q", back, show)
	}
	// A forged copy in the journal dir changes nothing show reads, from
	// the journal dir, the work dir, or anywhere with --workdir.
	copyPath := filepath.Join(dir, "j", ".capstan", "runs", id, "events.jsonl")
	b, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.ReplaceAll(string(b), "not-kites", "forged-kites")
	if err := os.WriteFile(copyPath, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"capstan show " + id + " --workdir j", "cd j && capstan show " + id, "capstan show " + id[:len(id)-1] + " --workdir j"} {
		if code, out := sh(line); code != 0 || strings.Contains(out, "forged") || !strings.Contains(out, `request "not-kites"`) {
			t.Fatalf("%s: exit %d\n%s", line, code, out)
		}
	}
}

// A pipeline journal an older capstan kept only in its --journal-dir is
// still listed and shown with --workdir; an unknown run's hint, pasted,
// lists the runs.
func TestOlderPipelineJournalStillReadable(t *testing.T) {
	dir := t.TempDir()
	id := journal.NewRunID(time.Now())
	w, err := journal.Create(filepath.Join(dir, "j"), id)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(journal.RunStart, map[string]any{"command": "pipeline run", "request": "old request", "repo": ".", "file": "", "model": ""})
	w.Append(journal.RunEnd, map[string]any{"success": true, "status": "completed"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sh := pasteShell(t, dir)
	if code, out := sh("capstan show " + id + " --workdir j"); code != 0 || !strings.Contains(out, `request "old request"`) {
		t.Fatalf("show --workdir j: exit %d\n%s", code, out)
	}
	if code, out := sh("capstan runs --workdir j"); code != 0 || !regexp.MustCompile(id+` +pipeline +completed`).MatchString(out) {
		t.Fatalf("runs --workdir j: exit %d\n%s", code, out)
	}
	code, out := sh("capstan show " + id)
	if code != exitUsage || !strings.Contains(out, "found with --workdir DIR") {
		t.Fatalf("show without --workdir: exit %d\n%s", code, out)
	}
	list := pastedCommand(t, out, "list the runs with: ")
	if code, lout := sh(list); list != "capstan runs --all" || code != 0 {
		t.Fatalf("%s: exit %d\n%s", list, code, lout)
	}
}

// A pipeline that cannot run (a precondition no stage or input produces)
// is a usage error before anything runs, and leaves no run behind.
func TestPipelineThatCannotRunLeavesNoRun(t *testing.T) {
	dir := writeFiles(t, map[string]string{"p.yaml": `version: 1
inputs: [request]
stages:
  - id: writer
    kind: model
    preconditions: [custom.nowhere]
    postconditions: [custom.headline]
`, "s.yaml": "turns:\n  - text: hi\n"})
	sh := pasteShell(t, dir)
	if code, out := sh("git init -q && capstan pipeline run --file p.yaml --model script:s.yaml --journal-dir j x"); code != exitUsage || !strings.Contains(out, "PIPELINE_COMPILE") || strings.Contains(out, "journal") {
		t.Fatalf("exit %d, want %d and no journal\n%s", code, exitUsage, out)
	}
	if code, out := sh("capstan runs"); code != 0 || !strings.Contains(out, "no runs of work dir") {
		t.Fatalf("runs: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "j")); !os.IsNotExist(err) {
		t.Fatalf("journal dir: %v", err)
	}
}

// resume refuses an older pipeline journal found with --workdir; the show
// command it names, pasted where resume ran, shows it.
func TestResumeOfOlderPipelineJournalNamesAWorkingShow(t *testing.T) {
	dir := t.TempDir()
	id := journal.NewRunID(time.Now())
	w, err := journal.Create(filepath.Join(dir, "j"), id)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(journal.RunStart, map[string]any{"command": "pipeline run", "request": "old request", "repo": ".", "file": "", "model": ""})
	w.Append(journal.RunEnd, map[string]any{"success": true, "status": "completed"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sh := pasteShell(t, dir)
	code, out := sh("capstan resume " + id + " --workdir j")
	if code != exitUsage || !strings.Contains(out, "is a pipeline run") {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	show := pastedCommand(t, out, "see how it ended with: ")
	if code, sout := sh(show); code != 0 || !strings.Contains(sout, `request "old request"`) {
		t.Fatalf("%s: exit %d\n%s", show, code, sout)
	}
}

// A journal under the work dir is the agent's to write, chain and all:
// runs prints its words with terminal controls made visible.
func TestRunsMakesControlsOfAWorkDirJournalVisible(t *testing.T) {
	dir := t.TempDir()
	id := journal.NewRunID(time.Now())
	w, err := journal.Create(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(journal.RunStart, map[string]any{"command": "pipeline run", "request": "r", "repo": ".", "file": "", "model": ""})
	w.Append(journal.RunEnd, map[string]any{"success": true, "status": "ok\x1b]0;pwned\x07\x1b[2J"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sh := pasteShell(t, dir)
	code, out := sh("capstan runs")
	if code != 0 || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `ok\u001b]0;pwned\u0007\u001b[2J`) {
		t.Fatalf("runs: exit %d\n%q", code, out)
	}
}
