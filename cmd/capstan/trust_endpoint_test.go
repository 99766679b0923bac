package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/fakellm"
)

// openAIAgent is an agent on openai:gpt-4.1 with no base URL of its own.
func openAIAgent(t *testing.T) string {
	return writeFiles(t, map[string]string{
		"agent.json": `{"version": "1.0.0", "name": "ep", "description": "talks to openai",
  "runner": {"model": "openai:gpt-4.1", "completion": {"type": "keyword", "keyword": "DONE"}}}`,
		"steps_registry.json":                  `{"agentId": "ep", "entryStep": "s", "steps": {"s": {"stepId": "s", "c2": "work", "c3": "main"}}}`,
		"prompts/steps/work/main/f_default.md": "Say DONE.",
	})
}

// userConfigWith points XDG_CONFIG_HOME at a user config holding text.
func userConfigWith(t *testing.T, text string) {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "capstan"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "capstan", "config.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", home)
}

// A base URL that is neither loopback nor the provider's host, found only
// in the user config (a file an unsandboxed model could have written), is
// refused before any request (ENDPOINT_UNCONFIRMED, exit 2); the printed
// command, pasted, confirms it on the command line, and the run names the
// endpoint and its source on its first progress line and in the journal.
func TestUserConfigEndpointElsewhereMustBeConfirmed(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "DONE"}}})
	const gateway = "http://gw.example.test/v1"
	userConfigWith(t, "base_urls:\n  openai: "+gateway+"\n")
	// The key goes to capstan only, by the pasted line's assignment: a
	// shell started with it would be an ancestor holding the key, and the
	// unsandboxed run is refused for that (KEY_IN_ANCESTOR).
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	// The gateway is reached through a proxy, the fake API: nothing
	// leaves the machine.
	t.Setenv("HTTP_PROXY", strings.TrimSuffix(srv.URL, "/v1"))
	t.Setenv("NO_PROXY", "")
	dir, work := openAIAgent(t), t.TempDir()
	sh := pasteShell(t, work)
	const key = "OPENAI_API_KEY=sk-endpoint-test-0123456789 "
	code, out := sh(key + "capstan run " + shellQuote(dir) + " --workdir .")
	if code != exitUsage || !strings.Contains(out, "ENDPOINT_UNCONFIRMED") || !strings.Contains(out, "base_urls.openai") {
		t.Fatalf("exit %d, want %d with ENDPOINT_UNCONFIRMED\n%s", code, exitUsage, out)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the refused run made %d requests", n)
	}
	_, confirm, ok := strings.Cut(out, "confirm it with: ")
	if !ok {
		t.Fatalf("no command to confirm in:\n%s", out)
	}
	confirm, _, _ = strings.Cut(confirm, " (or set")
	if want := "capstan run " + shellQuote(dir) + " --workdir . --base-url " + gateway; confirm != want {
		t.Errorf("confirm command %q, want %q", confirm, want)
	}
	code, out = sh(key + confirm)
	if code != 0 {
		t.Fatalf("pasted %q: exit %d\n%s", confirm, code, out)
	}
	inOrder(t, out, "capstan: running ep (run ", "; the model's requests go to "+gateway+" (from --base-url)")
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("the confirmed run made %d requests, want 1", n)
	}
	j := readJournal(t, work)
	if !strings.Contains(j, `"endpoint":"`+gateway+`","endpointSource":"--base-url"`) {
		t.Errorf("run.start does not name the endpoint and its source:\n%.2000s", j)
	}
}

// A loopback base URL in the user config (a local server) needs no
// confirmation; the run names it and where it came from.
func TestUserConfigLoopbackEndpointIsNamed(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "DONE"}}})
	userConfigWith(t, "base_urls:\n  openai: "+srv.URL+"\n")
	t.Setenv("OPENAI_API_KEY", "sk-endpoint-test-0123456789")
	t.Setenv("OPENAI_BASE_URL", "")
	work := t.TempDir()
	code, _, errOut := captureConfigCLI(t, "run", openAIAgent(t), "--workdir", work)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "; the model's requests go to "+srv.URL+" (from user config base_urls.openai)\n") {
		t.Errorf("first progress line does not name the endpoint:\n%s", errOut)
	}
	if j := readJournal(t, work); !strings.Contains(j, `"endpointSource":"user config base_urls.openai"`) {
		t.Errorf("journal:\n%.2000s", j)
	}
}

// skills run takes base_urls from the user config under the same rule: a
// gateway found only there is refused before any request.
func TestSkillsRunRefusesAnUnconfirmedUserConfigEndpoint(t *testing.T) {
	srv := fakellm.NewOpenAI(t, fakellm.Options{Replies: []fakellm.Reply{{Text: "nothing to do"}}})
	userConfigWith(t, "base_urls:\n  openai: http://gw.example.test/v1\n")
	t.Setenv("OPENAI_API_KEY", "sk-endpoint-test-0123456789")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("HTTP_PROXY", strings.TrimSuffix(srv.URL, "/v1"))
	dir := copyDir(t, filepath.Join("..", "..", "examples", "skills"))
	args := exampleSkillArgs(t, dir, t.TempDir(), "--json", "--fresh")
	for i, a := range args {
		if a == "script:status-report.script.yaml" {
			args[i] = "openai:gpt-test-model"
		}
	}
	code, _, errOut := captureConfigCLI(t, args...)
	if code != exitUsage || !strings.Contains(errOut, "ENDPOINT_UNCONFIRMED") {
		t.Fatalf("exit %d, want %d with ENDPOINT_UNCONFIRMED\n%s", code, exitUsage, errOut)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests", n)
	}
}
