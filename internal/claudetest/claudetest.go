// Package claudetest finds the real Claude Code CLI for the tests that
// drive it against a loopback fake of the Anthropic API.
package claudetest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/capstan-dev/capstan/llm/claudecode"
)

// Version is the Claude Code CLI release CI installs (.ci/run pins the
// same one).
const Version = "2.1.330"

// installHint is the command that installs the pinned CLI.
const installHint = "npm install -g @anthropic-ai/claude-code@" + Version

// CLI returns the claude binary the tests run: CAPSTAN_CLAUDE_PATH, else
// claude on PATH. Without one it skips tb with the install command, or,
// under CI (which installs the CLI), fails it.
func CLI(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(claudecode.EnvBinary); p != "" {
		return p
	}
	p, err := exec.LookPath("claude")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("the claude CLI is not on PATH and CI installs it (%s): %v", installHint, err)
		}
		tb.Skipf("the claude CLI is not on PATH; install it with `%s` to run this test", installHint)
	}
	return p
}
