package agentdir

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

func FuzzFrontmatter(f *testing.F) {
	for _, s := range []string{
		"---\na: b\n---\nbody",
		"---\r\na: [1, 2]\r\n---\r\nbody {uv-x}",
		"---\n---\n",
		"---\n",
		"---\n- a\n---\nb",
		"---\na: &x [1]\nb: *x\n---\nbody",
		"---\n\t: :\n---\nbody",
		"no frontmatter",
		"\uFEFF---\nk: v\n---\n",
		"---\nkey: \"unterminated\n---\nbody",
		"--- \n? [a]\n: b\n---\nbody",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tpl, err := parsePromptTemplate(data, "f.md")
		if err != nil {
			e := agenterr.From(err)
			if e == nil || e.Code != agenterr.CodePromptParse || e.File != "f.md" {
				t.Fatalf("error is not a PROMPT_PARSE for the file: %v", err)
			}
			return
		}
		if strings.TrimSpace(tpl.body) == "" {
			t.Fatal("empty body accepted")
		}
		if !strings.HasSuffix(string(data), tpl.body) {
			t.Fatalf("body %q is not the tail of the input", tpl.body)
		}
		if tpl.frontmatter == nil && strings.TrimPrefix(string(data), "\uFEFF") != tpl.body {
			t.Fatalf("no frontmatter but body %q differs from input", tpl.body)
		}
		// Frontmatter can always be journaled as JSON.
		if _, err := json.Marshal(tpl.frontmatter); err != nil {
			t.Fatalf("frontmatter %#v cannot be encoded as JSON: %v", tpl.frontmatter, err)
		}
		// Rendering with no variables reproduces the body exactly.
		if out, _ := tpl.render(nil); out != tpl.body {
			t.Fatalf("render(nil) = %q, want %q", out, tpl.body)
		}
	})
}

func FuzzSubstitute(f *testing.F) {
	f.Add("Hello {uv-name}, {uv-x}{uv-name}", "name", "{uv-x}", "x", "}{uv-")
	f.Add("{uv-{uv-a}}", "a", "x", "x", "y")
	f.Add("{uv-", "", "", "-", "v")
	f.Add("{uv-a_b-1} {uv-a b}", "a_b-1", "", "a", "{")
	f.Fuzz(func(t *testing.T, text, k1, v1, k2, v2 string) {
		if strings.ContainsRune(text, 0) {
			return
		}
		vars := map[string]string{k1: v1, k2: v2}
		out, undefined := SubstituteVariables(text, vars)

		// Undefined names are exactly the used names that have no value.
		var wantUndef []string
		for _, n := range TemplateVariables(text) {
			if _, ok := vars[n]; !ok {
				wantUndef = append(wantUndef, n)
			}
		}
		if strings.Join(undefined, "\x00") != strings.Join(wantUndef, "\x00") {
			t.Fatalf("undefined %q, want %q", undefined, wantUndef)
		}

		// Single pass: substituting opaque sentinels and then replacing
		// the sentinels by the values gives the same text, so values are
		// never scanned for placeholders.
		s1, s2 := "\x00\x01\x00", "\x00\x02\x00"
		sent, _ := SubstituteVariables(text, map[string]string{k1: s1, k2: s2})
		if k1 == k2 {
			s1 = s2 // the map kept the second value
		}
		if k1 == k2 {
			v1 = v2
		}
		via := strings.NewReplacer(s1, v1, s2, v2).Replace(sent)
		if via != out {
			t.Fatalf("not single-pass:\n out %q\n via %q", out, via)
		}

		// No placeholder of a defined variable survives (values that
		// cannot form new placeholders).
		for _, k := range []string{k1, k2} {
			if _, _, ok := scanVar("{uv-" + k + "}"); !ok {
				continue
			}
			if strings.Contains(sent, "{uv-"+k+"}") {
				t.Fatalf("placeholder {uv-%s} left in %q", k, sent)
			}
		}
	})
}

func FuzzResolveRef(f *testing.F) {
	f.Add("steps", "a", "b", "default", "", "")
	f.Add("..", "..", "..", "..", "..", "../x")
	f.Add("", "a/../../b", "c", "", "x\\y", "/etc/passwd")
	dir := f.TempDir()
	writePrompt(f, dir, "prompts/steps/a/b/f_default.md", "inside")
	r := NewPromptResolver(PromptConfig{AgentDir: dir + "/agent"})
	writePrompt(f, dir, "agent/prompts/steps/a/b/f_default.md", "agent prompt")
	f.Fuzz(func(t *testing.T, c1, c2, c3, edition, adaptation, path string) {
		ref := PromptRef{C1: c1, C2: c2, C3: c3, Edition: edition, Adaptation: adaptation, Fallback: path}
		res, err := r.Resolve(context.Background(), ref, nil)
		if err == nil && res.Text != "agent prompt" {
			t.Fatalf("%v resolved to %q (outside the agent dir?)", ref, res.Text)
		}
	})
}
