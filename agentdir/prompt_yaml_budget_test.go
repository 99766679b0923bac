package agentdir

import (
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/internal/yamlsafe"
)

// TestFrontmatterMergeBombIsRefused: prompt frontmatter with 40 levels of
// merge keys is a coded parse error, at once, instead of a hang.
func TestFrontmatterMergeBombIsRefused(t *testing.T) {
	_, err := parsePromptTemplate([]byte("---\n"+yamlsafe.MergeBomb(40)+"---\nbody\n"), "prompts/x.md")
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodePromptParse || !strings.Contains(err.Error(), "nodes") {
		t.Fatalf("err = %v", err)
	}
}
