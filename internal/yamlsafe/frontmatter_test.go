package yamlsafe

import (
	"errors"
	"testing"
)

// TestSplit covers the rules prompt files, retry prompts and SKILL.md
// files need.
func TestSplitFrontmatter(t *testing.T) {
	for _, c := range []struct {
		name, src  string
		present    bool
		yaml, body string
		bodyLine   int
		unclosed   bool
	}{
		{name: "no frontmatter", src: "hello\n---\nx", body: "hello\n---\nx", bodyLine: 1},
		{name: "empty text", src: "", body: "", bodyLine: 1},
		{name: "LF", src: "---\na: 1\n---\nbody\n", present: true, yaml: "a: 1\n", body: "body\n", bodyLine: 4},
		{name: "CRLF", src: "---\r\na: 1\r\n---\r\nbody\r\n", present: true, yaml: "a: 1\r\n", body: "body\r\n", bodyLine: 4},
		{name: "BOM", src: "\ufeff---\na: 1\n---\nbody", present: true, yaml: "a: 1\n", body: "body", bodyLine: 4},
		{name: "BOM without frontmatter", src: "\ufeffbody", body: "body", bodyLine: 1},
		{name: "empty frontmatter", src: "---\n---\nbody", present: true, yaml: "", body: "body", bodyLine: 3},
		{name: "closing fence at the end without newline", src: "---\nname: x\n---", present: true, yaml: "name: x\n", body: "", bodyLine: 4},
		{name: "fences with trailing blanks", src: "--- \t\na: 1\n---  \nbody", present: true, yaml: "a: 1\n", body: "body", bodyLine: 4},
		{name: "missing closing fence", src: "---\na: 1\nbody\n", unclosed: true},
		{name: "missing closing fence, CRLF", src: "---\r\na: 1\r\n", unclosed: true},
		{name: "a lone fence without newline is text", src: "---", body: "---", bodyLine: 1},
		{name: "four dashes is no fence", src: "----\na: 1\n---\nbody", body: "----\na: 1\n---\nbody", bodyLine: 1},
		{name: "indented fence does not close", src: "---\na: |\n  ---\n---\nbody", present: true, yaml: "a: |\n  ---\n", body: "body", bodyLine: 5},
		{name: "body keeps a later fence", src: "---\na: 1\n---\nx\n---\ny", present: true, yaml: "a: 1\n", body: "x\n---\ny", bodyLine: 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := SplitFrontmatter(c.src)
			if c.unclosed {
				if !errors.Is(err, ErrUnclosedFrontmatter) {
					t.Fatalf("err = %v, want ErrUnclosedFrontmatter", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Present != c.present || b.YAML != c.yaml || b.Body != c.body || b.BodyLine != c.bodyLine {
				t.Fatalf("got %+v, want present=%v yaml=%q body=%q bodyLine=%d", b, c.present, c.yaml, c.body, c.bodyLine)
			}
		})
	}
}

// FuzzSplit: Split never panics, and a split text is its parts.
func FuzzSplitFrontmatter(f *testing.F) {
	for _, s := range []string{"---\na: 1\n---\nbody", "\ufeff---\r\n---\r\n", "---", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		b, err := SplitFrontmatter(src)
		if err != nil {
			return
		}
		if !b.Present && b.YAML != "" {
			t.Fatalf("YAML without frontmatter: %+v", b)
		}
		if len(b.Body) > len(src) || len(b.YAML) > len(src) {
			t.Fatalf("parts longer than the text: %+v", b)
		}
	})
}
