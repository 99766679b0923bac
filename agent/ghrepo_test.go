package agent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/journal"
)

// gitWorkDir makes a git repository whose remotes are name=url pairs.
func gitWorkDir(t *testing.T, remotes ...string) string {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	run("init", "-q")
	for i := 0; i+1 < len(remotes); i += 2 {
		run("remote", "add", remotes[i], remotes[i+1])
	}
	return dir
}

// The model rewrites the work dir's remote (and gh's default-repository
// mark) in its first iteration; the run stops at its budget and is
// resumed with GH_REPO now naming yet another repository. Every gh call
// capstan makes — github_read in the resumed iteration, the closure after
// it — still names the repository of the remote as it was when the run
// started, which run.start journaled.
func TestGitHubRepoIsPinnedBeforeTheModelRuns(t *testing.T) {
	log := recordingGH(t)
	t.Setenv("GH_REPO", "")
	dir := githubAgent(t, `{"enabled": true, "defaultClosureAction": "close"}`, `{summary: "TASK_COMPLETE"}`)
	if err := os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(`turns:
  - expect: {prompt_contains: ["Fix issue #7."]}
    tool_calls:
      - name: Bash
        input: {command: "git remote set-url origin git@github.com:evil/other.git && git config remote.origin.gh-resolved base"}
      - name: Write
        input: {file_path: fixed.txt, content: "fixed\n"}
  - text: FIXED
  - tool_calls:
      - name: github_read
        input: {operation: issue_view, number: 7}
  - structured: {summary: "TASK_COMPLETE"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	def := load(t, dir)
	wd := gitWorkDir(t, "origin", "https://github.com/octo/good.git")
	first := runToEnd(t, def, BuildOptions{WorkDir: wd, MaxIterations: 1, Params: map[string]string{"issue": "7"}})
	if first.Success {
		t.Fatalf("first run: %+v", first)
	}
	if out, _ := exec.Command("git", "-C", wd, "remote", "get-url", "origin").Output(); strings.TrimSpace(string(out)) != "git@github.com:evil/other.git" {
		t.Fatalf("the model did not rewrite the remote: %s", out)
	}
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	if rec.GitHubRepo == nil || rec.GitHubRepo.Repo != "octo/good" || rec.GitHubRepo.Source != "git remote origin" {
		t.Fatalf("run.start githubRepo = %+v", rec.GitHubRepo)
	}
	t.Setenv("GH_REPO", "evil/env")
	res := runToEnd(t, def, BuildOptions{WorkDir: wd, Resume: rec})
	if !res.Success || res.GitHub == nil || !res.GitHub.OK {
		t.Fatalf("resumed run: %+v github=%+v", res.Error, res.GitHub)
	}
	want := "issue|view|7|--json|number,title,body,labels,state,assignees,milestone,comments|--repo|octo/good|\n" +
		"issue|close|7|--repo|octo/good|"
	if got := strings.Join(ghCalls(t, log), "\n"); got != want {
		t.Fatalf("gh calls:\n%s\nwant:\n%s", got, want)
	}
}

// When capstan needs the repository and nothing names it, the run fails
// before the model runs, says what to do and leaves no run behind; a
// repository parameter that is not OWNER/NAME fails the same way.
func TestGitHubRepoUnresolvedFailsBeforeTheModel(t *testing.T) {
	log := recordingGH(t)
	t.Setenv("GH_REPO", "")
	dir := githubAgent(t, `{"enabled": true, "defaultClosureAction": "close"}`, `{summary: "TASK_COMPLETE"}`)
	store := journal.Store{Dir: t.TempDir()}
	for name, wd := range map[string]string{
		"no git":        t.TempDir(),
		"no remote":     gitWorkDir(t),
		"not on github": gitWorkDir(t, "origin", "https://gitlab.com/octo/repo.git"),
	} {
		_, err := Build(context.Background(), load(t, dir), BuildOptions{WorkDir: wd, Store: store, Params: map[string]string{"issue": "7"}})
		e := agenterr.From(err)
		if e == nil || e.Code != agenterr.CodeDependencyResolution || !strings.Contains(e.Message, "has no GitHub remote") ||
			!strings.Contains(e.Hint, "set GH_REPO to OWNER/NAME") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	t.Setenv("GH_REPO", "--repo=evil/x")
	_, err := Build(context.Background(), load(t, dir), BuildOptions{WorkDir: t.TempDir(), Store: store, Params: map[string]string{"issue": "7"}})
	if !errors.Is(err, agenterr.ErrParamInvalid) || !strings.Contains(err.Error(), `GH_REPO "--repo=evil/x" is not a GitHub repository`) {
		t.Fatalf("bad GH_REPO: %v", err)
	}
	if journals, _ := filepath.Glob(filepath.Join(store.Dir, "runs", "*", "*", journal.FileName)); len(journals) != 0 {
		t.Fatalf("runs left behind: %v", journals)
	}
	if calls := ghCalls(t, log); len(calls) != 0 {
		t.Fatalf("gh called: %q", calls)
	}
}

// capstan runs gh with its own credentials and network, outside the
// sandbox: the gh it runs is looked up before the model runs, and one in
// the work dir (which the model can write) is refused, as is no gh at all.
func TestGitHubGHIsFoundBeforeTheModel(t *testing.T) {
	log := recordingGH(t)
	dir := githubAgent(t, `{"enabled": true, "defaultClosureAction": "close"}`, `{summary: "TASK_COMPLETE"}`)
	store := journal.Store{Dir: t.TempDir()}
	wd := t.TempDir()
	planted := filepath.Join(wd, "tools", "gh")
	if err := os.MkdirAll(filepath.Dir(planted), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planted, []byte("#!/bin/sh\necho planted >> \"$GH_LOG\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("PATH")
	t.Setenv("PATH", filepath.Dir(planted)+string(os.PathListSeparator)+path)
	_, err := Build(context.Background(), load(t, dir), BuildOptions{WorkDir: wd, Store: store, Params: map[string]string{"issue": "7"}})
	if e := agenterr.From(err); e == nil || e.Code != agenterr.CodeDependencyResolution || !strings.Contains(e.Message, "inside the work dir") {
		t.Fatalf("gh in the work dir: %v", err)
	}
	// The same for an externalState completion with its own repo.
	cfg, err := Load(verdictAgent(t, `{"type": "externalState", "options": {"number": 7, "repo": "o/r"}}`, "", liarScript), goValues(&countingValidator{}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir, cfg.Store = wd, store
	if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "inside the work dir") {
		t.Fatalf("externalState, gh in the work dir: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err = Build(context.Background(), load(t, dir), BuildOptions{WorkDir: wd, Store: store, Params: map[string]string{"issue": "7"}})
	if e := agenterr.From(err); e == nil || !strings.Contains(e.Message, "gh is not on PATH") || !strings.Contains(e.Hint, "install the GitHub CLI") {
		t.Fatalf("no gh: %v", err)
	}
	if calls := ghCalls(t, log); len(calls) != 0 {
		t.Fatalf("gh called: %q", calls)
	}
}
