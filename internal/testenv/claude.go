package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// ClaudeVersion is the Claude Code CLI release CI installs (.ci/run pins the
// same one).
const ClaudeVersion = "2.1.330"

// ClaudeBinaryEnv names the variable that points capstan at a claude
// binary (llm/claudecode's EnvBinary, which a test there holds equal;
// this package cannot import it: packages claudecode depends on use
// testenv in their own tests).
const ClaudeBinaryEnv = "CAPSTAN_CLAUDE_PATH"

// installHint is the command that installs the pinned CLI.
const installHint = "npm install -g @anthropic-ai/claude-code@" + ClaudeVersion

// ClaudeCLI returns the claude binary the tests run: CAPSTAN_CLAUDE_PATH, else
// claude on PATH. Without one it skips tb with the install command, or,
// under CI (which installs the ClaudeCLI), fails it.
func ClaudeCLI(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(ClaudeBinaryEnv); p != "" {
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
