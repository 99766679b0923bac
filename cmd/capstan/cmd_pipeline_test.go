package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/internal/testenv"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/llm"
)

// pipelineTestModel answers model stages by stage name; it is registered
// as the "pipeline-cli-test" provider so the CLI's --model path is used.
type pipelineTestModel struct{}

func (pipelineTestModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	answers := map[string]string{
		"empty_stage": `{"x": []}`,
		"topic_stage": `{"x": ["ok"]}`,
	}
	a, ok := answers[req.OutputSchemaName]
	if !ok {
		return nil, errors.New("no answer for " + req.OutputSchemaName)
	}
	return &llm.Response{Message: event.Message{Role: event.RoleAssistant, Text: a}}, nil
}

func init() {
	llm.RegisterModel("pipeline-cli-test", func(context.Context, llm.Config) (llm.Model, error) {
		return pipelineTestModel{}, nil
	})
}

func runPipelineCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	code := exitOK
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
			if ee.err != nil {
				errb.WriteString(ee.err.Error())
			}
		} else {
			code = exitUsage
			errb.WriteString(err.Error())
		}
	}
	return code, out.String(), errb.String()
}

const fixedNow = "2026-11-21T12:00:00Z"

// pipelineJournalLine is all a pipeline run without diagnostics prints on
// stderr: its journal in the state directory and the command that shows it.
var pipelineJournalLine = regexp.MustCompile(`^journal: /\S+/runs/[^/]+/(\S+)/events\.jsonl  \(capstan show (\S+)\)\n$`)

func TestPipelineRunSummary(t *testing.T) {
	repo := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	code, out, errOut := runPipelineCLI(t, "pipeline", "run", "--repo", repo, "--since", "7d", "--now", fixedNow, "summarize development activity")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden, err := os.ReadFile("../../pipeline/standard/testdata/summary.golden")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, string(golden)) {
		t.Fatalf("summary:\n%s\nwant prefix:\n%s", out, golden)
	}
	// Nothing on stderr but where the run is journaled: the state
	// directory, where show finds it from any directory.
	if m := pipelineJournalLine.FindStringSubmatch(errOut); !strings.Contains(out, "Facts:\n  F1   6 commits (no merges)") || m == nil || m[1] != m[2] {
		t.Fatalf("facts/diagnostics:\n%s\nstderr: %s", out, errOut)
	}
	// Each cited short hash is a real commit of the repository.
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "  F") || !strings.Contains(line, "(") {
			continue
		}
		inner := line[strings.LastIndex(line, "(")+1 : len(line)-1]
		for _, h := range strings.Fields(inner) {
			if strings.HasPrefix(h, "+") || h == "more" {
				continue
			}
			if err := exec.Command("git", "-C", repo, "cat-file", "-e", h+"^{commit}").Run(); err != nil {
				t.Errorf("fact line %q cites %s, not a commit", line, h)
			}
		}
	}
}

func TestPipelineRunJSON(t *testing.T) {
	repo := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	code, out, errOut := runPipelineCLI(t, "pipeline", "run", "--json", "--repo", repo, "--now", fixedNow, "what happened in the last 2 weeks?")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc map[string]map[string]json.RawMessage
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatal(err)
	}
	doc = map[string]map[string]json.RawMessage{}
	for ns, raw := range top {
		if ns == "version" {
			continue
		}
		m := map[string]json.RawMessage{}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		doc[ns] = m
	}
	for _, k := range []string{"input.request", "reasoning.intents", "reasoning.summary", "retrieval.queries", "retrieval.artifacts",
		"enrichment.facts", "diagnostics.validation_reports", "diagnostics.performance", "audit.agent_runs", "audit.writes"} {
		ns, local, _ := strings.Cut(k, ".")
		if _, ok := doc[ns][local]; !ok {
			t.Errorf("%s missing", k)
		}
	}
	// The 2-week window from the request: commits counted as git counts them.
	var facts []struct {
		Kind  string
		Value float64
	}
	_ = json.Unmarshal(doc["enrichment"]["facts"], &facts)
	n, err := exec.Command("git", "-C", repo, "rev-list", "--count", "--no-merges", "--since=2026-11-07T12:00:00Z", "--until="+fixedNow, "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := strconv.Atoi(strings.TrimSpace(string(n)))
	if facts[0].Kind != "commits" || facts[0].Value != float64(want) || want != 8 {
		t.Fatalf("commits fact %+v, git says %d", facts[0], want)
	}
}

func TestPipelineRunExitCodes(t *testing.T) {
	repo := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cycle := write("cycle.yaml", "version: 1\nstages:\n  - id: summarization\n  - id: a\n    kind: model\n    preconditions: [k.b]\n    postconditions: [k.a]\n  - id: b\n    kind: model\n    preconditions: [k.a]\n    postconditions: [k.b]\n")
	empty := write("empty.yaml", "version: 1\nstages:\n  - id: empty_stage\n    kind: model\n    preconditions: [input.request]\n    postconditions: [custom.x]\n  - id: after\n    kind: model\n    preconditions: [custom.x]\n    postconditions: [custom.y]\n")
	topic := write("topic.yaml", "version: 1\ninputs: [request, topic]\nstages:\n  - id: topic_stage\n    kind: model\n    preconditions: [input.topic]\n    postconditions: [custom.x]\n")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"not a repo", []string{"--repo", dir, "x"}, exitUsage, "not a git repository"},
		{"bad since", []string{"--repo", repo, "--since", "soon", "x"}, exitUsage, "want a relative window like 36h, 7d, 2w, 3m (months) or 1y"},
		{"unreadable time phrase", []string{"--repo", repo, "summarize the last two fortnights"}, exitUsage, "pass --since"},
		{"bad now", []string{"--repo", repo, "--now", "noon", "x"}, exitUsage, "RFC 3339"},
		{"empty request", []string{"--repo", repo, " "}, exitUsage, "request is empty"},
		{"no request", []string{"--repo", repo}, exitUsage, "requires at least 1 arg"},
		{"unknown provider", []string{"--repo", repo, "--model", "nope:x", "x"}, exitUsage, "UNKNOWN_PROVIDER"},
		{"compile errors", []string{"--repo", repo, "--file", cycle, "--model", "pipeline-cli-test", "x"}, exitUsage, "stages form a cycle: a [k.a] -> b [k.b] -> a"},
		{"missing producer", []string{"--repo", repo, "--file", cycle, "--model", "pipeline-cli-test", "x"}, exitUsage, "cycle.yaml:3:9: stage summarization: precondition reasoning.conclusions is produced by no earlier stage or input"},
		{"no model", []string{"--repo", repo, "--file", empty, "x"}, exitUsage, "no model is configured"},
		{"violation stops", []string{"--repo", repo, "--file", empty, "--model", "pipeline-cli-test", "x"}, exitNotCompleted,
			"CONTRACT_VIOLATION: pipeline stopped: agent empty_stage: postcondition validation failed: custom.x is empty"},
		{"missing file", []string{"--repo", repo, "--file", filepath.Join(dir, "nope.yaml"), "x"}, exitUsage, "CONFIG_NOT_FOUND"},
		{"missing input", []string{"--repo", repo, "--file", topic, "--model", "pipeline-cli-test", "x"}, exitUsage, "precondition input.topic is produced by no earlier stage or input"},
		{"input overrides", []string{"--repo", repo, "--input", "repo=/", "x"}, exitUsage, "--input repo: set by the command itself"},
		{"bad input name", []string{"--repo", repo, "--input", "a b=1", "x"}, exitUsage, "--input a b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runPipelineCLI(t, append([]string{"pipeline", "run", "--now", fixedNow}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d (want %d), stderr:\n%s\nwant %q", code, tc.code, errOut, tc.want)
			}
		})
	}
	// The journal records the run and every stage.
	jdir := t.TempDir()
	if code, _, errOut := runPipelineCLI(t, "pipeline", "run", "--now", fixedNow, "--repo", repo, "--journal-dir", jdir, "x"); code != exitOK {
		t.Fatalf("journal run: exit %d %s", code, errOut)
	}
	runs, err := journal.List(jdir)
	if err != nil || len(runs) != 1 {
		t.Fatalf("journal runs %v %v", runs, err)
	}
	evs, err := journal.ReadFile(filepath.Join(jdir, journal.RunsDir, runs[0].ID, journal.FileName))
	if err != nil || len(evs) != 10 || evs[0].Type != journal.RunStart || evs[1].Type != string(event.KindPipelineStage) || evs[9].Type != journal.RunEnd {
		t.Fatalf("journal events %d %v", len(evs), err)
	}
	// The declared extra input, given with --input.
	if code, out, errOut := runPipelineCLI(t, "pipeline", "run", "--now", fixedNow, "--repo", repo, "--file", topic,
		"--model", "pipeline-cli-test", "--input", "topic=go", "--json", "x"); code != exitOK || !strings.Contains(out, `"topic": "go"`) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// Continuing past the violation: exit 0, the violation and the skipped
	// dependent reported on stderr and in the JSON.
	code, out, errOut := runPipelineCLI(t, "pipeline", "run", "--now", fixedNow, "--repo", repo, "--file", empty,
		"--model", "pipeline-cli-test", "--continue-on-violation", "--json", "x")
	if code != exitOK || !strings.Contains(errOut, "violation: agent empty_stage: postcondition validation failed: custom.x is empty") ||
		!strings.Contains(errOut, "violation: agent after: precondition validation failed: custom.x is empty") ||
		!strings.Contains(out, `"status": "completed_with_violations"`) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

func TestPipelineExamples(t *testing.T) {
	repo := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	code, out, errOut := runPipelineCLI(t, "pipeline", "check", "../../examples/pipeline/activity.yaml")
	if code != exitOK || !strings.Contains(out, "ok, 8 stages") {
		t.Fatalf("check: exit %d %s %s", code, out, errOut)
	}
	code, out, errOut = runPipelineCLI(t, "pipeline", "run", "--file", "../../examples/pipeline/activity.yaml", "--repo", repo, "--since", "7d", "--now", fixedNow, "summarize development activity")
	golden, _ := os.ReadFile("../../pipeline/standard/testdata/summary.golden")
	if code != exitOK || !strings.HasPrefix(out, string(golden)) {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runPipelineCLI(t, "pipeline", "check", "../../examples/pipeline/with-model-stage.yaml")
	if code != exitUsage || !strings.Contains(errOut, "stage highlights is a model stage but no model is configured (../../examples/pipeline/with-model-stage.yaml:") {
		t.Fatalf("check without model: exit %d %s", code, errOut)
	}
	code, out, errOut = runPipelineCLI(t, "pipeline", "check", "--model", "pipeline-cli-test", "../../examples/pipeline/with-model-stage.yaml")
	if code != exitOK || !strings.Contains(out, "ok, 9 stages") {
		t.Fatalf("check with model: exit %d %s %s", code, out, errOut)
	}
}

// With the script provider linked in (as the capstan binary does), the
// scripted model's unbacked number is flagged and fails the run (exit 1).
func TestPipelineScriptedModel(t *testing.T) {
	if !slices.Contains(llm.ModelProviders(), "script") {
		t.Skip("script provider not linked into this build")
	}
	repo := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	wd, _ := os.Getwd()
	script := filepath.Join(wd, "../../examples/pipeline/standard.script.yaml")
	code, out, errOut := runPipelineCLI(t, "pipeline", "run", "--now", fixedNow, "--repo", repo, "--model", "script:"+script, "summarize development activity")
	if code != exitNotCompleted || !strings.HasPrefix(out, "Development continued in the window [F1]; the team also closed about 12345 tickets.") ||
		!strings.Contains(errOut, "validation: number not backed by a cited fact: summary: 12345") ||
		!strings.Contains(errOut, "PIPELINE_VALIDATION: validation failed: 1 problem(s)") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestPipelineExampleWithModelStage(t *testing.T) {
	if !slices.Contains(llm.ModelProviders(), "script") {
		t.Skip("script provider not linked into this build")
	}
	repo := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	code, out, errOut := runPipelineCLI(t, "pipeline", "run", "--json", "--now", fixedNow, "--repo", repo,
		"--file", "../../examples/pipeline/with-model-stage.yaml", "--model", "script:with-model-stage.script.yaml", "summarize development activity")
	if code != exitNotCompleted || !strings.Contains(out, `"text": "Commits in the window"`) || !strings.Contains(errOut, "summary: 12345") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// A run that fails validation is journaled as failed: runs and show read
// the journal's run.end, and must not call a run that exited 1 completed.
func TestPipelineValidationFailureJournaled(t *testing.T) {
	if !slices.Contains(llm.ModelProviders(), "script") {
		t.Skip("script provider not linked into this build")
	}
	t.Setenv("CAPSTAN_STATE_DIR", t.TempDir())
	repo := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	wd, _ := os.Getwd()
	script := filepath.Join(wd, "../../examples/pipeline/standard.script.yaml")
	if code, _, errOut := runPipelineCLI(t, "pipeline", "run", "--now", fixedNow, "--repo", repo, "--model", "script:"+script, "x"); code != exitNotCompleted {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	code, out, errOut := runPipelineCLI(t, "runs", "--all", "--json")
	if code != exitOK || !strings.Contains(out, `"status": "not completed"`) || strings.Contains(out, `"status": "completed"`) {
		t.Fatalf("runs: exit %d\n%s\n%s", code, out, errOut)
	}
}
