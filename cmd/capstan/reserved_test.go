package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/capstan-dev/capstan/agentdir"
)

// The flags a parameter may not take are exactly capstan run's real flag
// set, and docs/configuration.md lists them: a parameter named repo or
// stream is refused by validate instead of being swallowed by capstan's
// own flag.
func TestReservedFlagsAreRunsFlags(t *testing.T) {
	fs := newRunCmd().Flags()
	real := []string{"--help"}
	fs.VisitAll(func(fl *pflag.Flag) { real = append(real, "--"+fl.Name) })
	slices.Sort(real)
	reserved := slices.Sorted(slices.Values(agentdir.DefaultReservedFlags()))
	if !slices.Equal(real, reserved) {
		t.Errorf("agentdir.DefaultReservedFlags() = %v\ncapstan run's flags  = %v", reserved, real)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range real {
		if !strings.Contains(string(b), "`"+flag+"`") {
			t.Errorf("docs/configuration.md does not list %s among the reserved flags", flag)
		}
	}
	dir := t.TempDir()
	sh := pasteShell(t, dir)
	if code, out := sh("capstan init p"); code != 0 {
		t.Fatal(out)
	}
	path := filepath.Join(dir, "p", "agent.json")
	a, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"repo", "stream"} {
		edited := strings.Replace(string(a), `"parameters": {`, `"parameters": {"`+name+`": {"type": "string"},`, 1)
		if edited == string(a) {
			t.Fatal("no parameters in the scaffold's agent.json")
		}
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out := sh("capstan validate p"); code == 0 || !strings.Contains(out, "PA-CLI-RESERVED") {
			t.Errorf("a parameter named %s: exit %d\n%s", name, code, out)
		}
	}
}
