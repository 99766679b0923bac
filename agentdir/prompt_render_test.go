package agentdir

import (
	"slices"
	"testing"
	"unsafe"
)

// TestRenderSharesAnEqualText: a template rendered again with values that
// give the same text returns the text it rendered before (one copy for
// the agents of one definition, not one each); other values, and
// undefined variables, render as always.
func TestRenderSharesAnEqualText(t *testing.T) {
	segs, _, litLen := splitSegments("Fix {uv-issue} in {uv-repo}.")
	tmpl := &promptTemplate{segs: segs, litLen: litLen}
	vars := map[string]string{"issue": "#12", "repo": "capstan"}
	first, undefined := tmpl.render(vars)
	if first != "Fix #12 in capstan." || undefined != nil {
		t.Fatalf("rendered %q, undefined %v", first, undefined)
	}
	again, _ := tmpl.render(map[string]string{"issue": "#12", "repo": "capstan"})
	if again != first || unsafe.StringData(again) != unsafe.StringData(first) {
		t.Fatalf("the same render made a new copy: %q", again)
	}
	for _, c := range []struct {
		vars      map[string]string
		want      string
		undefined []string
	}{
		{map[string]string{"issue": "#13", "repo": "capstan"}, "Fix #13 in capstan.", nil},
		{map[string]string{"issue": "#1", "repo": "capstan2"}, "Fix #1 in capstan2.", nil}, // same length as the first
		{map[string]string{"issue": "#12"}, "Fix #12 in {uv-repo}.", []string{"repo"}},
		{map[string]string{"issue": "#12", "repo": "capstan"}, "Fix #12 in capstan.", nil},
	} {
		got, undefined := tmpl.render(c.vars)
		if got != c.want || !slices.Equal(undefined, c.undefined) {
			t.Errorf("render(%v) = %q, %v; want %q, %v", c.vars, got, undefined, c.want, c.undefined)
		}
	}
}
