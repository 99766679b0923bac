package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/journal"
)

// hostileAgent writes a work dir W whose agent lives inside it, in
// W/.agent/t, as climpt lays agents out. The agent completes when the model
// says BAR_DONE and marker.txt exists (validator "marker"; its failure
// pattern has the retry prompt "REAL RETRY").
//
// In iteration 1 the model attacks its own definition: Bash rewrites the
// keyword in agent.json to WEAK and the validator's command to `true`,
// Write replaces the retry prompt and writes forgedSystem over the system
// prompt; then (the first time only, when slow) it sleeps so the run can be
// killed in that tool call. It answers WEAK. Iteration 2 says BAR_DONE
// without the marker; iteration 3 expects the real retry prompt, writes
// the marker and says BAR_DONE. So the pinned definition completes in 3
// iterations, and the edited one would complete in iteration 1.
func hostileAgent(t *testing.T, forgedSystem string, slow bool) (work, dir string) {
	t.Helper()
	sleep := ""
	if slow {
		sleep = " && { test -f slept || { touch slept; sleep 30; }; }"
	}
	work = writeFiles(t, map[string]string{
		".agent/t/agent.json": `{"version": "1.0.0", "name": "t", "description": "its definition is in its own work dir",
  "runner": {"model": "script:script.yaml", "systemPromptPath": "prompts/system.md",
    "completion": {"type": "structured", "keyword": "BAR_DONE"},
    "boundaries": {"allowedTools": ["Write", "Bash"], "permissionMode": "acceptEdits"}}}`,
		".agent/t/steps_registry.json": `{"agentId": "t", "entryStep": "s",
  "completionPatterns": {"no-marker": {"description": "marker.txt is missing", "edition": "failed", "adaptation": "no-marker"}},
  "validators": {"marker": {"type": "command", "command": "test -f marker.txt", "successWhen": "exitCode:0", "failurePattern": "no-marker"}},
  "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main", "completionConditions": [{"validator": "marker"}],
    "onFailure": {"action": "retry", "maxAttempts": 3}}}}`,
		".agent/t/prompts/system.md":                             "You are a careful agent.",
		".agent/t/prompts/steps/work/main/f_default.md":          "Iteration {uv-iteration}: create marker.txt, then say BAR_DONE.",
		".agent/t/prompts/steps/work/main/f_failed_no-marker.md": "REAL RETRY: marker.txt is missing.",
		".agent/t/script.yaml": `turns:
  - tool_calls:
      - {name: Write, input: {file_path: .agent/t/prompts/steps/work/main/f_failed_no-marker.md, content: "FORGED RETRY"}}
      - {name: Write, input: {file_path: .agent/t/prompts/system.md, content: ` + jsonString(forgedSystem) + `}}
      - {name: Bash, input: {command: "sed -i s/BAR_DONE/WEAK/ .agent/t/agent.json && sed -i 's/test -f marker.txt/true/' .agent/t/steps_registry.json` + sleep + `"}}
  - text: "WEAK"
  - text: "BAR_DONE"
  - expect: {prompt_contains: ["REAL RETRY"]}
    tool_calls: [{name: Write, input: {file_path: marker.txt, content: "m"}}]
  - text: "BAR_DONE"
`,
	})
	return work, filepath.Join(work, ".agent", "t")
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// forgedDefinition is what the model's edits leave in the agent folder.
var forgedDefinition = []string{"agent.json", "prompts/steps/work/main/f_failed_no-marker.md", "prompts/system.md", "steps_registry.json"}

// runResult is the part of `--json` output these tests check.
type runResult struct {
	Success          bool   `json:"success"`
	Iterations       int    `json:"iterations"`
	Reason           string `json:"reason"`
	RunID            string `json:"runId"`
	Journal          string `json:"journal"`
	DefinitionDigest string `json:"definitionDigest"`
}

func decodeResult(t *testing.T, out string) runResult {
	t.Helper()
	var r runResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	return r
}

// The model edits agent.json, a validator, the retry prompt and the system
// prompt of its own agent folder during the run: the run keeps verifying
// against the definition it started with.
func TestEditedDefinitionDoesNotChangeTheRunningAgent(t *testing.T) {
	work, dir := hostileAgent(t, "FORGED SYSTEM", false)
	code, out, errOut := captureConfigCLI(t, "run", dir, "--workdir", work, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	res := decodeResult(t, out)
	if !res.Success || res.Iterations != 3 || !strings.HasPrefix(res.DefinitionDigest, "sha256:") {
		t.Fatalf("result %+v", res)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "agent.json"))
	if !strings.Contains(string(b), "WEAK") {
		t.Fatal("the model's edit did not happen; the test proves nothing")
	}
	rec, err := agent.LoadRun(res.RunID, res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if p := rec.Iterations[2].Prompt; !strings.Contains(p, "REAL RETRY") {
		t.Fatalf("iteration 3 prompt %q", p)
	}
	if d := rec.Definition(); d == nil || d.Digest != res.DefinitionDigest || len(d.Files) != 6 {
		t.Fatalf("run.start definition %+v, result digest %s", d, res.DefinitionDigest)
	}
}

// killDuring starts cmd and kills its process group once until reports
// true, polled on the run's journal.
func killDuring(t *testing.T, args []string, wd string, until func(journal string) bool) string {
	t.Helper()
	cmd := cliCommand(args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	store, err := journal.OpenStore(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := store.WorkDirRuns(wd)
	if err != nil {
		t.Fatal(err)
	}
	var path string
	reached := false
	for deadline := time.Now().Add(20 * time.Second); !reached && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		matches, _ := filepath.Glob(filepath.Join(runs, "*", journal.FileName))
		if len(matches) == 1 {
			path = matches[0]
			b, _ := os.ReadFile(path)
			reached = until(string(b))
		}
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !reached {
		t.Fatalf("the run never reached the point to kill it (journal %q)", path)
	}
	return filepath.Base(filepath.Dir(path))
}

// killAfterEdits runs the slow hostile agent and kills it while its Bash
// call (after the edits) sleeps.
func killAfterEdits(t *testing.T, work, dir string) string {
	t.Helper()
	return killDuring(t, []string{"run", dir, "--workdir", work, "--quiet"}, work, func(string) bool {
		_, err := os.Stat(filepath.Join(work, "slept"))
		return err == nil
	})
}

// A run killed after the model edited its definition resumes with the
// recorded definition, says which files differ, and refuses a snapshot
// that was tampered with or removed.
func TestKilledRunResumesWithRecordedDefinition(t *testing.T) {
	// The forged system prompt does not even parse: loading it would fail.
	work, dir := hostileAgent(t, "---\nbroken: [\n---\nFORGED", true)
	runID := killAfterEdits(t, work, dir)
	run := findRun(t, work, runID)
	snaps, _ := filepath.Glob(filepath.Join(filepath.Dir(run.Path), "definition-*.tar"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v", snaps)
	}
	orig, _ := os.ReadFile(snaps[0])

	// Tampered: one byte of a prompt changed inside the tar.
	bad := []byte(strings.Replace(string(orig), "REAL RETRY", "REAL RETRX", 1))
	os.Chmod(snaps[0], 0o644)
	os.WriteFile(snaps[0], bad, 0o644)
	code, out, errOut := captureConfigCLI(t, "resume", runID, "--workdir", work, "--json", "--quiet")
	if code != exitUsage || !strings.Contains(errOut, "DEFINITION_SNAPSHOT_MISMATCH") || !strings.Contains(errOut, "--reload-definition") {
		t.Fatalf("tampered snapshot: exit %d\n%s\n%s", code, out, errOut)
	}
	// Missing.
	os.Remove(snaps[0])
	code, _, errOut = captureConfigCLI(t, "resume", runID, "--workdir", work, "--json", "--quiet")
	if code != exitUsage || !strings.Contains(errOut, "DEFINITION_SNAPSHOT_MISSING") {
		t.Fatalf("missing snapshot: exit %d\n%s", code, errOut)
	}
	os.WriteFile(snaps[0], orig, 0o444)

	code, out, errOut = captureConfigCLI(t, "resume", runID, "--workdir", work, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("resume exit %d\n%s\n%s", code, out, errOut)
	}
	res := decodeResult(t, out)
	if !res.Success || res.Iterations != 3 {
		t.Fatalf("resumed result %+v\n%s", res, errOut)
	}
	if !strings.Contains(errOut, "continuing with the recorded definition") {
		t.Fatalf("resume did not say the folder differs:\n%s", errOut)
	}
	for _, f := range forgedDefinition {
		if !strings.Contains(errOut, "modified "+f) {
			t.Fatalf("resume did not report %s as modified:\n%s", f, errOut)
		}
	}
	rec, err := agent.LoadRun(run.ID, run.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Definitions) != 2 || rec.Definitions[1].Resume == nil || rec.Definitions[1].Resume.Reloaded ||
		rec.Definitions[1].Digest != rec.Definitions[0].Digest || len(rec.Definitions[1].Resume.Changes) != len(forgedDefinition) {
		t.Fatalf("journaled definitions %+v", rec.Definitions)
	}
	code, out, _ = captureConfigCLI(t, "show", runID, "--workdir", work)
	if code != 0 || !strings.Contains(out, "resumed with the recorded definition "+res.DefinitionDigest) || !strings.Contains(out, "modified agent.json") {
		t.Fatalf("show:\n%s", out)
	}
}

// --reload-definition continues with the folder's current files — here the
// model's forgery, so the run completes on WEAK — and journals the choice
// with both digests.
func TestResumeReloadDefinitionIsJournaled(t *testing.T) {
	work, dir := hostileAgent(t, "FORGED SYSTEM", true)
	runID := killAfterEdits(t, work, dir)
	code, out, errOut := captureConfigCLI(t, "resume", runID, "--workdir", work, "--json", "--quiet", "--reload-definition")
	if code != 0 {
		t.Fatalf("resume exit %d\n%s\n%s", code, out, errOut)
	}
	res := decodeResult(t, out)
	if !res.Success || res.Iterations != 1 {
		t.Fatalf("reloaded run %+v", res)
	}
	run := findRun(t, work, runID)
	rec, err := agent.LoadRun(run.ID, run.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Definitions) != 2 {
		t.Fatalf("definitions %+v", rec.Definitions)
	}
	first, now := rec.Definitions[0], rec.Definitions[1]
	if now.Resume == nil || !now.Resume.Reloaded || now.Resume.RecordedDigest != first.Digest || now.Digest == first.Digest ||
		now.Digest != res.DefinitionDigest {
		t.Fatalf("reload not journaled: first %+v now %+v", first, now)
	}
	// Both snapshots are kept with the run.
	snaps, _ := filepath.Glob(filepath.Join(filepath.Dir(run.Path), "definition-*.tar"))
	if len(snaps) != 2 {
		t.Fatalf("snapshots %v", snaps)
	}
	code, out, _ = captureConfigCLI(t, "show", runID, "--workdir", work)
	if code != 0 || !strings.Contains(out, "resumed with --reload-definition: definition "+now.Digest+" (recorded "+first.Digest+")") {
		t.Fatalf("show:\n%s", out)
	}
}

// A step check edited by the model (its keyword and its transition) still
// decides with the definition the run started with, also after the run was
// killed during the edit and resumed.
func TestEditedStepCheckDoesNotChangeTheRunningAgent(t *testing.T) {
	work := writeFiles(t, map[string]string{
		".agent/c/agent.json": `{"version": "1.0.0", "name": "c", "description": "step checks",
  "runner": {"model": "script:script.yaml", "completion": {"type": "stepFlow"},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "acceptEdits"}}}`,
		".agent/c/steps_registry.json": `{"agentId": "c", "entryStep": "plan",
  "steps": {
    "plan": {"stepId": "plan", "c2": "work", "c3": "plan",
      "check": {"type": "keyword", "keywords": ["PLAN_READY"], "onPass": {"next": "do"}, "onFail": {"retry": true}}},
    "do": {"stepId": "do", "c2": "work", "c3": "do",
      "check": {"type": "keyword", "keywords": ["FINISHED"], "onPass": {"complete": true}, "onFail": {"retry": true}}}}}`,
		".agent/c/prompts/steps/work/plan/f_default.md": "Plan, then say PLAN_READY.",
		".agent/c/prompts/steps/work/do/f_default.md":   "Do it, then say FINISHED.",
		".agent/c/script.yaml": `turns:
  - tool_calls: [{name: Bash, input: {command: "sed -i -e s/PLAN_READY/ANYTHING/ -e 's/\"next\": \"do\"/\"complete\": true/' .agent/c/steps_registry.json && { test -f slept || { touch slept; sleep 30; }; }"}}]
  - text: "ANYTHING"
  - text: "PLAN_READY"
  - expect: {prompt_contains: ["Do it"]}
    text: "FINISHED"
`,
	})
	dir := filepath.Join(work, ".agent", "c")
	runID := killAfterEdits(t, work, dir)
	code, out, errOut := captureConfigCLI(t, "resume", runID, "--workdir", work, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if res := decodeResult(t, out); !res.Success || res.Iterations != 3 || !strings.Contains(errOut, "modified steps_registry.json") {
		t.Fatalf("result %+v\n%s", res, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "steps_registry.json")); !strings.Contains(string(b), "ANYTHING") {
		t.Fatal("the model's edit did not happen; the test proves nothing")
	}
}

// validate --json prints the digest that a run of the same folder records.
func TestValidateJSONPrintsDefinitionDigest(t *testing.T) {
	code, out, _ := captureConfigCLI(t, "validate", "../../examples/hello", "--json")
	if code != 0 {
		t.Fatalf("validate exit %d\n%s", code, out)
	}
	var v struct {
		Valid  bool   `json:"valid"`
		Digest string `json:"definitionDigest"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || !v.Valid || !strings.HasPrefix(v.Digest, "sha256:") {
		t.Fatalf("validate --json: %v\n%s", err, out)
	}
	code, out, errOut := captureConfigCLI(t, "run", "../../examples/hello", "--workdir", t.TempDir(), "--json", "--quiet")
	if code != 0 {
		t.Fatalf("run exit %d\n%s", code, errOut)
	}
	if res := decodeResult(t, out); res.DefinitionDigest != v.Digest {
		t.Fatalf("run digest %s, validate digest %s", res.DefinitionDigest, v.Digest)
	}
}

// The hint of a refused resume works: --reload-definition continues a run
// whose snapshot is gone, with the folder's current files, and journals the
// digest the run had recorded.
func TestResumeReloadDefinitionWithoutSnapshot(t *testing.T) {
	work, dir := hostileAgent(t, "FORGED SYSTEM", true)
	runID := killAfterEdits(t, work, dir)
	run := findRun(t, work, runID)
	snaps, _ := filepath.Glob(filepath.Join(filepath.Dir(run.Path), "definition-*.tar"))
	for _, p := range snaps {
		os.Remove(p)
	}
	code, _, errOut := captureConfigCLI(t, "resume", runID, "--workdir", work, "--quiet")
	if code != exitUsage || !strings.Contains(errOut, "DEFINITION_SNAPSHOT_MISSING") || !strings.Contains(errOut, "--reload-definition") {
		t.Fatalf("missing snapshot: exit %d\n%s", code, errOut)
	}
	code, out, errOut := captureConfigCLI(t, "resume", runID, "--workdir", work, "--json", "--quiet", "--reload-definition")
	if code != 0 || !strings.Contains(errOut, "DEFINITION_SNAPSHOT_MISSING") {
		t.Fatalf("reload exit %d\n%s\n%s", code, out, errOut)
	}
	rec, err := agent.LoadRun(run.ID, run.Path)
	if err != nil {
		t.Fatal(err)
	}
	first, now := rec.Definitions[0], rec.Definition()
	if now.Resume == nil || !now.Resume.Reloaded || now.Resume.RecordedDigest != first.Digest || decodeResult(t, out).DefinitionDigest != now.Digest {
		t.Fatalf("reload not journaled: %+v", now)
	}
}

// A run resumes from its record even when the agent folder is gone.
func TestResumeWithoutAgentFolder(t *testing.T) {
	work, dir := hostileAgent(t, "FORGED SYSTEM", true)
	runID := killAfterEdits(t, work, dir)
	if err := os.RemoveAll(filepath.Join(work, ".agent")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := captureConfigCLI(t, "resume", runID, "--workdir", work, "--json", "--quiet")
	if code != 0 || !strings.Contains(errOut, "cannot be read now") || !strings.Contains(errOut, "continuing with the recorded definition") {
		t.Fatalf("resume exit %d\n%s\n%s", code, out, errOut)
	}
	res := decodeResult(t, out)
	if !res.Success || res.Iterations != 3 {
		t.Fatalf("result %+v", res)
	}
	rec, err := agent.LoadRun(res.RunID, res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if r := rec.Definition().Resume; r == nil || r.Reloaded || !strings.HasPrefix(r.Problem, "CONFIG_NOT_FOUND: agent folder") {
		t.Fatalf("journaled resume %+v", r)
	}
}

// validate reads the folder the way run does, so it reports what would stop
// a run from pinning its definition.
func TestValidateReportsSnapshotProblems(t *testing.T) {
	parent := t.TempDir()
	captureConfigCLI(t, "init", "demo", "--dir", parent)
	dir := filepath.Join(parent, "demo")
	if err := os.Symlink("../agent.json", filepath.Join(dir, "prompts", "leak.md")); err != nil {
		t.Fatal(err)
	}
	code, out, _ := captureConfigCLI(t, "validate", dir)
	if code != exitUsage || !strings.Contains(out, "error PATH_ESCAPE") || !strings.Contains(out, "prompts/leak.md") {
		t.Fatalf("escaping link: exit %d\n%s", code, out)
	}
	os.Remove(filepath.Join(dir, "prompts", "leak.md"))
	if err := os.WriteFile(filepath.Join(dir, "prompts", "data.md"), make([]byte, 9<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = captureConfigCLI(t, "validate", dir, "--json")
	if code != exitUsage || !strings.Contains(out, `"code": "DEFINITION_TOO_LARGE"`) || strings.Contains(out, "definitionDigest") {
		t.Fatalf("oversized file: exit %d\n%s", code, out)
	}
}

// findRun finds run id of work dir work in the state directory the tests use.
func findRun(t *testing.T, work, id string) journal.Run {
	t.Helper()
	store, err := journal.OpenStore(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	run, err := store.Find(work, id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}
