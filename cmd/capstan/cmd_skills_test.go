package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/sandbox"
)

// copyDir copies the example skills into a temp dir so runs do not write
// into the repository.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			if fi.Name() == "build" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestSkillsList(t *testing.T) {
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	code, out, _ := captureConfigCLI(t, "skills", "list", dir, "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got struct {
		Skills []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"skills"`
		Warnings []json.RawMessage `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Skills) != 1 || got.Skills[0].ID != "status-report" || len(got.Warnings) != 0 {
		t.Fatalf("%v %s", err, out)
	}
	if code, _, _ := captureConfigCLI(t, "skills", "list", filepath.Join(dir, "nope")); code != exitUsage {
		t.Errorf("missing dir exit %d", code)
	}
}

func TestSkillsRunExample(t *testing.T) {
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	workDir := t.TempDir()
	args := exampleSkillArgs(t, dir, workDir, "--json")
	code, out, stderr := captureConfigCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var res struct {
		Completed  bool
		ExitReason string
		Metrics    struct{ ToolCalls, ScriptRuns int }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Completed || res.ExitReason != "validated" {
		t.Fatalf("%v %s", err, out)
	}
	// Artifacts go to the work dir, never into the skill's own folder.
	b, err := os.ReadFile(filepath.Join(workDir, "build", "report.json"))
	if err != nil || !strings.Contains(string(b), `"generated_by": "status-report"`) {
		t.Errorf("report.json %s %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "status-report", "build")); err == nil {
		t.Error("the skill run wrote into the skill's folder")
	}
	// The identical second run reuses the validated outputs.
	code, out, _ = captureConfigCLI(t, args...)
	if code != 0 || !strings.Contains(out, `"exitReason": "up_to_date"`) {
		t.Errorf("second run exit %d: %.300s", code, out)
	}
	// Both runs are in the journal, listed by `capstan runs`.
	code, out, _ = captureConfigCLI(t, "runs", "--workdir", workDir, "--json")
	if code != 0 || strings.Count(out, `"agent": "skill:status-report"`) != 2 || strings.Count(out, `"status": "completed"`) != 2 {
		t.Errorf("runs: exit %d %s", code, out)
	}
}

func TestSkillsRunStream(t *testing.T) {
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	args := exampleSkillArgs(t, dir, t.TempDir(), "--fresh", "--json")
	res, errOut := runStreamed(t, append(args, "--stream")...)
	if res["exitReason"] != "validated" {
		t.Fatalf("exit reason %v", res["exitReason"])
	}
	inOrder(t, errOut,
		"Load the skill instructions first.\n",
		"  → readSkillMd\n",
		"  ← readSkillMd  ok",
		"Count the items with the bundled script.\n",
		"  → runScript  scripts/stats.py\n",
		"  ← runScript  ok",
		"Write the report and expand the summary template with the same data.\n",
		"  → writeArtifact  report.json\n",
		"  ← writeArtifact  ok",
		"  → templateExpand  templates/summary.md.tmpl\n",
		"  ← templateExpand  ok",
		"COMPLETED  skill status-report")
	if n, m := strings.Count(errOut, "  → "), strings.Count(errOut, "  ← "); n != 4 || m != 4 {
		t.Errorf("%d → and %d ← lines, want one each per tool call (4):\n%s", n, m, errOut)
	}

	// Off a terminal the stream is off by default, and --stream=false
	// keeps it off.
	for _, extra := range [][]string{nil, {"--stream=false"}} {
		code, _, errOut := captureConfigCLI(t, append(args, extra...)...)
		if code != 0 || strings.Contains(errOut, "  → ") || strings.Contains(errOut, "Load the skill instructions") {
			t.Errorf("%v: exit %d, streamed:\n%s", extra, code, errOut)
		}
	}
}

func TestSkillsRunUsageErrors(t *testing.T) {
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	for _, args := range [][]string{
		{"skills", "run", dir, "--goal", "g", "--model", "script"},
		{"skills", "run", dir, "--skill", "status-report", "--model", "script"},
		{"skills", "run", dir, "--skill", "nope", "--goal", "g", "--model", "script"},
		{"skills", "run", dir, "--skill", "status-report", "--goal", "g", "--model", "script", "--expect", "../x"},
		{"skills", "run", dir, "--skill", "status-report", "--goal", "g", "--model", "script", "--input", "novalue"},
		{"skills", "run", dir, "--skill", "status-report", "--goal", "g", "--model", "nosuchprovider:x"},
	} {
		if code, _, stderr := captureConfigCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s)", args[3:], code, stderr)
		}
	}
	// A run that does not reach validated outputs exits 1.
	code, _, stderr := captureConfigCLI(t, "skills", "run", dir, "--skill", "status-report", "--goal", "g",
		"--model", "script:status-report.script.yaml", "--expect", "missing.json", "--max-tool-calls", "1", "--workdir", t.TempDir(), "--allow-unsandboxed")
	if code != exitNotCompleted || !strings.Contains(stderr, "unmet") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func FuzzSkillsFlags(f *testing.F) {
	for _, s := range []string{"report.json:schemas/r.json", "build/a.md", "../x", "/abs", "a:b:c", "k=v", `items=["a","b"]`, "=v", "k="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if exp, err := parseExpects([]string{s}); err == nil {
			p := exp[0].Path
			if p == "" || filepath.IsAbs(p) || strings.HasPrefix(filepath.Clean(p), "..") {
				t.Fatalf("accepted %q as %q", s, p)
			}
		}
		if in, err := parseInputs([]string{s}); err == nil && len(in) != 1 {
			t.Fatalf("%q gave %d inputs", s, len(in))
		}
	})
}

// exampleSkillArgs are the README's `capstan skills run` arguments for the
// example skill copied to dir, working in workDir, then extra; on a machine
// that cannot sandbox, scripts run unsandboxed (opted into explicitly).
func exampleSkillArgs(t *testing.T, dir, workDir string, extra ...string) []string {
	args := []string{"skills", "run", dir, "--skill", "status-report", "--goal", "Status report for sprint 12",
		"--input", `items=["login=done","search=doing","export=todo","billing=done"]`,
		"--expect", "report.json:schemas/report.schema.json", "--expect", "summary.md",
		"--model", "script:status-report.script.yaml", "--workdir", workDir}
	args = append(args, extra...)
	if sandbox.Probe(t.Context()).Unavailable() != nil {
		args = append(args, "--allow-unsandboxed")
	}
	return args
}

// TestSkillsRunSendsBareModelName: `--model openai:NAME` puts NAME, not
// "openai:NAME", in the request the provider receives.
func TestSkillsRunSendsBareModelName(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "nothing to do"}}})
	t.Setenv("OPENAI_API_KEY", "sk-test-model-name")
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	args := exampleSkillArgs(t, dir, t.TempDir(), "--json", "--fresh")
	for i, a := range args {
		if a == "script:status-report.script.yaml" {
			args[i] = "openai:gpt-test-model"
		}
	}
	captureConfigCLI(t, append(args, "--base-url", srv.URL)...)
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request reached the fake OpenAI server")
	}
	for _, r := range reqs {
		if r.Request.Model != "gpt-test-model" {
			t.Errorf("model on the wire = %q, want %q", r.Request.Model, "gpt-test-model")
		}
	}
}

// An --expect whose schema is not a file of the skill is a usage error
// before the model runs (it would otherwise end every run unverified,
// after the model's budget is spent), naming the skill's schema files.
func TestSkillsRunRefusesAMissingExpectSchema(t *testing.T) {
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	work := t.TempDir()
	code, out, stderr := captureConfigCLI(t, "skills", "run", dir, "--skill", "status-report", "--goal", "g",
		"--model", "script:status-report.script.yaml", "--workdir", work, "--expect", "report.json:schemas/report.json")
	if code != exitUsage || !strings.Contains(stderr, "has no file schemas/report.json") || !strings.Contains(stderr, "schemas/report.schema.json") {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitUsage, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(work, "build")); err == nil {
		t.Fatal("the skill ran: build/ was written")
	}
	if code, out, _ := captureConfigCLI(t, "runs", "--workdir", work); code != 0 || strings.Contains(out, "skill:") {
		t.Fatalf("a refused run was recorded: exit %d\n%s", code, out)
	}
}
