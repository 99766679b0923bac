package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/capstan-dev/capstan/sandbox"
)

// noneExported fails t if any exported request body contains one of bad.
func (s *otlpSink) noneExported(t *testing.T, bad ...string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.raw) == 0 {
		t.Fatal("nothing was exported")
	}
	for _, raw := range s.raw {
		for _, b := range bad {
			if bytes.Contains(raw, []byte(b)) {
				t.Errorf("exported spans contain %q", b)
			}
		}
	}
}

func names(spans []*tracepb.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// tracedPipelineDir is a pipeline of an agent stage (a real capstan agent
// with its own run), a model stage whose output violates its postcondition
// and a stage that depends on it.
func tracedPipelineDir(t *testing.T) string {
	dir := writeFiles(t, withWriterAgent("zeppelins-request-text", "Zeppelins-headline-content", map[string]string{
		"p.yaml": `version: 1
inputs: [request]
stages:
  - id: writer
    kind: agent
    dir: agents/writer
    params: {topic: "{{input.request}}"}
    preconditions: [input.request]
    postconditions: [custom.headline]
  - id: empty_stage
    kind: model
    preconditions: [custom.headline]
    postconditions: [custom.x]
  - id: after
    kind: model
    preconditions: [custom.x]
    postconditions: [custom.y]
`,
	}))
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Skipf("git init: %v %s", err, out)
	}
	return dir
}

// TestPipelineRunTraced: capstan pipeline run exports one run span with a
// pipeline.stage span per stage and the agent stage's own run inside it;
// a violating stage and the stopped pipeline have status Error; no request,
// parameter, prompt or output leaves the process.
func TestPipelineRunTraced(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		status     string // capstan.pipeline.status
		afterState string // the dependent stage's status
	}{
		{"stops on violation", nil, exitNotCompleted, "stopped", ""},
		{"continues past violation", []string{"--continue-on-violation"}, exitOK, "completed_with_violations", "skipped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tracedPipelineDir(t)
			sink, url := newOTLPSink(t)
			cmd := cliCommand(append([]string{"pipeline", "run", "--file", "p.yaml", "--model", "pipeline-cli-test", "--now", fixedNow},
				append(tc.args, "zeppelins-request-text")...)...)
			cmd.Dir = dir
			cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_ENDPOINT="+url, "ANTHROPIC_API_KEY="+testAPIKey)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != tc.code) || err == nil && tc.code != 0 {
				t.Fatalf("exit %v (want %d)\n%s", err, tc.code, stderr.String())
			}
			if strings.Contains(stderr.String(), "warning: tracing") {
				t.Errorf("tracing warned:\n%s", stderr.String())
			}
			tr := buildTree(sink.take())
			if len(tr.roots) != 1 || tr.roots[0].Name != "capstan.run" {
				t.Fatalf("roots %v", names(tr.roots))
			}
			run := tr.roots[0]
			ra := spanAttrs(run)
			if ra["capstan.command"] != "pipeline run" || ra["capstan.success"] != (tc.code == exitOK) || ra["capstan.pipeline.status"] != tc.status {
				t.Errorf("run attributes %v", ra)
			}
			if tc.code != exitOK && (run.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || run.Status.GetMessage() != "CONTRACT_VIOLATION" ||
				ra["error.type"] != "CONTRACT_VIOLATION") {
				t.Errorf("stopped pipeline: status %v, attributes %v", run.Status, ra)
			}
			// Past its violations the pipeline ran to the end (exit 0): the run
			// is Ok, its violating stage is not.
			if tc.code == exitOK && run.Status.GetCode() != tracepb.Status_STATUS_CODE_OK {
				t.Errorf("pipeline with violations: status %v", run.Status)
			}
			stages := map[string]*tracepb.Span{}
			for _, s := range tr.kids(run, "pipeline.stage ") {
				stages[strings.TrimPrefix(s.Name, "pipeline.stage ")] = s
			}
			w, e := stages["writer"], stages["empty_stage"]
			if w == nil || e == nil {
				t.Fatalf("stage spans %v", names(tr.kids(run, "pipeline.stage ")))
			}
			if a := spanAttrs(w); a["capstan.pipeline.stage.status"] != "succeeded" || a["capstan.pipeline.stage.keys_written"] != int64(1) ||
				w.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("writer stage %v %v", a, w.Status)
			}
			if a := spanAttrs(e); e.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || a["capstan.pipeline.stage.status"] == "succeeded" {
				t.Errorf("violating stage %v %v", a, e.Status)
			}
			if tc.afterState != "" {
				if a := stages["after"]; a == nil || spanAttrs(a)["capstan.pipeline.stage.status"] != tc.afterState {
					t.Errorf("dependent stage %v", a)
				}
			} else if stages["after"] != nil {
				t.Errorf("a stage after the stop was traced: %v", spanAttrs(stages["after"]))
			}
			var violations []string
			for _, ev := range run.Events {
				if ev.Name == "pipeline.violation" {
					for _, kv := range ev.Attributes {
						if kv.Key == "capstan.pipeline.violation.agent_id" {
							violations = append(violations, kv.Value.GetStringValue())
						}
					}
				}
			}
			if len(violations) == 0 || violations[0] != "empty_stage" {
				t.Errorf("violation events for %v", violations)
			}
			// The agent stage's own run, with its iteration and query.
			agentRuns := tr.kids(run, "capstan.run")
			if len(agentRuns) != 1 || spanAttrs(agentRuns[0])["capstan.agent.name"] != "writer" ||
				len(tr.kids(agentRuns[0], "capstan.iteration")) != 1 {
				t.Fatalf("agent stage runs %v", names(agentRuns))
			}
			sink.noneExported(t, testAPIKey, "zeppelins", "Zeppelins", "Write a headline", dir)
		})
	}
}

// TestSkillsRunTraced: capstan skills run exports its run span with one
// execute_tool span per tool call of the Act loop, and neither the goal,
// the skill inputs nor any file content.
func TestSkillsRunTraced(t *testing.T) {
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	workDir := t.TempDir()
	args := exampleSkillArgs(t, dir, workDir)
	sink, url := newOTLPSink(t)
	code, _, stderr := runTracedCLI(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + url, "ANTHROPIC_API_KEY=" + testAPIKey}, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	tr := buildTree(sink.take())
	if len(tr.roots) != 1 || tr.roots[0].Name != "capstan.run" {
		t.Fatalf("roots %v", names(tr.roots))
	}
	run := tr.roots[0]
	ra := spanAttrs(run)
	if ra["capstan.agent.name"] != "skill:status-report" || ra["capstan.model"] != "script:status-report.script.yaml" ||
		ra["capstan.completion_reason"] != "validated" || run.Status.GetCode() != tracepb.Status_STATUS_CODE_OK {
		t.Errorf("run span %v %v", ra, run.Status)
	}
	tools := tr.kids(run, "execute_tool ")
	// One span per evidence record: finalize is the runtime's, not a tool
	// the skill ran.
	want := "execute_tool readSkillMd,execute_tool runScript,execute_tool writeArtifact,execute_tool templateExpand"
	if strings.Join(names(tools), ",") != want {
		t.Errorf("tool spans %v, want %s", names(tools), want)
	}
	var steps []string
	for _, s := range tools {
		a := spanAttrs(s)
		steps = append(steps, fmt.Sprint(a["capstan.skill.step"]))
		if a["gen_ai.operation.name"] != "execute_tool" || a["capstan.tool.is_error"] != false || s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR ||
			s.EndTimeUnixNano < s.StartTimeUnixNano || s.EndTimeUnixNano > run.EndTimeUnixNano {
			t.Errorf("%s: %v %v", s.Name, a, s.Status)
		}
	}
	if strings.Join(steps, ",") != "1,2,3,3" {
		t.Errorf("tool spans' steps %v, want the model turns 1,2,3,3", steps)
	}
	// Each of the Act loop's model turns is a span event with its usage,
	// as in an agent run.
	var turns []string
	for _, ev := range run.Events {
		if ev.Name != "model.turn" {
			continue
		}
		a := map[string]any{}
		for _, kv := range ev.Attributes {
			a[kv.Key] = kv.Value.GetIntValue()
		}
		if a["gen_ai.usage.input_tokens"].(int64) <= 0 {
			t.Errorf("model.turn without usage: %v", a)
		}
		turns = append(turns, fmt.Sprint(a["capstan.turn"], "/", a["capstan.tool_calls"]))
	}
	if strings.Join(turns, ",") != "1/1,2/1,3/2" {
		t.Errorf("model.turn events (turn/tool calls) %v, want 1/1,2/1,3/2", turns)
	}
	// Not the goal, the inputs, the script's arguments, the files written
	// or the skill's own text.
	sink.noneExported(t, testAPIKey, "Status report for sprint", "login=done", "billing", "Sprint 12 status", "generated_by",
		"report.json and summary.md written", "done_ratio", dir, workDir)
	skillMd, err := os.ReadFile(filepath.Join(dir, "status-report", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(skillMd), "\n") {
		if line = strings.TrimSpace(line); len(line) > 24 {
			sink.noneExported(t, line)
		}
	}
}

// TestInterruptedRunExportsSpans: Ctrl-C in the middle of an iteration
// still exports the run, with every span ended and the run's status set.
func TestInterruptedRunExportsSpans(t *testing.T) {
	sink, url := newOTLPSink(t)
	dir, wd := slowAgent(t), t.TempDir()
	cmd := cliCommand("run", dir, "--who", "Ada", "--workdir", wd, "--quiet")
	cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_ENDPOINT="+url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	interruptInIteration2(t, cmd, wd, stderr.String)
	if strings.Contains(stderr.String(), "warning: tracing") {
		t.Errorf("tracing warned:\n%s", stderr.String())
	}
	spans := sink.take()
	tr := buildTree(spans)
	if len(tr.roots) != 1 || tr.roots[0].Name != "capstan.run" {
		t.Fatalf("roots %v (%d spans)", names(tr.roots), len(spans))
	}
	run := tr.roots[0]
	ra := spanAttrs(run)
	if run.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || ra["capstan.completion_reason"] != "canceled" || ra["capstan.success"] != false {
		t.Errorf("run span: status %v, attributes %v", run.Status, ra)
	}
	iters := tr.kids(run, "capstan.iteration")
	if len(iters) != 2 {
		t.Fatalf("%d iteration spans, want 2", len(iters))
	}
	for _, s := range spans {
		if s.EndTimeUnixNano == 0 || s.EndTimeUnixNano < s.StartTimeUnixNano || s.EndTimeUnixNano > run.EndTimeUnixNano {
			t.Errorf("span %s not ended within the run: %d..%d (run ends %d)", s.Name, s.StartTimeUnixNano, s.EndTimeUnixNano, run.EndTimeUnixNano)
		}
	}
	// The interrupted query and its iteration say so.
	last := iters[1]
	qs := tr.kids(last, "chat ")
	if len(qs) != 1 || qs[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || last.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("interrupted iteration %v, queries %v", last.Status, qs)
	}
	t.Logf("run %v %v; iteration %v; query %v", run.Status, ra, last.Status, qs[0].Status)
}

// TestSkillsRunEarlyErrorEndsRunSpan: a skills run that stops on bad input
// after its run.start (here a work dir whose build/ is a file, refused before
// the Act loop starts) never journals run.end; its run span is still ended
// and exported, with status Error.
func TestSkillsRunEarlyErrorEndsRunSpan(t *testing.T) {
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	workDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(workDir, "build"), []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"skills", "run", dir, "--skill", "status-report", "--goal", "Status report",
		"--expect", "summary.md",
		"--model", "script:status-report.script.yaml", "--workdir", workDir}
	if sandbox.Probe(t.Context()).Unavailable() != nil {
		args = append(args, "--allow-unsandboxed")
	}
	sink, url := newOTLPSink(t)
	code, _, stderr := runTracedCLI(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + url}, args...)
	if code == 0 {
		t.Fatalf("exit 0 with a missing schema\n%s", stderr)
	}
	tr := buildTree(sink.take())
	if len(tr.roots) != 1 || tr.roots[0].Name != "capstan.run" {
		t.Fatalf("roots %v (stderr %s)", names(tr.roots), stderr)
	}
	run := tr.roots[0]
	if run.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || run.EndTimeUnixNano < run.StartTimeUnixNano {
		t.Errorf("run span status %v, start %d end %d", run.Status, run.StartTimeUnixNano, run.EndTimeUnixNano)
	}
}
