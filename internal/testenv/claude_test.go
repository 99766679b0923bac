package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// CI installs the version the skip message names.
func TestVersionIsTheOneCIInstalls(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CLAUDE_CODE_VERSION=(\S+)$`).FindSubmatch(script)
	if m == nil {
		t.Fatal(".ci/run sets no CLAUDE_CODE_VERSION")
	}
	if string(m[1]) != ClaudeVersion {
		t.Fatalf(".ci/run installs claude %s, testenv.ClaudeVersion is %s", m[1], ClaudeVersion)
	}
}
