package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gh runs with capstan's credentials: a gh inside the work dir (where a
// PATH entry may point) is refused, and gh's environment holds no model
// API key, no GIT_* setting and no PATH entry inside the work dir.
func TestWorkflowGHIsTrustedAndItsEnvironmentMinimal(t *testing.T) {
	wd := t.TempDir()
	bin := filepath.Join(wd, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "gh"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if _, err := trustedGH(wd); err == nil || !strings.Contains(err.Error(), "inside the work dir") {
		t.Fatalf("a gh in the work dir was accepted: %v", err)
	}
	code, _, errOut := runPipelineCLI(t, "workflow", "run", "--issue", "1", "--workdir", wd, "--workflow", "../../workflow/testdata/issues.json", "--repo", "a/b", "--stub-dispatch", "{}")
	if code != exitUsage || !strings.Contains(errOut, "inside the work dir") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	env := ghEnv([]string{"PATH=" + bin + ":/usr/bin", "ANTHROPIC_API_KEY=sk-ant-secret", "OPENAI_API_KEY=sk-secret",
		"GIT_CONFIG_GLOBAL=/tmp/evil", "GH_TOKEN=ghp_x", "HOME=/home/u"}, wd)
	joined := strings.Join(env, "\n")
	for _, bad := range []string{"sk-ant-secret", "sk-secret", "GIT_CONFIG_GLOBAL", bin} {
		if strings.Contains(joined, bad) {
			t.Fatalf("gh's environment holds %q:\n%s", bad, joined)
		}
	}
	for _, want := range []string{"PATH=/usr/bin", "GH_TOKEN=ghp_x", "HOME=/home/u", "GH_PROMPT_DISABLED=1"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("gh's environment lacks %q:\n%s", want, joined)
		}
	}
	for _, repo := range []string{"--repo=x/y", "a/b/c", "a", "a/-b", "a/b c"} {
		if ghRepoName(repo) {
			t.Fatalf("%q accepted as a repository", repo)
		}
	}
	if !ghRepoName("acme/app.go") {
		t.Fatal("acme/app.go refused")
	}
}
