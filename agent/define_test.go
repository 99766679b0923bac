package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/capstan-dev/capstan/agentdir"
	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/event"
	"github.com/capstan-dev/capstan/journal"
)

// goValuesOf reads the agent folder dir into Go values: its definition
// and registry decoded into config types, its prompts as Prompts, and its
// script as a file of Files — the agent an embedder would build in Go.
func goValuesOf(t *testing.T, dir string) Config {
	t.Helper()
	cfg := goValues(&countingValidator{})
	for _, f := range []struct {
		name string
		v    any
	}{{agentdir.AgentFile, &cfg.Definition}, {agentdir.DefaultRegistryFile, &cfg.Registry}} {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, f.v); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cfg.Prompts.Steps = map[string]string{}
	for id, st := range cfg.Registry.Steps {
		cfg.Prompts.Steps[id] = read(filepath.Join("prompts", cfg.Registry.C1, st.C2, st.C3, "f_default.md"))
	}
	cfg.Prompts.Retries = map[RetryPrompt]string{{Step: "s.main", Pattern: "out-missing"}: read("prompts/steps/s/main/f_failed_out-missing.md")}
	if p := cfg.Definition.Runner.SystemPromptPath; p != "" {
		cfg.Prompts.System = read(p)
		cfg.Definition.Runner.SystemPromptPath = ""
	}
	cfg.Files = fstest.MapFS{"script.yaml": {Data: []byte(read("script.yaml"))}}
	return cfg
}

// TestGoValuesRunLikeTheFolder: the same agent built from an agent folder
// and from Go values (definition, registry, prompts — system, step and
// retry — and the script as a Go file) runs the same: the same prompts
// with the same variables, the same verdicts, the same ending.
func TestGoValuesRunLikeTheFolder(t *testing.T) {
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`,
		`"uvVariables": ["iteration"], "onFailure": {"action": "retry", "maxAttempts": 3}`,
		"turns:\n  - text: \"DONE\"\n"+strings.TrimPrefix(honestScript, "turns:\n"))
	rewrite(t, dir, agentdir.AgentFile, `"model": "script:script.yaml",`, `"model": "script:script.yaml", "systemPromptPath": "prompts/system.md",`)
	if err := os.WriteFile(filepath.Join(dir, "prompts", "system.md"), []byte("You are {uv-agent_name}."), 0o644); err != nil {
		t.Fatal(err)
	}
	rewrite(t, dir, "prompts/steps/s/main/f_default.md", "Write out.txt", "Iteration {uv-iteration}: write out.txt")
	story := func(res *event.RunResult) []string {
		events, err := journal.ReadFile(res.Journal)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{res.CompletionReason + " " + res.Reason}
		for _, e := range events {
			switch e.Type {
			case journal.PromptResolved, journal.RetryPrompt, journal.CompletionCheck:
				out = append(out, e.Type+" "+string(e.Data))
			}
		}
		return out
	}
	fromFolder, _ := runVerdict(t, dir, nil)
	cfg := goValuesOf(t, dir)
	cfg.WorkDir = t.TempDir()
	fromGo := runToEnd(t, nil, cfg)
	if !fromFolder.Success || fromFolder.Iterations != 2 {
		t.Fatalf("folder run: %s %q after %d iterations", fromFolder.CompletionReason, fromFolder.Reason, fromFolder.Iterations)
	}
	a, b := story(fromFolder), story(fromGo)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("the Go values ran differently:\nfolder:\n%s\nGo:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	if !strings.Contains(strings.Join(b, "\n"), "Iteration 1: write out.txt") || !strings.Contains(strings.Join(b, "\n"), "out.txt is missing") {
		t.Fatalf("prompts not rendered:\n%s", strings.Join(b, "\n"))
	}
}

// TestGoValuesAreValidatedLikeFiles: problems of an agent built from Go
// values are reported all at once with the codes of a folder's, and
// Prompts keys that name no step or pattern are errors.
func TestGoValuesAreValidatedLikeFiles(t *testing.T) {
	cfg := goValuesOf(t, verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", liarScript))
	cfg.WorkDir = t.TempDir()
	ctx := context.Background()

	broken := cfg
	broken.Prompts = Prompts{} // no step prompt, no retry prompt
	broken.Definition = &agentdir.Definition{}
	*broken.Definition = *cfg.Definition
	broken.Definition.Runner.Completion.Keyword = ""
	_, err := New(ctx, broken)
	var ve *agentdir.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	codes := map[string]bool{}
	for _, p := range ve.Problems() {
		codes[p.Code] = true
	}
	for _, want := range []string{"AC-COMPLETION-KEYWORD", CodeStepPromptMissing, CodeRetryPromptMissing} {
		if !codes[want] {
			t.Errorf("no %s in %v", want, ve.Problems())
		}
	}

	badKeys := cfg
	badKeys.Prompts.Steps = map[string]string{"nope": "x", "s.main": "Write out.txt."}
	badKeys.Prompts.Retries = map[RetryPrompt]string{{Step: "s.main", Pattern: "no-such-pattern"}: "x"}
	_, err = New(ctx, badKeys)
	if agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation || !strings.Contains(err.Error(), `no step "nope"`) ||
		!strings.Contains(err.Error(), `no failure pattern "no-such-pattern"`) {
		t.Fatalf("err = %v", err)
	}

	withFolder := cfg
	withFolder.Files = fstest.MapFS{"agent.json": {Data: []byte("{}")}}
	if _, err := New(ctx, withFolder); agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation || !strings.Contains(err.Error(), "Config.Files holds agent.json") {
		t.Fatalf("agent.json in Files: %v", err)
	}

	both, err := Load(verdictAgent(t, `{"type": "keyword", "keyword": "DONE"}`, "", liarScript), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(ctx, both); agenterr.CodeOf(err) != agenterr.CodeConfigurationValidation {
		t.Fatalf("Agent and Definition both set: %v", err)
	}
}

// TestGoValuesPathsOutsideAreValidationProblems: a prompts base or system
// prompt path that leaves the (absent) agent folder is reported by
// validation with its code, like in a folder.
func TestGoValuesPathsOutsideAreValidationProblems(t *testing.T) {
	cfg := goValuesOf(t, verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`, "", liarScript))
	cfg.Definition.Runner.Prompts.Base = "../elsewhere"
	cfg.Definition.Runner.SystemPromptPath = "/etc/system.md"
	cfg.Prompts.System = "You are a test."
	_, err := Define(cfg)
	var ve *agentdir.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	n := 0
	for _, p := range ve.Problems() {
		if p.Code == "AC-PATH-OUTSIDE" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("want AC-PATH-OUTSIDE for the base and the system prompt: %v", ve.Problems())
	}
}

// TestGoValuesResume: a run of an agent built from Go values is resumed
// from Go with the same values; it continues where it stopped.
func TestGoValuesResume(t *testing.T) {
	dir := verdictAgent(t, `{"type": "keyword", "keyword": "DONE", "validators": ["out-exists"]}`,
		`"onFailure": {"action": "retry", "maxAttempts": 3}`, "turns:\n  - text: \"DONE\"\n"+strings.TrimPrefix(honestScript, "turns:\n"))
	wd := t.TempDir()
	cfg := goValuesOf(t, dir)
	cfg.WorkDir, cfg.MaxIterations = wd, 1
	first := runToEnd(t, nil, cfg)
	if first.Success || first.CompletionReason != "max_iterations" {
		t.Fatalf("first run: %s %q", first.CompletionReason, first.Reason)
	}
	rec, err := LoadRun(first.RunID, first.Journal)
	if err != nil {
		t.Fatal(err)
	}
	again := goValuesOf(t, dir)
	again.WorkDir, again.Resume = wd, rec
	res := runToEnd(t, nil, again)
	if !res.Success || res.RunID != first.RunID || res.Iterations != 2 || !strings.Contains(res.Reason, "verified by out-exists") {
		t.Fatalf("resumed: %s %q after %d iterations (run %s, first %s)", res.CompletionReason, res.Reason, res.Iterations, res.RunID, first.RunID)
	}
}
