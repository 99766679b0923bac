package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/spf13/cobra"
)

// The exit code of an error depends on its code and on whether the run
// had begun: a missing key or program before the first model request is
// the user's setup (2); the same codes from a run under way are provider
// or internal failures (3). An MCP server that cannot be reached is 3.
func TestExitCodeBeforeAndDuringARun(t *testing.T) {
	mcp := agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerTool, false, "MCP server %q: cannot start", "srv")
	for _, tc := range []struct {
		err    error
		before bool
		want   int
	}{
		{agenterr.New(agenterr.CodeSdkAuth, agenterr.LayerSDKBridge, false, "no key"), true, exitUsage},
		{agenterr.New(agenterr.CodeSdkAuth, agenterr.LayerSDKBridge, false, "401"), false, exitInternal},
		{agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "no gh"), true, exitUsage},
		{agenterr.New(agenterr.CodeDependencyResolution, agenterr.LayerLifecycle, false, "no gh"), false, exitInternal},
		{mcp, true, exitInternal},
		{agenterr.New(agenterr.CodeSdkConnection, agenterr.LayerSDKBridge, true, "reset"), true, exitInternal},
		{agenterr.New(agenterr.CodeConfigurationValidation, agenterr.LayerLifecycle, false, "no model"), true, exitUsage},
		{agenterr.New(agenterr.CodeSandboxUnavailable, agenterr.LayerConfiguration, false, "bad"), false, exitUsage},
		{agenterr.New(agenterr.CodeSandboxUnavailable, agenterr.LayerSandbox, false, "no namespaces"), true, exitUsage},
		{agenterr.New(agenterr.CodeSandboxUnavailable, agenterr.LayerSandbox, false, "no namespaces"), false, exitInternal},
		{agenterr.New(agenterr.CodeSandboxSetup, agenterr.LayerSandbox, false, "create the validators' build cache"), true, exitInternal},
		{os.ErrPermission, true, exitInternal},
	} {
		if got := exitCodeFor(tc.err, tc.before); got != tc.want {
			t.Errorf("exitCodeFor(%v, before=%v) = %d, want %d", tc.err, tc.before, got, tc.want)
		}
	}
	// A run that ended on a provider's authentication failure made
	// requests: 3.
	res := &event.RunResult{CompletionReason: "error", Error: &event.ResultError{Code: agenterr.CodeSdkAuth, Message: "401"}}
	if got := resultExitCode(res); got != exitInternal {
		t.Errorf("a run ended by SDK_AUTH: exit %d, want %d", got, exitInternal)
	}
	// A build cache that the run's first command could not make ends the
	// run as the same error did when the agent was built: 3.
	res = &event.RunResult{CompletionReason: "error", Error: &event.ResultError{Code: agenterr.CodeSandboxSetup, Message: "create the validators' build cache"}}
	if got := resultExitCode(res); got != exitInternal {
		t.Errorf("a run ended by SANDBOX_SETUP: exit %d, want %d", got, exitInternal)
	}
}

// What the user must fix in their setup before anything runs — no gh, no
// GitHub remote, no API key — is refused with exit 2 before the run is
// announced, by run, resume, skills run and pipeline run alike.
func TestSetupErrorsExit2BeforeTheRun(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	if code, out := sh("capstan init closer && capstan init keyed && mkdir fakebin w && git -C w init -q && git -C w commit -q --allow-empty -m start"); code != 0 {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(parent, "fakebin", "gh"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(parent, "closer", "agent.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(b, &def); err != nil {
		t.Fatal(err)
	}
	def["parameters"].(map[string]any)["issue"] = map[string]any{"type": "number", "required": true}
	def["runner"].(map[string]any)["integrations"] = map[string]any{"github": map[string]any{"enabled": true, "defaultClosureAction": "close"}}
	if b, err = json.MarshalIndent(def, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// A run that stopped on its budget, to resume with a model whose key
	// is not set.
	hello, err := filepath.Abs(filepath.Join("..", "..", "examples", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	code, out := sh("capstan run " + shellQuote(hello) + " --workdir w --max-iterations 1 -q --json")
	var stopped struct{ RunID string }
	if code != exitNotCompleted || json.Unmarshal([]byte(out), &stopped) != nil || stopped.RunID == "" {
		t.Fatalf("a run stopped by its budget: exit %d\n%s", code, out)
	}
	skills, err := filepath.Abs(filepath.Join("..", "..", "examples", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	noKeys := "env -u ANTHROPIC_API_KEY -u ANTHROPIC_AUTH_TOKEN -u OPENAI_API_KEY -u CAPSTAN_MODEL "
	for _, tc := range []struct{ line, want string }{
		// only capstan's own directory on PATH: no gh
		{`PATH="$(dirname "$(command -v capstan)")" capstan run closer --workdir w --issue 7`, "gh is not on PATH"},
		{`unset GH_REPO GH_HOST; PATH="$PWD/fakebin:$PATH" capstan run closer --workdir w --issue 7`, "has no GitHub remote"},
		{noKeys + "capstan run keyed --workdir w --model anthropic:claude-sonnet-4-5", "SDK_AUTH: no Anthropic API key"},
		{noKeys + "capstan resume " + stopped.RunID + " --model openai:gpt-5", "SDK_AUTH: no OpenAI API key"},
		{noKeys + "capstan skills run " + shellQuote(skills) + " --skill status-report --goal g --workdir w --model openai:gpt-5", "SDK_AUTH: no OpenAI API key"},
		{noKeys + "capstan pipeline run --repo w --model anthropic:claude-sonnet-4-5 'what happened last week'", "SDK_AUTH: no Anthropic API key"},
	} {
		code, out := sh(tc.line)
		if code != exitUsage || !strings.Contains(out, tc.want) || announced.MatchString(out) {
			t.Errorf("%s: exit %d, want %d with %q before any run output\n%s", tc.line, code, exitUsage, tc.want, out)
		}
	}
}

// Every command that takes --json prints a failure it meets before its own
// output as one JSON object on stdout — the error's code, message,
// location and hint, and the exit code — and exits as it would without
// --json.
func TestJSONErrorsOnStdout(t *testing.T) {
	parent := t.TempDir()
	sh := pasteShell(t, parent)
	if code, out := sh("capstan init broken && capstan init bad && capstan init keyed && mkdir w"); code != 0 {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	edit := func(dir, old, new string) {
		t.Helper()
		path := filepath.Join(parent, dir, "agent.json")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("broken", `"maxIterations": 3`, `"maxIterations": 3,`)
	edit("bad", `"maxIterations": 3`, `"maxIterations": "3"`)
	covered := map[string]bool{}
	for _, tc := range []struct {
		cmd, line, code, file string
		exit                  int
	}{
		{"capstan run", "capstan run broken --workdir w --json", "CONFIG_PARSE", "broken/agent.json", exitUsage},
		{"capstan run", "capstan run bad --workdir w --json", "CONFIG_INVALID", "", exitUsage},
		{"capstan run", "env -u OPENAI_API_KEY capstan run keyed --json --workdir w --model openai:gpt-5", "SDK_AUTH", "", exitUsage},
		{"capstan resume", "capstan resume no-such-run --json", "RUN_NOT_FOUND", "", exitUsage},
		{"capstan fix", "capstan fix 'make the failing tests pass' --workdir w --json", "CONFIG_INVALID", "", exitUsage},
		{"capstan validate", "capstan validate --json", "USAGE", "", exitUsage},
		{"capstan runs", "capstan runs --json --bogus", "USAGE", "", exitUsage},
		{"capstan show", "capstan show no-such-run --json", "RUN_NOT_FOUND", "", exitUsage},
		{"capstan skills list", "capstan skills list nope --json", "CONFIG_NOT_FOUND", "", exitUsage},
		{"capstan skills run", "capstan skills run nope --skill a --goal b --model script:x.yaml --json", "USAGE", "", exitUsage},
		{"capstan pipeline run", "capstan pipeline run --json --repo nope 'what happened'", "GIT", "", exitUsage},
		{"capstan mcp list", "capstan mcp list bad --json", "CONFIG_INVALID", "", exitUsage},
		{"capstan doctor", "capstan doctor --json --bogus", "USAGE", "", exitUsage},
		{"capstan version", "capstan version --json --bogus", "USAGE", "", exitUsage},
		{"capstan workflow validate", "capstan workflow validate --json", "USAGE", "", exitUsage},
		{"capstan workflow run", "capstan workflow run --json --workdir w", "USAGE", "", exitUsage},
	} {
		covered[tc.cmd] = true
		code, out := sh(tc.line + " 2>/dev/null")
		var got errorJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil || code != tc.exit || got.ExitCode != tc.exit ||
			got.Error.Code != tc.code || got.Error.Message == "" || got.Error.File != tc.file {
			t.Errorf("%s: exit %d, want %d; stdout (%v):\n%s", tc.line, code, tc.exit, err, out)
			continue
		}
		if tc.file != "" && (got.Error.Line == 0 || got.Error.Hint == "") {
			t.Errorf("%s: no line or hint:\n%s", tc.line, out)
		}
		if strings.Contains(tc.line, " bad ") && (len(got.Error.Problems) == 0 || got.Error.Problems[0].File != "bad/agent.json" || got.Error.Problems[0].Line == 0) {
			t.Errorf("%s: the problems are not listed with their files and lines:\n%s", tc.line, out)
		}
	}
	walkCommands(newRootCmd(), func(c *cobra.Command) {
		if c.Flags().Lookup("json") != nil && !covered[c.CommandPath()] {
			t.Errorf("%s takes --json but no failure of it is checked here", c.CommandPath())
		}
	})
}

// doctor reports the memory cgroup next to the pids cgroup: ok with where
// runs get one, or a warning saying what its absence means.
func TestDoctorReportsTheMemoryCgroup(t *testing.T) {
	_, out, _ := captureConfigCLI(t, "doctor", "--json")
	var checks []doctorCheck
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, c := range checks {
		if c.Name != "memory limit" {
			continue
		}
		switch {
		case c.Status == checkOK && strings.Contains(c.Detail, "memory cgroup per run"):
		case c.Status == checkWarn && strings.Contains(c.Detail, "no memory cgroup") && strings.Contains(c.Hint, "go test -race"):
		default:
			t.Errorf("memory limit check: %+v", c)
		}
		return
	}
	t.Fatalf("no memory limit check:\n%s", out)
}
