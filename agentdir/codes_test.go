package agentdir

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/tool"
)

// Every code is documented in docs/configuration.md with an example and a
// fix, and the documentation names no code that does not exist.
func TestCodesAreDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	seen := map[string]bool{}
	for _, c := range Codes() {
		if seen[c.Code] {
			t.Errorf("code %s listed twice", c.Code)
		}
		seen[c.Code] = true
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(c.Code) + "` \\| ([EW]) \\| (.+) \\| (.+) \\|$").FindStringSubmatch(doc)
		if row == nil {
			t.Errorf("%s has no row | `code` | E/W | example | fix | in docs/configuration.md", c.Code)
			continue
		}
		if want := map[Severity]string{SeverityError: "E", SeverityWarning: "W"}[c.Severity]; row[1] != want {
			t.Errorf("%s documented as %s, is %s", c.Code, row[1], c.Severity)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z_-]+)` \\|").FindAllStringSubmatch(doc, -1) {
		if !seen[m[1]] && strings.ContainsAny(m[1], "-_") {
			t.Errorf("docs name unknown code %s", m[1])
		}
	}
}

// The schema's permissionMode enum is the tool package's list of modes.
func TestPermissionModesMatchToolPackage(t *testing.T) {
	for _, m := range tool.Modes() {
		def := baseAgent()
		at(def, "runner", "boundaries")["permissionMode"] = m
		dir := writeAgent(t, def, baseRegistry(), nil)
		if r := Check(dir, testOpts); !r.Valid() {
			t.Errorf("mode %s rejected:\n%s", m, dump(r))
		}
	}
}

func TestLoadErrorsAreConfigurationLayer(t *testing.T) {
	_, _, err := Load(t.TempDir())
	if e := agenterr.From(err); e == nil || e.Layer != agenterr.LayerConfiguration || e.Recoverable {
		t.Fatalf("%+v", err)
	}
}
