package claudecode_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/fakellm"
	"github.com/capstan-dev/capstan/llm"
	"github.com/capstan-dev/capstan/llm/claudecode"
)

// TestRealCLIAgainstFakeAnthropic drives the real claude CLI, when it is
// installed, against fakellm's Anthropic server over loopback: no network
// and no real key.
func TestRealCLIAgainstFakeAnthropic(t *testing.T) {
	bin, err := exec.LookPath("claude")
	if err != nil {
		t.Skip("claude CLI not on PATH; install it with `npm install -g @anthropic-ai/claude-code` to run this test")
	}
	srv := fakellm.NewAnthropic(t, fakellm.Options{Respond: func(r fakellm.Request) fakellm.Reply {
		if strings.Contains(r.LastUserText, "PING-7") {
			return fakellm.Reply{Text: "PONG-7"}
		}
		return fakellm.Reply{Text: "ok"} // side requests (titles, summaries) of the CLI
	}})
	home := t.TempDir()
	env := map[string]string{
		"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": "test-key", "CLAUDE_CONFIG_DIR": home, "HOME": home,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
	}
	b, err := claudecode.New(claudecode.Config{Binary: bin, WorkDir: t.TempDir(), Model: "claude-sonnet-5",
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := b.Query(ctx, "Reply with the word for PING-7.", llm.QueryOptions{MaxTurns: 1, PermissionMode: "plan"})
	if err != nil {
		t.Fatalf("%v (fake saw %d requests)", err, len(srv.Requests()))
	}
	if res.SessionID == "" || !strings.Contains(strings.Join(res.Responses, "\n"), "PONG-7") {
		t.Fatalf("result = %+v", res)
	}
}
