package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/fakellm"
	_ "github.com/capstan-dev/capstan/llm/anthropic"
	_ "github.com/capstan-dev/capstan/llm/openai"
)

// The honest way out works the same over the real wire formats: the
// Anthropic and OpenAI providers against their loopback fakes.
func TestCannotCompleteOverTheLoopbackFakes(t *testing.T) {
	const answer = "I checked the spec.\nCANNOT_COMPLETE: the spec requires Add to subtract but TestAdd expects a sum\napp_test.go:10 want 5"
	for _, c := range []struct {
		name, model, keyVar string
		start               func(testing.TB, fakellm.Options) *fakellm.Server
	}{
		{"anthropic", "anthropic:claude-test", "ANTHROPIC_API_KEY", fakellm.NewAnthropic},
		{"openai", "openai:gpt-test", "OPENAI_API_KEY", fakellm.NewOpenAI},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := c.start(t, fakellm.Options{APIKey: "test-key", Replies: []fakellm.Reply{{Text: answer}}})
			dir := cheatAgent(t, "true", goProtect, "turns:\n  - text: unused\n")
			agentJSON := filepath.Join(dir, "agent.json")
			b, _ := os.ReadFile(agentJSON)
			b = []byte(strings.Replace(string(b), `"model": "script:script.yaml",`, `"model": "`+c.model+`", "baseUrl": "`+srv.URL+`",`, 1))
			if err := os.WriteFile(agentJSON, b, 0o644); err != nil {
				t.Fatal(err)
			}
			def := load(t, dir)
			env := map[string]string{c.keyVar: "test-key"}
			res := runToEnd(t, def, BuildOptions{WorkDir: t.TempDir(), Getenv: func(k string) string { return env[k] }})
			if res.CompletionReason != ReasonCannotComplete || res.CannotComplete == nil ||
				!strings.HasPrefix(res.CannotComplete.Reason, "the spec requires Add to subtract") || res.CannotComplete.Evidence != "app_test.go:10 want 5" {
				t.Fatalf("%+v %+v", res, res.Error)
			}
			if srv.Remaining() != 0 {
				t.Fatal("the fake model was not asked")
			}
		})
	}
}

// wayOutModel answers like a model that keeps declaring completion until
// a retry prompt offers the honest way out, and takes it then. Requests
// that are not the run's (a CLI's side requests) get "ok".
func wayOutModel(r fakellm.Request) fakellm.Reply {
	switch {
	case strings.Contains(r.LastUserText, "### If the task cannot be done as specified"):
		return fakellm.Reply{Text: "Then I say so.\nCANNOT_COMPLETE: done.txt may not be written by this task\nthe task forbids new files"}
	case strings.Contains(r.LastUserText, "done.txt"), strings.Contains(r.LastUserText, "The tests fail. Make them pass."):
		return fakellm.Reply{Text: "All done. TASK_DONE"}
	}
	return fakellm.Reply{Text: "ok"}
}

// wayOutAgent is an agent whose check (done.txt exists) fails every time,
// with model on baseURL.
func wayOutAgent(t *testing.T, model, baseURL string) string {
	t.Helper()
	dir := cheatAgent(t, "true", goProtect, "turns:\n  - text: unused\n")
	for file, edit := range map[string][2]string{
		"agent.json": {`"model": "script:script.yaml",`, `"model": "` + model + `", "baseUrl": "` + baseURL + `",`},
		"steps_registry.json": {`"tests-pass": {"type": "command", "command": "true", "failurePattern": "test-failed",`,
			`"tests-pass": {"type": "file", "path": "done.txt", "failurePattern": "file-not-exists",`},
	} {
		p := filepath.Join(dir, file)
		b, _ := os.ReadFile(p)
		s := strings.Replace(strings.Replace(string(b), edit[0], edit[1], 1), `"maxAttempts": 2`, `"maxAttempts": 4`, 1)
		s = strings.Replace(s, `"extractParams": {"failedTests": "parseTestOutput"}`, `"extractParams": {}`, 1)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The retry prompt offers the way out when the same failure repeats, and
// a model that takes it ends the run: over the real wire formats too.
func TestRepeatedFailureOffersTheWayOutOverTheLoopbackFakes(t *testing.T) {
	for _, c := range []struct {
		name, model, keyVar string
		start               func(testing.TB, fakellm.Options) *fakellm.Server
	}{
		{"anthropic", "anthropic:claude-test", "ANTHROPIC_API_KEY", fakellm.NewAnthropic},
		{"openai", "openai:gpt-test", "OPENAI_API_KEY", fakellm.NewOpenAI},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := c.start(t, fakellm.Options{APIKey: "test-key", Respond: wayOutModel})
			env := map[string]string{c.keyVar: "test-key"}
			res := runToEnd(t, load(t, wayOutAgent(t, c.model, srv.URL)), BuildOptions{WorkDir: t.TempDir(), Getenv: func(k string) string { return env[k] }})
			if res.CompletionReason != ReasonCannotComplete || res.Iterations != 3 || res.CannotComplete == nil ||
				res.CannotComplete.Reason != "done.txt may not be written by this task" {
				t.Fatalf("%+v %+v", res, res.Error)
			}
			patterns, texts := retryPatterns(t, res)
			if len(texts) != 2 || patterns[1] != "file-not-exists" || strings.Contains(texts[0], "### If the task cannot be done") ||
				!strings.Contains(texts[1], "### If the task cannot be done") {
				t.Fatalf("retries %v:\n%s", patterns, strings.Join(texts, "\n---\n"))
			}
		})
	}
}
