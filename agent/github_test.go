package agent

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
	"github.com/capstan-dev/capstan/runreport"
)

// recordingGH puts a gh script first on PATH that appends its arguments (joined
// by "|") as one line to the file it returns; "issue view" answers with the
// issue CLOSED, and the subcommand named in the file "fail" next to it
// ("issue edit", see failGH) fails
// like an unauthorized gh. It is a real process boundary: capstan runs it
// as it would run the GitHub CLI. GH_REPO names the repository octo/repo
// (the work dirs of these tests have no remote).
func recordingGH(t *testing.T) (log string) {
	t.Helper()
	bin := t.TempDir()
	log = filepath.Join(t.TempDir(), "gh.log")
	script := `#!/bin/sh
line=""
for a in "$@"; do line="$line$a|"; done
printf '%s\n' "$line" >> '` + log + `'
GH_FAIL=$(cat "$(dirname "$0")/fail" 2>/dev/null)
if [ -n "$GH_FAIL" ] && [ "$1 $2" = "$GH_FAIL" ]; then echo "HTTP 403: Resource not accessible by integration" >&2; exit 1; fi
if [ "$1 $2" = "issue view" ]; then echo '{"state":"CLOSED"}'; fi
exit 0
`
	if err := os.WriteFile(filepath.Join(bin, "gh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("GH_LOG", log)
	t.Setenv("GH_REPO", "octo/repo")
	return log
}

// failGH makes the gh of recordingGH fail the subcommand sub ("issue
// edit"); gh gets only its own environment from capstan, so the setting
// is a file beside it.
func failGH(t *testing.T, sub string) {
	t.Helper()
	gh, err := exec.LookPath("gh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(gh), "fail"), []byte(sub), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ghCalls(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// githubAgent is a climpt-style issue agent: a work step that fixes the
// issue, then a closure step whose structured output may carry
// closure_action and issue.labels. The run completes (keyword) only when
// the validator finds the fix. github is the runner.integrations value
// ("" = none); closure is the closure step's structured answer.
func githubAgent(t *testing.T, github, closure string) string {
	t.Helper()
	integrations := ""
	if github != "" {
		integrations = `, "integrations": {"github": ` + github + `}`
	}
	return writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "fixer", "description": "fixes an issue",
  "parameters": {"issue": {"type": "number", "required": true, "description": "issue number"}},
  "runner": {"model": "script:script.yaml",
    "completion": {"type": "keyword", "keyword": "TASK_COMPLETE", "validators": ["fixed"]},
    "boundaries": {"allowedTools": ["Bash", "Write"], "permissionMode": "acceptEdits", "env": ["GH_LOG"]},
    "budgets": {"maxIterations": 4}` + integrations + `}}`,
		"steps_registry.json": `{"agentId": "fixer", "entryStep": "initial.issue",
  "steps": {
    "initial.issue": {"stepId": "initial.issue", "stepKind": "work", "c2": "initial", "c3": "issue", "uvVariables": ["issue"],
      "check": {"type": "keyword", "keywords": ["FIXED"], "onPass": {"next": "closure.issue"}, "onFail": {"retry": true}}},
    "closure.issue": {"stepId": "closure.issue", "stepKind": "closure", "c2": "closure", "c3": "issue",
      "outputSchemaRef": {"file": "issue.schema.json", "schema": "closure.issue"}}
  },
  "validators": {"fixed": {"type": "command", "command": "test -f fixed.txt", "failurePattern": "file-not-exists"}}}`,
		"schemas/issue.schema.json": `{"closure.issue": {"type": "object", "required": ["summary"],
  "properties": {"summary": {"type": "string"}, "closure_action": {"type": "string"},
    "issue": {"type": "object", "properties": {"labels": {"type": "object",
      "properties": {"add": {"type": "array", "items": {"type": "string"}}, "remove": {"type": "array", "items": {"type": "string"}}}}}}}}}`,
		"prompts/steps/initial/issue/f_default.md":            "Fix issue #{uv-issue}.",
		"prompts/steps/closure/issue/f_default.md":            "Close out the issue.",
		"prompts/steps/closure/issue/f_default_label-only.md": "Label the issue; it stays open.",
		"script.yaml": `turns:
  - expect: {prompt_contains: ["Fix issue #7."]}
    tool_calls:
      - name: Bash
        input: {command: "gh issue close 7 --comment done"}
  - tool_calls:
      - name: Write
        input: {file_path: fixed.txt, content: "fixed\n"}
  - text: FIXED
  - tool_calls:
      - name: Bash
        input: {command: "cd . && gh pr merge 3 --squash"}
  - structured: ` + closure + `
`,
	})
}

func runGitHub(t *testing.T, dir string) (*event.RunResult, []journal.Event) {
	t.Helper()
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir(), Params: map[string]string{"issue": "7"}})
	events, err := journal.ReadFile(res.Journal)
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

// After a verified completion capstan changes the issue through gh exactly
// as climpt's boundary hook does for each closure action, and journals each
// call; the model's own gh calls were refused in the work step and, with
// the integration on, in the closure step too.
func TestGitHubClosureAfterVerifiedCompletion(t *testing.T) {
	cases := []struct {
		name, github, closure string
		calls                 []string
		action, source        string
	}{
		{"label-only applies config and output labels, issue stays open",
			`{"enabled": true, "labels": {"inProgress": "in-progress", "completion": {"add": ["done"], "remove": ["in-progress"]}}, "defaultClosureAction": "label-only"}`,
			`{summary: "TASK_COMPLETE", issue: {labels: {add: [reviewed, done]}}}`,
			[]string{"issue|edit|7|--add-label|done,reviewed|--remove-label|in-progress|--repo|octo/repo|"}, "label-only", "config"},
		{"label-and-close labels then closes",
			`{"enabled": true, "labels": {"completion": {"add": ["done"]}}, "defaultClosureAction": "label-and-close"}`,
			`{summary: "TASK_COMPLETE"}`,
			[]string{"issue|edit|7|--add-label|done|--repo|octo/repo|", "issue|close|7|--repo|octo/repo|"}, "label-and-close", "config"},
		{"close ignores labels",
			`{"enabled": true, "labels": {"completion": {"add": ["done"]}}, "defaultClosureAction": "close"}`,
			`{summary: "TASK_COMPLETE", issue: {labels: {add: [x]}}}`,
			[]string{"issue|close|7|--repo|octo/repo|"}, "close", "config"},
		{"the closure step's closure_action wins over the config",
			`{"enabled": true, "labels": {"completion": {"remove": ["in-progress"]}}, "defaultClosureAction": "close"}`,
			`{summary: "TASK_COMPLETE", closure_action: label-only}`,
			[]string{"issue|edit|7|--remove-label|in-progress|--repo|octo/repo|"}, "label-only", "output"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := recordingGH(t)
			res, events := runGitHub(t, githubAgent(t, tc.github, tc.closure))
			if !res.Success {
				t.Fatalf("run did not complete: %+v", res.Error)
			}
			if got := ghCalls(t, log); strings.Join(got, "\n") != strings.Join(tc.calls, "\n") {
				t.Fatalf("gh calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.calls, "\n"))
			}
			g := res.GitHub
			if g == nil || !g.OK || g.Issue != "7" || g.Action != tc.action || g.ActionSource != tc.source || len(g.Calls) != len(tc.calls) {
				t.Fatalf("result.github = %+v", g)
			}
			var journaled, denied int
			for _, ev := range events {
				switch ev.Type {
				case string(event.KindGitHubCall):
					journaled++
				case journal.ToolCall, journal.ToolDenied:
					var c struct {
						Name   string `json:"name"`
						Output string `json:"output"`
						Denied bool   `json:"denied"`
					}
					_ = json.Unmarshal(ev.Data, &c)
					if c.Name == "Bash" {
						if ev.Type != journal.ToolDenied || !c.Denied || !strings.Contains(c.Output, "is a GitHub boundary action") {
							t.Errorf("model's gh call in step %s not refused: %+v", ev.Step, c)
						}
						denied++
					}
				}
			}
			if journaled != len(tc.calls) || denied != 2 {
				t.Fatalf("journal: %d github.call (want %d), %d refused Bash calls (want 2)", journaled, len(tc.calls), denied)
			}
		})
	}
}

// The closure prompt follows defaultClosureAction (climpt's adaptation):
// label-only sends f_default_label-only.md.
func TestClosurePromptAdaptation(t *testing.T) {
	recordingGH(t)
	_, events := runGitHub(t, githubAgent(t, `{"enabled": true, "defaultClosureAction": "label-only", "labels": {"completion": {"add": ["done"]}}}`,
		`{summary: "TASK_COMPLETE"}`))
	var prompts []string
	for _, ev := range events {
		if ev.Type == journal.PromptResolved {
			var p struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(ev.Data, &p)
			prompts = append(prompts, p.Text)
		}
	}
	if len(prompts) != 2 || !strings.Contains(prompts[1], "Label the issue; it stays open.") {
		t.Fatalf("prompts: %q", prompts)
	}
}

// No verified completion, no GitHub call: the validator fails, so the run
// ends at its budget and the issue is left alone.
func TestGitHubNothingWithoutVerifiedCompletion(t *testing.T) {
	log := recordingGH(t)
	dir := githubAgent(t, `{"enabled": true, "defaultClosureAction": "label-and-close", "labels": {"completion": {"add": ["done"]}}}`,
		`{summary: "TASK_COMPLETE"}`)
	if err := os.WriteFile(filepath.Join(dir, "steps_registry.json"), []byte(strings.Replace(mustRead(t, filepath.Join(dir, "steps_registry.json")),
		"test -f fixed.txt", "test -f never.txt", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ := runGitHub(t, dir)
	if res.Success || res.GitHub != nil {
		t.Fatalf("success=%v github=%+v", res.Success, res.GitHub)
	}
	if calls := ghCalls(t, log); len(calls) != 0 {
		t.Fatalf("gh called: %q", calls)
	}
}

// A failed gh call is reported honestly: the run stays completed (the
// work was verified), Result.github says what failed, a warning explains
// it, and the issue is not closed after its labels could not be changed.
func TestGitHubFailureIsReported(t *testing.T) {
	log := recordingGH(t)
	failGH(t, "issue edit")
	res, _ := runGitHub(t, githubAgent(t, `{"enabled": true, "defaultClosureAction": "label-and-close", "labels": {"completion": {"add": ["done"]}}}`,
		`{summary: "TASK_COMPLETE"}`))
	if !res.Success {
		t.Fatalf("run: %+v", res.Error)
	}
	g := res.GitHub
	if g == nil || g.OK || len(g.Calls) != 1 || g.Calls[0].ExitCode != 1 || !strings.Contains(g.Calls[0].Output, "HTTP 403") {
		t.Fatalf("github = %+v", g)
	}
	if calls := ghCalls(t, log); len(calls) != 1 {
		t.Fatalf("gh calls: %q (the close must not follow a failed label change)", calls)
	}
	joined := strings.Join(res.Warnings, "\n")
	if !strings.Contains(joined, "gh issue edit 7 --add-label done --repo octo/repo failed") || !strings.Contains(joined, "was not closed") {
		t.Fatalf("warnings: %q", res.Warnings)
	}
}

// Without the integration a closure step may not run boundary commands
// either (as in climpt, where the closure is applied after the run): both
// steps' attempts are refused, no gh call is made, and the closure step's
// refusal says how a closure is applied instead.
func TestClosureStepRefusesGHWithoutIntegration(t *testing.T) {
	log := recordingGH(t)
	res, events := runGitHub(t, githubAgent(t, "", `{summary: "TASK_COMPLETE"}`))
	if !res.Success || res.GitHub != nil {
		t.Fatalf("success=%v github=%+v", res.Success, res.GitHub)
	}
	if calls := ghCalls(t, log); len(calls) != 0 {
		t.Fatalf("gh calls: %q", calls)
	}
	denied := map[string]string{}
	for _, ev := range events {
		if ev.Type != journal.ToolDenied {
			continue
		}
		var c struct {
			Name   string `json:"name"`
			Output string `json:"output"`
		}
		_ = json.Unmarshal(ev.Data, &c)
		if c.Name == "Bash" {
			denied[ev.Step] = c.Output
		}
	}
	if !strings.Contains(denied["initial.issue"], "a work step may not change issues") ||
		!strings.Contains(denied["closure.issue"], `"gh pr merge" is a GitHub boundary action`) ||
		!strings.Contains(denied["closure.issue"], "runner.integrations.github with a defaultClosureAction, or a subprocess step") {
		t.Fatalf("denied: %q", denied)
	}
}

// An agent whose completion follows the issue's state closes it by
// default (climpt's poll:state agents): the completion asks gh for the
// state, then capstan closes the issue.
func TestGitHubDefaultCloseWhenCompletionFollowsIssue(t *testing.T) {
	log := recordingGH(t)
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "poller", "description": "waits for the issue",
  "parameters": {"issue": {"type": "number", "required": true}},
  "runner": {"model": "script:script.yaml",
    "completion": {"type": "externalState", "options": {"number": "${issue}"}},
    "budgets": {"maxIterations": 2},
    "integrations": {"github": {"enabled": true, "labels": {"completion": {"add": ["done"]}}}}}}`,
		"steps_registry.json": `{"agentId": "poller", "entryStep": "closure.polling",
  "steps": {"closure.polling": {"stepId": "closure.polling", "stepKind": "closure", "c2": "closure", "c3": "polling"}}}`,
		"prompts/steps/closure/polling/f_default.md": "Check issue {uv-issue}.",
		"script.yaml": "turns:\n  - text: checked\n",
	})
	res, _ := runGitHub(t, dir)
	if !res.Success || res.GitHub == nil || res.GitHub.Action != "close" || res.GitHub.ActionSource != "default" {
		t.Fatalf("success=%v github=%+v err=%+v", res.Success, res.GitHub, res.Error)
	}
	if calls := ghCalls(t, log); strings.Join(calls, "\n") != "issue|view|7|--json|state|--repo|octo/repo|\nissue|close|7|--repo|octo/repo|" {
		t.Fatalf("gh calls: %q", calls)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The issue parameter reaches gh only as an issue number: a value that
// could be read as a flag is refused, with a warning.
func TestGitHubIssueMustBeANumber(t *testing.T) {
	log := recordingGH(t)
	dir := githubAgent(t, `{"enabled": true, "defaultClosureAction": "close"}`, `{summary: "TASK_COMPLETE"}`)
	a := mustRead(t, filepath.Join(dir, "agent.json"))
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), []byte(strings.Replace(a, `"type": "number"`, `"type": "string"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dir2 := strings.Replace(mustRead(t, filepath.Join(dir, "script.yaml")), "Fix issue #7.", "Fix issue #--repo=evil/x.", 1)
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(dir2), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runToEnd(t, load(t, dir), BuildOptions{WorkDir: t.TempDir(), Params: map[string]string{"issue": "--repo=evil/x"}})
	if !res.Success || res.GitHub == nil || res.GitHub.Skipped == "" || len(res.GitHub.Calls) != 0 {
		t.Fatalf("success=%v github=%+v", res.Success, res.GitHub)
	}
	if calls := ghCalls(t, log); len(calls) != 0 {
		t.Fatalf("gh called: %q", calls)
	}
}

// With the integration on, the model gets github_read even when
// allowedTools does not name it: read operations run gh, anything else is
// an error result, and nothing it can ask changes GitHub.
func TestGitHubReadTool(t *testing.T) {
	log := recordingGH(t)
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "reader", "description": "reads an issue",
  "parameters": {"issue": {"type": "number", "required": true}},
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "DONE"},
    "boundaries": {"allowedTools": ["Read"]},
    "integrations": {"github": {"enabled": true, "defaultClosureAction": "label-only"}}}}`,
		"steps_registry.json":                  `{"agentId": "reader", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "initial", "c3": "s"}}}`,
		"prompts/steps/initial/s/f_default.md": "Read issue {uv-issue}.",
		"script.yaml": `turns:
  - tool_calls:
      - name: github_read
        input: {operation: issue_view, number: 7}
      - name: github_read
        input: {operation: issue_list, state: all, label: bug, limit: 5}
      - name: github_read
        input: {operation: issue_close, number: 7}
      - name: github_read
        input: {operation: issue_list, label: "--repo=evil/x"}
  - text: DONE
`,
	})
	res, events := runGitHub(t, dir)
	if !res.Success {
		t.Fatalf("run: %+v", res.Error)
	}
	want := "issue|view|7|--json|number,title,body,labels,state,assignees,milestone,comments|--repo|octo/repo|\n" +
		"issue|list|--json|number,title,labels,state|--state=all|--label=bug|--limit=5|--repo|octo/repo|"
	if got := strings.Join(ghCalls(t, log), "\n"); got != want {
		t.Fatalf("gh calls:\n%s\nwant:\n%s", got, want)
	}
	var errs []string
	for _, ev := range events {
		if ev.Type == journal.ToolCall {
			var c struct {
				Name    string `json:"name"`
				Output  string `json:"output"`
				IsError bool   `json:"is_error"`
			}
			_ = json.Unmarshal(ev.Data, &c)
			if c.IsError {
				errs = append(errs, c.Output)
			}
		}
	}
	if len(errs) != 2 || !strings.Contains(errs[0], `unknown operation "issue_close"`) || !strings.Contains(errs[1], "plain label name") {
		t.Fatalf("error results: %q", errs)
	}
}

// capstan show lists the gh calls with the run's last iteration.
func TestGitHubCallsAreShown(t *testing.T) {
	recordingGH(t)
	res, events := runGitHub(t, githubAgent(t, `{"enabled": true, "defaultClosureAction": "label-and-close", "labels": {"completion": {"add": ["done"]}}}`,
		`{summary: "TASK_COMPLETE"}`))
	run, err := runreport.Build(res.RunID, events)
	if err != nil {
		t.Fatal(err)
	}
	last := run.Iterations[len(run.Iterations)-1]
	var titles []string
	for _, e := range last.Entries {
		if strings.HasPrefix(e.Title, "gh ") && e.OK {
			titles = append(titles, e.Title)
		}
	}
	if strings.Join(titles, "; ") != "gh issue edit 7 --add-label done --repo octo/repo (after completion); gh issue close 7 --repo octo/repo (after completion)" {
		t.Fatalf("entries: %q", titles)
	}
}

// Only a closure step speaks for the issue: a work step that ends the run
// with closure_action "close" and its own labels cannot override
// defaultClosureAction label-only.
func TestGitHubWorkStepOutputIgnored(t *testing.T) {
	log := recordingGH(t)
	dir := writeAgent(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "one", "description": "one work step",
  "parameters": {"issue": {"type": "number", "required": true}},
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "TASK_COMPLETE"},
    "integrations": {"github": {"enabled": true, "defaultClosureAction": "label-only", "labels": {"completion": {"add": ["done"]}}}}}}`,
		"steps_registry.json": `{"agentId": "one", "entryStep": "work",
  "steps": {"work": {"stepId": "work", "c2": "initial", "c3": "work", "outputSchemaRef": {"file": "s.schema.json", "schema": "out"}}}}`,
		"schemas/s.schema.json": `{"out": {"type": "object", "properties": {"summary": {"type": "string"}, "closure_action": {"type": "string"},
  "issue": {"type": "object", "properties": {"labels": {"type": "object", "properties": {"add": {"type": "array", "items": {"type": "string"}}}}}}}}}`,
		"prompts/steps/initial/work/f_default.md": "Work.",
		"script.yaml": "turns:\n  - structured: {summary: TASK_COMPLETE, closure_action: close, issue: {labels: {add: [hacked]}}}\n",
	})
	res, _ := runGitHub(t, dir)
	if !res.Success || res.GitHub == nil || res.GitHub.Action != "label-only" || res.GitHub.ActionSource != "config" {
		t.Fatalf("success=%v github=%+v err=%+v reason=%s", res.Success, res.GitHub, res.Error, res.Reason)
	}
	if calls := strings.Join(ghCalls(t, log), "\n"); calls != "issue|edit|7|--add-label|done|--repo|octo/repo|" {
		t.Fatalf("gh calls: %q", calls)
	}
}
