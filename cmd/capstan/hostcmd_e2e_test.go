package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/testenv"
)

// gitCleanAgent is an unsandboxed agent whose completion is verified by a
// git-clean validator (git status --porcelain must print nothing); the
// scripted model claims completion at once. extra is added to the
// runner (a JSON fragment starting with a comma, or "").
func gitCleanAgent(t *testing.T, extra, params string) string {
	t.Helper()
	return writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "clean", "description": "checks git",` + params + `
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE", "validators": ["git-clean"]}` + extra + `}}`,
		"steps_registry.json": `{"agentId": "clean", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}},
  "validators": {"git-clean": {"type": "command", "command": "git status --porcelain", "successWhen": "empty", "failurePattern": "git-dirty"}},
  "completionPatterns": {"git-dirty": {"edition": "failed", "adaptation": "git-dirty"}}}`,
		"prompts/steps/work/main/f_default.md":          "Do it.",
		"prompts/steps/work/main/f_failed_git-dirty.md": "Commit your work.",
		"script.yaml": "turns:\n  - text: \"ALL_DONE\"\n  - text: \"ALL_DONE\"\n  - text: \"ALL_DONE\"\n",
	})
}

// recorder writes a program called name into a new directory that records
// its environment (one "--- name" line, then the entries) in log and then
// runs real (when not "") with its arguments. It returns the directory.
func recorder(t *testing.T, name, real, log string) string {
	t.Helper()
	bin := t.TempDir()
	script := "#!/bin/sh\n{ echo '--- " + name + "'; env; } >> '" + log + "'\n"
	if real != "" {
		script += "exec '" + real + "' \"$@\"\n"
	}
	if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// hostKeys are credentials in capstan's environment that its own git and
// gh must not get (gh gets GH_TOKEN, its own).
var hostKeys = map[string]string{
	"ANTHROPIC_API_KEY": "sk-ant-host-0123456789abcdef",
	"OPENAI_API_KEY":    "sk-openai-host-0123456789",
	"PGPASSWORD":        "pg-host-password-0123456789",
	"ACME_CONN_STRING":  "acme-host-conn-0123456789",
	"GH_TOKEN":          "ghp_host0123456789abcdef",
}

// TestCapstansOwnProgramsGetNoProviderKeys: capstan's own git (the
// work dir check, the validator's git status) and gh (the closure of a
// GitHub-integrated run) are programs on PATH that record the environment
// they were started with. git gets no credential at all; gh gets GH_TOKEN
// and no provider key or other credential.
func TestCapstansOwnProgramsGetNoProviderKeys(t *testing.T) {
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	log := filepath.Join(t.TempDir(), "env.log")
	gitBin := recorder(t, "git", realGit, log)
	ghBin := recorder(t, "gh", "", log)
	dir := gitCleanAgent(t, `, "integrations": {"github": {"enabled": true, "defaultClosureAction": "close"}}`,
		` "parameters": {"issue": {"type": "number", "required": true}},`)
	wd := t.TempDir()
	testenv.Git(t, wd, "init", "-q", ".")
	state := t.TempDir()
	cmd := cliCommand("run", dir, "--workdir", wd, "--issue", "7")
	cmd.Env = append(cmd.Env, "PATH="+gitBin+string(os.PathListSeparator)+ghBin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GH_REPO=octo/repo", "HOME="+state, "CAPSTAN_STATE_DIR="+filepath.Join(state, "state"))
	for k, v := range hostKeys {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("no program recorded its environment: %v\n%s", err, out)
	}
	calls := strings.Split(string(b), "--- ")[1:]
	seen := map[string]bool{}
	for _, c := range calls {
		name, env, _ := strings.Cut(c, "\n")
		seen[name] = true
		for k, v := range hostKeys {
			if strings.Contains(env, v) && !(name == "gh" && k == "GH_TOKEN") {
				t.Errorf("%s was started with %s", name, k)
			}
		}
		if name == "gh" && !strings.Contains(env, "GH_TOKEN="+hostKeys["GH_TOKEN"]) {
			t.Errorf("gh was started without its token")
		}
	}
	if !seen["git"] || !seen["gh"] {
		t.Fatalf("programs run: %v; want git and gh\n%s", seen, out)
	}
}

// TestAGitPlantedOnPATHInTheWorkDirIsNeverRun: with PATH=$W/.venv/bin:$PATH
// and a git the model wrote at $W/.venv/bin/git, neither capstan run (a
// git-clean validator) nor capstan pipeline run --repo W runs it: both
// stop with DEPENDENCY_RESOLUTION (exit 2) naming the planted program.
func TestAGitPlantedOnPATHInTheWorkDirIsNeverRun(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	wd := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	venv := filepath.Join(wd, ".venv", "bin")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "planted-ran")
	if err := os.WriteFile(filepath.Join(venv, "git"), []byte("#!/bin/sh\necho \"$@\" >> '"+marker+"'\nexec /usr/bin/env -i git \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + venv + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, args := range [][]string{
		{"run", gitCleanAgent(t, "", ""), "--workdir", wd},
		{"pipeline", "run", "--repo", wd, "--since", "7d", "--now", fixedNow, "summarize development activity"},
	} {
		cmd := cliCommand(args...)
		cmd.Env = append(cmd.Env, path)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "DEPENDENCY_RESOLUTION") || !strings.Contains(string(out), "inside the work dir") {
			t.Errorf("capstan %s: exit %d, want 2 with DEPENDENCY_RESOLUTION:\n%s", args[0], code, out)
		}
		if m := testenv.PoisonMarker(marker); m != "" {
			t.Fatalf("capstan %s ran the planted git: %s", args[0], m)
		}
	}
}

// TestNothingTheWorkDirsGitConfigNamesRuns: a work dir whose .git/config
// names a program for gpg, fsmonitor, a hook, a filter, an external diff
// (and more, see testenv.Poison). capstan run with a git-clean
// validator and capstan pipeline run --repo W — over a shallow clone, so
// the shallow-clone check reads its commits — run none of them.
func TestNothingTheWorkDirsGitConfigNamesRuns(t *testing.T) {
	wd, marker := testenv.PoisonRepo(t)
	state := t.TempDir()
	cmd := cliCommand("run", gitCleanAgent(t, "", ""), "--workdir", wd)
	cmd.Env = append(cmd.Env, "HOME="+state, "CAPSTAN_STATE_DIR="+filepath.Join(state, "state"))
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "git-dirty") && !strings.Contains(string(out), "validation_exhausted") {
		t.Errorf("the git-clean validator did not see the modified file:\n%s", out)
	}
	if m := testenv.PoisonMarker(marker); m != "" {
		t.Fatalf("capstan run ran what .git/config names:\n%s\n%s", m, out)
	}

	src := testenv.MakeGitRepo(t, t.TempDir(), testenv.GitSteps())
	shallow := filepath.Join(t.TempDir(), "shallow")
	testenv.Git(t, t.TempDir(), "clone", "-q", "--depth", "2", "file://"+src, shallow)
	marker = testenv.Poison(t, shallow)
	code, pout, perr := runPipelineCLI(t, "pipeline", "run", "--repo", shallow, "--since", "3650d", "--now", fixedNow, "summarize development activity")
	if m := testenv.PoisonMarker(marker); m != "" {
		t.Fatalf("capstan pipeline run (exit %d) ran what .git/config names:\n%s\n%s%s", code, m, pout, perr)
	}
	if !strings.Contains(perr+pout, "shallow clone") {
		t.Errorf("the shallow-clone check did not run (exit %d):\n%s%s", code, pout, perr)
	}
}

// TestGitCleanReportsWorkTheModelHid: the model changes a tracked file
// and hides it from git status with git update-index --skip-worktree,
// then claims completion; the git-clean validator fails as git-dirty
// naming the file, and the run does not complete.
func TestGitCleanReportsWorkTheModelHid(t *testing.T) {
	wd := t.TempDir()
	testenv.Git(t, wd, "init", "-q", ".")
	if err := os.WriteFile(filepath.Join(wd, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Git(t, wd, "add", "-A")
	testenv.Git(t, wd, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
	hide := "echo cheat >> a.txt && git update-index --skip-worktree a.txt && git status --porcelain && echo HIDDEN"
	dir := writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "hide", "description": "hides its work",
  "runner": {"model": "script:script.yaml", "completion": {"type": "keyword", "keyword": "ALL_DONE", "validators": ["git-clean"]},
    "boundaries": {"allowedTools": ["Bash"], "permissionMode": "default"}}}`,
		"steps_registry.json": `{"agentId": "hide", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main", "onFailure": {"action": "retry", "maxAttempts": 1}}},
  "validators": {"git-clean": {"type": "command", "command": "git status --porcelain", "successWhen": "empty", "failurePattern": "git-dirty"}},
  "completionPatterns": {"git-dirty": {"edition": "failed", "adaptation": "git-dirty"}}}`,
		"prompts/steps/work/main/f_default.md":          "Do it.",
		"prompts/steps/work/main/f_failed_git-dirty.md": "Commit your work.",
		"script.yaml": "turns:\n  - tool_calls: [{name: Bash, input: {command: " + jsonString(hide) + "}}]\n  - text: \"ALL_DONE\"\n  - text: \"ALL_DONE\"\n",
	})
	state := t.TempDir()
	cmd := cliCommand("run", dir, "--workdir", wd)
	cmd.Env = append(cmd.Env, "HOME="+state, "CAPSTAN_STATE_DIR="+filepath.Join(state, "state"))
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want 1 (not completed):\n%s", code, out)
	}
	if len(filesHolding([]string{state}, `"output":"HIDDEN"`)) == 0 {
		b, _ := exec.Command("sh", "-c", "cat "+state+"/state/runs/*/*/events.jsonl").Output()
		t.Fatalf("the model's Bash did not run:\n%s\n%s", out, b)
	}
	if len(filesHolding([]string{state}, "a.txt (skip-worktree)")) == 0 {
		t.Errorf("the journal does not name the hidden file:\n%s", out)
	}
}
