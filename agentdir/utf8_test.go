package agentdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

// TestInvalidUTF8IsACodedError: agent.json with a Latin-1 byte inside a
// string is refused with CONFIG_PARSE at the byte's line and column, not
// accepted with the byte turned into U+FFFD.
func TestInvalidUTF8IsACodedError(t *testing.T) {
	dir := writeAgent(t, baseAgent(), baseRegistry(), nil)
	p := filepath.Join(dir, AgentFile)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(raw), `"description": "`, "\"description\": \"caf\xe9 ", 1)
	if bad == string(raw) {
		t.Fatal("fixture has no description")
	}
	if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadAndValidate(dir, testOpts)
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeConfigurationParse || e.File != AgentFile || e.Line == 0 || !strings.Contains(e.Message, "UTF-8") {
		t.Fatalf("err = %#v", err)
	}
}
