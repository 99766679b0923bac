package prompt

import (
	"fmt"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

// mergeBomb is YAML in which each level merges two copies of the previous
// one: 1.4 KB whose naive decoding takes 2^levels steps.
func mergeBomb(levels int) string {
	var b strings.Builder
	b.WriteString("b0: &b0 {x0: 1}\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "b%d: &b%d {<<: [*b%d, *b%d], x%d: 1}\n", i, i, i-1, i-1, i)
	}
	return b.String()
}

// TestFrontmatterMergeBombIsRefused: prompt frontmatter with 40 levels of
// merge keys is a coded parse error, at once, instead of a hang.
func TestFrontmatterMergeBombIsRefused(t *testing.T) {
	_, err := parseTemplate([]byte("---\n"+mergeBomb(40)+"---\nbody\n"), "prompts/x.md")
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodePromptParse || !strings.Contains(err.Error(), "nodes") {
		t.Fatalf("err = %v", err)
	}
}
