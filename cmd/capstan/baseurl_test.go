package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agent"
	"github.com/capstan-dev/capstan/journal"
)

// A key in --base-url (its query string or the user:password@ part) is
// refused before the run records anything: no journal, no `capstan runs`
// entry, and the key is not printed. The same rule holds for skills run.
func TestBaseURLFlagWithAKeyIsRefused(t *testing.T) {
	const secret = "sk-flag-SECRET-0123456789"
	agentDir := endpointAgent(t)
	env := []string{"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="}
	for _, u := range []string{
		"https://gateway.example/v1?key=" + secret,
		"https://user:" + secret + "@gateway.example/v1",
		"https://" + secret + "@gateway.example/v1",
	} {
		wd := t.TempDir()
		code, out, stderr := capstanIn(t, wd, env, "run", agentDir, "--base-url", u, "--workdir", wd)
		// The message names the flag the user gave, not a Go field, and
		// comes before the run is announced.
		if code != exitUsage || strings.Contains(out+stderr, secret) || !strings.Contains(stderr, "--base-url carries") ||
			strings.Contains(stderr, "Config.") || announced.MatchString(stderr) || !strings.Contains(stderr, "OPENAI_API_KEY") {
			t.Errorf("run --base-url %s: exit %d\n%s%s", strings.ReplaceAll(u, secret, "KEY"), code, out, stderr)
		}
		if code, out, _ := capstanIn(t, wd, env, "runs", "--workdir", wd); code != 0 || strings.Contains(out, "ep") {
			t.Errorf("a refused run was recorded: exit %d\n%s", code, out)
		}
	}
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	code, out, stderr := captureConfigCLI(t, "skills", "run", dir, "--skill", "status-report", "--goal", "g",
		"--model", "openai:m", "--base-url", "https://gateway.example/v1?key="+secret)
	if code != exitUsage || strings.Contains(out+stderr, secret) || !strings.Contains(stderr, "--base-url carries a query string") {
		t.Errorf("skills run --base-url with a key: exit %d\n%s%s", code, out, stderr)
	}
}

// A run recorded before runs refused a key in the base URL is shown by
// `show --json` with the key redacted.
func TestShowRedactsARecordedBaseURLKey(t *testing.T) {
	wd := t.TempDir()
	const id = "20261124T000000Z-b0b0b0"
	w, err := testStore(t).Create(wd, id)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(journal.RunStart, agent.RunStartEvent{RunID: id, Agent: "ep", WorkDir: wd, Model: "openai:m",
		Options: &agent.RunOptions{BaseURL: "https://u:sk-show-SECRET@gw.example/v1", Endpoint: "https://gw.example/v1?key=sk-show-SECRET"}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := capstanIn(t, wd, nil, "show", id, "--json")
	if code != 0 || strings.Contains(out+stderr, "SECRET") ||
		!strings.Contains(out, `"baseUrl": "https://REDACTED@gw.example/v1"`) || !strings.Contains(out, `"endpoint": "https://gw.example/v1?REDACTED"`) {
		t.Fatalf("show --json: exit %d\n%s\n%s", code, out, stderr)
	}
}
