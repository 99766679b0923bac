package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capstan-dev/capstan/verify"
)

// A --check command of capstan fix is the repository's code run for the
// model's work: it runs in the sandbox, where it cannot write outside the
// work dir. The control, --no-sandbox, can.
func TestFixCheckRunsSandboxed(t *testing.T) {
	needSandbox(t)
	for _, mode := range []string{"sandboxed", "no-sandbox"} {
		t.Run(mode, func(t *testing.T) {
			repo, _ := fixRepo(t, "pytest")
			outside := filepath.Join(t.TempDir(), "escaped")
			script := filepath.Join(t.TempDir(), "script.yaml")
			if err := os.WriteFile(script, []byte("turns:\n  - structured: {status: completed, summary: done, next_action: {action: complete, reason: done}}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"fix", "x", "--workdir", repo, "--check", "tests=test -d .", "--check", "escape=touch " + verify.ShellQuote(outside), "--model", "script:" + script, "--quiet"}
			if mode == "no-sandbox" {
				args = append(args, "--no-sandbox")
			}
			code, _, errOut := capstanIn(t, repo, nil, args...)
			_, err := os.Stat(outside)
			switch {
			case mode == "sandboxed" && (err == nil || code == 0):
				t.Fatalf("the sandboxed check wrote %s outside the work dir (exit %d)\n%s", outside, code, errOut)
			case mode == "no-sandbox" && (err != nil || code != 0):
				t.Fatalf("control: the unsandboxed check did not write %s (exit %d): %v\n%s", outside, code, err, errOut)
			}
		})
	}
}
