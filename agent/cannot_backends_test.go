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
