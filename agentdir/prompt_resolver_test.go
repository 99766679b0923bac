package agentdir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
)

// write creates dir/rel with content, making parent directories.
func writePrompt(t testing.TB, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCode(t *testing.T, err error, code string) *agenterr.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s error, got nil", code)
	}
	e := agenterr.From(err)
	if e == nil || e.Code != code {
		t.Fatalf("want code %s, got %v", code, err)
	}
	if e.Layer != agenterr.LayerPrompt {
		t.Fatalf("want layer prompt, got %s (%v)", e.Layer, err)
	}
	return e
}

func TestResolveC3LPath(t *testing.T) {
	dir := t.TempDir()
	writePrompt(t, dir, "prompts/steps/initial/issue/f_default.md", "default edition\n")
	writePrompt(t, dir, "prompts/steps/initial/issue/f_detailed.md", "detailed edition\n")
	writePrompt(t, dir, "prompts/steps/initial/issue/f_detailed_short.md", "detailed short\n")
	writePrompt(t, dir, "prompts/other/a/b/f_default.md", "other c1\n")
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	ctx := context.Background()
	for _, tc := range []struct {
		ref  PromptRef
		want string
		path string
	}{
		{PromptRef{C2: "initial", C3: "issue"}, "default edition\n", "prompts/steps/initial/issue/f_default.md"},
		{PromptRef{C2: "initial", C3: "issue", Edition: "detailed"}, "detailed edition\n", "prompts/steps/initial/issue/f_detailed.md"},
		{PromptRef{C2: "initial", C3: "issue", Edition: "detailed", Adaptation: "short"}, "detailed short\n", "prompts/steps/initial/issue/f_detailed_short.md"},
		{PromptRef{C1: "other", C2: "a", C3: "b"}, "other c1\n", "prompts/other/a/b/f_default.md"},
	} {
		res, err := r.Resolve(ctx, tc.ref, nil)
		if err != nil {
			t.Fatalf("%v: %v", tc.ref, err)
		}
		if res.Text != tc.want {
			t.Errorf("%v: text %q, want %q", tc.ref, res.Text, tc.want)
		}
		if res.Path != filepath.Join(dir, filepath.FromSlash(tc.path)) {
			t.Errorf("%v: path %q, want %q", tc.ref, res.Path, tc.path)
		}
		if res.UsedFallback != "" || len(res.Warnings) != 0 {
			t.Errorf("%v: unexpected fallback %q / warnings %v", tc.ref, res.UsedFallback, res.Warnings)
		}
	}
}

func TestConfigDefaultsAndCustomBase(t *testing.T) {
	dir := t.TempDir()
	writePrompt(t, dir, "tpl/cat/x/y/f_default.md", "custom base and c1")
	r := NewPromptResolver(PromptConfig{AgentDir: dir, Base: "tpl", C1: "cat"})
	res, err := r.Resolve(context.Background(), PromptRef{C2: "x", C3: "y"}, nil)
	if err != nil || res.Text != "custom base and c1" {
		t.Fatalf("got %q, %v", res.Text, err)
	}
	// An absolute base inside the agent dir is accepted.
	r = NewPromptResolver(PromptConfig{AgentDir: dir, Base: filepath.Join(dir, "tpl"), C1: "cat"})
	if _, err := r.Resolve(context.Background(), PromptRef{C2: "x", C3: "y"}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestFrontmatterStrippedAndParsed(t *testing.T) {
	dir := t.TempDir()
	writePrompt(t, dir, "prompts/steps/s/t/f_default.md", "---\nstepId: s.t\nuvVariables:\n  - origin\nnested: {a: 1}\n---\nHello {uv-origin}\n")
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	res, err := r.Resolve(context.Background(), PromptRef{C2: "s", C3: "t"}, map[string]string{"origin": "Tokyo"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Hello Tokyo\n" {
		t.Fatalf("text %q", res.Text)
	}
	if res.Frontmatter["stepId"] != "s.t" {
		t.Fatalf("frontmatter %#v", res.Frontmatter)
	}
	if got := stringList(res.Frontmatter["uvVariables"]); !reflect.DeepEqual(got, []string{"origin"}) {
		t.Fatalf("uvVariables %#v", res.Frontmatter["uvVariables"])
	}
	// The returned map is a copy: changing it does not change the next result.
	res.Frontmatter["stepId"] = "changed"
	res2, err := r.Resolve(context.Background(), PromptRef{C2: "s", C3: "t"}, nil)
	if err != nil || res2.Frontmatter["stepId"] != "s.t" {
		t.Fatalf("cached frontmatter was modified through a result: %#v %v", res2.Frontmatter, err)
	}
	if !reflect.DeepEqual(res.Variables, []string{"origin"}) {
		t.Fatalf("variables %v", res.Variables)
	}
}

func TestFrontmatterForms(t *testing.T) {
	for _, tc := range []struct {
		name, in, body string
		fm             map[string]any
	}{
		{"none", "just text\n", "just text\n", nil},
		{"crlf", "---\r\na: b\r\n---\r\nbody\r\n", "body\r\n", map[string]any{"a": "b"}},
		{"empty", "---\n---\nbody", "body", map[string]any{}},
		{"comment only", "---\n# nothing\n---\nbody", "body", map[string]any{}},
		{"bom", "\uFEFF---\na: 1\n---\nbody", "body", map[string]any{"a": uint64(1)}},
		{"rule later", "intro\n---\nnot frontmatter\n---\n", "intro\n---\nnot frontmatter\n---\n", nil},
		{"dash line only", "---", "---", nil},
		{"trailing spaces on delimiters", "--- \na: b\n---\t\nbody", "body", map[string]any{"a": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := parsePromptTemplate([]byte(tc.in), "f.md")
			if err != nil {
				t.Fatal(err)
			}
			if tpl.body != tc.body {
				t.Errorf("body %q, want %q", tpl.body, tc.body)
			}
			if tc.fm == nil {
				if tpl.frontmatter != nil {
					t.Errorf("frontmatter %#v, want nil", tpl.frontmatter)
				}
				return
			}
			if fmt.Sprint(tpl.frontmatter) != fmt.Sprint(tc.fm) {
				t.Errorf("frontmatter %#v, want %#v", tpl.frontmatter, tc.fm)
			}
		})
	}
}

func TestFrontmatterErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in   string
		line, col  int
		msgContain string
	}{
		{"unterminated", "---\na: b\nbody without end\n", 1, 1, "unterminated"},
		{"unterminated only opener", "---\n", 1, 1, "unterminated"},
		{"invalid yaml", "---\na: b\nc: [1, 2\n---\nbody", 0, 0, "invalid YAML"},
		{"bad indentation", "---\na:\n  b: 1\n c: 2\n---\nbody", 0, 0, "invalid YAML"},
		{"not a mapping", "---\n- a\n- b\n---\nbody", 2, 1, "must be a YAML mapping"},
		{"scalar", "---\njust a string\n---\nbody", 2, 1, "must be a YAML mapping"},
		{"empty body", "---\na: b\n---\n  \n\t\n", 0, 0, "empty"},
		{"empty file", "", 0, 0, "empty"},
		{"invalid utf8", "hello \xff\xfe", 0, 0, "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePromptTemplate([]byte(tc.in), "prompts/x.md")
			e := wantCode(t, err, agenterr.CodePromptParse)
			if !strings.Contains(e.Error(), tc.msgContain) {
				t.Errorf("error %q does not mention %q", e, tc.msgContain)
			}
			if e.File != "prompts/x.md" {
				t.Errorf("file %q", e.File)
			}
			if tc.line != 0 && (e.Line != tc.line || e.Column != tc.col) {
				t.Errorf("position %d:%d, want %d:%d", e.Line, e.Column, tc.line, tc.col)
			}
			if e.Hint == "" {
				t.Errorf("no hint in %v", e)
			}
		})
	}
}

func TestFrontmatterYAMLErrorPositionIsInFileCoordinates(t *testing.T) {
	// The bad token is on line 4 of the file (line 3 of the YAML).
	in := "---\nok: 1\nalso: 2\nbad: [unclosed\n---\nbody\n"
	_, err := parsePromptTemplate([]byte(in), "p.md")
	e := wantCode(t, err, agenterr.CodePromptParse)
	if e.Line < 4 {
		t.Fatalf("line %d, want >= 4 (file coordinates): %v", e.Line, e)
	}
	if e.Column == 0 {
		t.Fatalf("no column: %v", e)
	}
}

func TestFrontmatterAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("---\nbody\n")
	_, err := parsePromptTemplate([]byte(b.String()), "bomb.md")
	e := wantCode(t, err, agenterr.CodePromptParse)
	if !strings.Contains(e.Message, "expands") && !strings.Contains(e.Error(), "alias") {
		t.Fatalf("unexpected error %v", e)
	}
}

func TestSubstitution(t *testing.T) {
	dir := t.TempDir()
	writePrompt(t, dir, "prompts/steps/a/b/f_default.md", "Go to {uv-origin} then {uv-dest}. Again {uv-origin}. Missing {uv-ghost} and {uv-ghost}. Malformed {uv- {uv-} {uv-a b} {uv-x {uv-ok_1-2}")
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	res, err := r.Resolve(context.Background(), PromptRef{C2: "a", C3: "b"}, map[string]string{
		"origin": "Tokyo", "dest": "{uv-ghost}", "ok_1-2": "fine", "uv-origin": "prefixed key is not the variable",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "Go to Tokyo then {uv-ghost}. Again Tokyo. Missing {uv-ghost} and {uv-ghost}. Malformed {uv- {uv-} {uv-a b} {uv-x fine"
	if res.Text != want {
		t.Fatalf("text\n got %q\nwant %q", res.Text, want)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "{uv-ghost}") || !strings.Contains(res.Warnings[0], "prompts/steps/a/b/f_default.md") {
		t.Fatalf("warnings %q: want one naming the variable and the file", res.Warnings)
	}
	if !reflect.DeepEqual(res.Variables, []string{"origin", "dest", "ghost", "ok_1-2"}) {
		t.Fatalf("variables %v", res.Variables)
	}
}

func TestSubstituteSinglePass(t *testing.T) {
	out, undefined := SubstituteVariables("{uv-a}{uv-b}", map[string]string{"a": "{uv-b}", "b": "{uv-a}"})
	if out != "{uv-b}{uv-a}" || undefined != nil {
		t.Fatalf("got %q %v", out, undefined)
	}
	out, undefined = SubstituteVariables("no placeholders", map[string]string{"a": "x"})
	if out != "no placeholders" || undefined != nil {
		t.Fatalf("got %q %v", out, undefined)
	}
}

func TestVariables(t *testing.T) {
	got := TemplateVariables("{uv-b} {uv-a} {uv-b} {uv-} {uv-bad name} {uv-c")
	if !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Fatalf("got %v", got)
	}
	if TemplateVariables("nothing") != nil {
		t.Fatal("want nil for no variables")
	}
}

func TestFallbackChainOrder(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	r := NewPromptResolver(PromptConfig{AgentDir: dir, FallbackDir: "fallbacks"})
	ref := PromptRef{C2: "initial", C3: "issue", Fallback: "shared/generic.md"}

	// Nothing exists: every path of the chain is listed, in order.
	_, err := r.Resolve(ctx, ref, nil)
	e := wantCode(t, err, agenterr.CodePromptNotFound)
	wantOrder := []string{"prompts/steps/initial/issue/f_default.md", "prompts/shared/generic.md", "fallbacks/f_default.md"}
	last := -1
	for _, p := range wantOrder[1:] {
		i := strings.Index(e.Message, p)
		if i < 0 || i < last {
			t.Fatalf("message %q does not list the fallbacks %v in order", e.Message, wantOrder[1:])
		}
		last = i
	}
	for _, p := range wantOrder {
		if n := strings.Count(strings.TrimSuffix(e.Error(), "; hint: "+e.Hint), p); n != 1 {
			t.Errorf("%s is named %d times, want once: %s", p, n, e.Error())
		}
	}
	if e.Hint == "" || e.File != wantOrder[0] {
		t.Fatalf("hint %q file %q", e.Hint, e.File)
	}
	if !errors.Is(err, agenterr.ErrPromptNotFound) {
		t.Fatal("errors.Is ErrPromptNotFound")
	}

	// Global fallback only.
	writePrompt(t, dir, "fallbacks/f_default.md", "global")
	res, err := r.Resolve(ctx, ref, nil)
	if err != nil || res.Text != "global" || res.UsedFallback != "fallbacks/f_default.md" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "global fallback") {
		t.Fatalf("warnings %q", res.Warnings)
	}

	// The reference's fallback wins over the global one.
	writePrompt(t, dir, "prompts/shared/generic.md", "ref fallback")
	res, err = r.Resolve(ctx, ref, nil)
	if err != nil || res.Text != "ref fallback" || res.UsedFallback != "prompts/shared/generic.md" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "prompts/steps/initial/issue/f_default.md") {
		t.Fatalf("warnings %q", res.Warnings)
	}

	// The primary wins over both, with no warning.
	writePrompt(t, dir, "prompts/steps/initial/issue/f_default.md", "primary")
	res, err = r.Resolve(ctx, ref, nil)
	if err != nil || res.Text != "primary" || res.UsedFallback != "" || res.Warnings != nil {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestGlobalFallbackUsesPrimaryFileName(t *testing.T) {
	dir := t.TempDir()
	writePrompt(t, dir, "fb/f_failed_git-dirty.md", "adapted fallback")
	r := NewPromptResolver(PromptConfig{AgentDir: dir, FallbackDir: "fb"})
	res, err := r.Resolve(context.Background(), PromptRef{C2: "retry", C3: "issue", Edition: "failed", Adaptation: "git-dirty"}, nil)
	if err != nil || res.Text != "adapted fallback" {
		t.Fatalf("got %+v, %v", res, err)
	}
	// Explicit path refs fall back by base name too.
	writePrompt(t, dir, "fb/check.md", "check fallback")
	res, err = r.Resolve(context.Background(), PromptRef{Path: "checks/check.md"}, nil)
	if err != nil || res.Text != "check fallback" || len(res.Warnings) != 1 {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestFallbackDoesNotHideBrokenPrimary(t *testing.T) {
	dir := t.TempDir()
	writePrompt(t, dir, "prompts/steps/a/b/f_default.md", "---\nunterminated\n")
	writePrompt(t, dir, "prompts/fb.md", "fallback")
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	_, err := r.Resolve(context.Background(), PromptRef{C2: "a", C3: "b", Fallback: "fb.md"}, nil)
	wantCode(t, err, agenterr.CodePromptParse)
}

func TestExplicitPath(t *testing.T) {
	dir := t.TempDir()
	writePrompt(t, dir, "prompts/checks/judge.md", "judge {uv-x}")
	writePrompt(t, dir, "shared/outside-base.md", "inside agent dir, outside base")
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	ctx := context.Background()
	res, err := r.Resolve(ctx, PromptRef{Path: "checks/judge.md"}, map[string]string{"x": "1"})
	if err != nil || res.Text != "judge 1" {
		t.Fatalf("got %+v, %v", res, err)
	}
	res, err = r.Resolve(ctx, PromptRef{Path: "../shared/outside-base.md"}, nil)
	if err != nil || res.Text != "inside agent dir, outside base" {
		t.Fatalf("got %+v, %v", res, err)
	}
	res, err = r.Resolve(ctx, PromptRef{Path: filepath.Join(dir, "prompts/checks/judge.md")}, nil)
	if err != nil || !strings.HasPrefix(res.Text, "judge") {
		t.Fatalf("absolute path inside agent dir: %+v, %v", res, err)
	}
	_, err = r.Resolve(ctx, PromptRef{Path: "checks/judge.md", C2: "a"}, nil)
	wantCode(t, err, agenterr.CodePromptParse)
}

func TestTraversalRejected(t *testing.T) {
	outer := t.TempDir()
	writePrompt(t, outer, "secret.md", "SECRET")
	writePrompt(t, outer, "etc/x/f_default.md", "SECRET")
	dir := filepath.Join(outer, "agent")
	writePrompt(t, dir, "prompts/steps/ok/ok/f_default.md", "ok")
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	ctx := context.Background()
	for _, ref := range []PromptRef{
		{C2: "../../etc", C3: "x"},
		{C2: "..", C3: ".."},
		{C2: "ok", C3: "ok", Edition: "../../../secret"},
		{C2: "ok", C3: "ok", Adaptation: "x/../../y"},
		{C1: "..", C2: "ok", C3: "ok"},
		{C2: "a/b", C3: "c"},
		{C2: `a\b`, C3: "c"},
		{C2: "a\x00", C3: "c"},
		{C2: "a\nb", C3: "c"},
		{C2: ".", C3: "c"},
		{C2: "", C3: "c"},
		{C2: "c", C3: ""},
		{C2: "/etc", C3: "x"},
	} {
		_, err := r.Resolve(ctx, ref, nil)
		e := wantCode(t, err, agenterr.CodePromptParse)
		if !strings.Contains(e.Message, "invalid prompt reference") {
			t.Errorf("%v: %v", ref, e)
		}
		if _, ok := r.Exists(ref); ok {
			t.Errorf("Exists(%v) = true", ref)
		}
	}
	for _, ref := range []PromptRef{
		{Path: "../../secret.md"},
		{Path: filepath.Join(outer, "secret.md")},
		{Path: "/etc/passwd"},
		{C2: "ok", C3: "missing", Fallback: "../../secret.md"},
		{Path: ".."},
		{Path: "../"},
	} {
		_, err := r.Resolve(ctx, ref, nil)
		wantCode(t, err, agenterr.CodePathEscape)
	}
	_, err := r.Resolve(ctx, PromptRef{Path: "x\x00y"}, nil)
	wantCode(t, err, agenterr.CodePromptParse)
}

func TestSymlinkEscapes(t *testing.T) {
	outer := t.TempDir()
	secret := writePrompt(t, outer, "secret.md", "SECRET")
	writePrompt(t, outer, "x/f_default.md", "SECRET")
	dir := filepath.Join(outer, "agent")
	writePrompt(t, dir, "prompts/steps/ok/ok/f_default.md", "ok")
	writePrompt(t, dir, "notprompts/inside.md", "inside agent dir but outside base")
	link := func(target, rel string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	link(secret, "prompts/steps/abs/link/f_default.md")                                // absolute target outside
	link("../../../../../secret.md", "prompts/steps/rel/link/f_default.md")            // relative target outside
	link("../../../../notprompts/inside.md", "prompts/steps/base/escape/f_default.md") // outside base, inside agent
	link(outer, "prompts/steps/dirlink")                                               // directory symlink outside
	link(secret, "prompts/explicit.md")                                                // explicit path to outside
	link("ok/ok/f_default.md", "prompts/steps/inner.md")                               // symlink that stays inside: fine
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	ctx := context.Background()
	for _, ref := range []PromptRef{
		{C2: "abs", C3: "link"},
		{C2: "rel", C3: "link"},
		{C2: "base", C3: "escape"},
		{C2: "dirlink", C3: "x"},
		{Path: "explicit.md"},
		{C2: "none", C3: "none", Fallback: "explicit.md"},
	} {
		res, err := r.Resolve(ctx, ref, nil)
		if err == nil {
			t.Fatalf("%v: read %q through a symlink leading out", ref, res.Text)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("%v: secret leaked into the error", ref)
		}
		if code := agenterr.CodeOf(err); code != agenterr.CodePathEscape && code != agenterr.CodePromptNotFound {
			t.Fatalf("%v: code %s: %v", ref, code, err)
		}
		if _, ok := r.Exists(ref); ok {
			t.Errorf("Exists(%v) = true", ref)
		}
	}
	for _, ref := range []PromptRef{{C2: "abs", C3: "link"}, {C2: "rel", C3: "link"}, {C2: "base", C3: "escape"}, {C2: "dirlink", C3: "x"}, {Path: "explicit.md"}} {
		_, err := r.Resolve(ctx, ref, nil)
		wantCode(t, err, agenterr.CodePathEscape)
	}
	res, err := r.Resolve(ctx, PromptRef{Path: "steps/inner.md"}, nil)
	if err != nil || res.Text != "ok" {
		t.Fatalf("symlink inside: %+v %v", res, err)
	}
}

func TestSymlinkedBaseOutsideAgentDir(t *testing.T) {
	outer := t.TempDir()
	writePrompt(t, outer, "elsewhere/steps/a/b/f_default.md", "SECRET")
	dir := filepath.Join(outer, "agent")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outer, "elsewhere"), filepath.Join(dir, "prompts")); err != nil {
		t.Fatal(err)
	}
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	_, err := r.Resolve(context.Background(), PromptRef{C2: "a", C3: "b"}, nil)
	wantCode(t, err, agenterr.CodePathEscape)
}

func TestCachedEntryRevalidatedAfterSymlinkSwap(t *testing.T) {
	outer := t.TempDir()
	writePrompt(t, outer, "secret.md", "SECRET")
	dir := filepath.Join(outer, "agent")
	writePrompt(t, dir, "prompts/real.md", "real")
	p := filepath.Join(dir, "prompts/steps/a/b/f_default.md")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../real.md", p); err != nil {
		t.Fatal(err)
	}
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	ctx := context.Background()
	res, err := r.Resolve(ctx, PromptRef{C2: "a", C3: "b"}, nil)
	if err != nil || res.Text != "real" {
		t.Fatalf("%+v %v", res, err)
	}
	// Re-point the cached symlink outside: the next resolution must not
	// serve anything from outside, cached or not.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outer, "secret.md"), p); err != nil {
		t.Fatal(err)
	}
	res, err = r.Resolve(ctx, PromptRef{C2: "a", C3: "b"}, nil)
	if err == nil {
		t.Fatalf("read %q after the symlink was re-pointed outside", res.Text)
	}
	wantCode(t, err, agenterr.CodePathEscape)
}

func TestConfigPathsOutsideAgentDir(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for _, cfg := range []PromptConfig{
		{AgentDir: dir, Base: "../elsewhere"},
		{AgentDir: dir, Base: "/"},
		{AgentDir: dir, FallbackDir: "../fb"},
		{AgentDir: dir, SystemPath: "/etc/passwd"},
		{AgentDir: dir, SystemPath: "../../x.md"},
	} {
		r := NewPromptResolver(cfg)
		_, err := r.Resolve(ctx, PromptRef{C2: "a", C3: "b"}, nil)
		wantCode(t, err, agenterr.CodePathEscape)
		_, err = r.ResolveSystem(ctx, nil)
		wantCode(t, err, agenterr.CodePathEscape)
	}
}

func TestCacheSeesEdits(t *testing.T) {
	dir := t.TempDir()
	p := writePrompt(t, dir, "prompts/steps/a/b/f_default.md", "version one {uv-x}")
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		res, err := r.Resolve(ctx, PromptRef{C2: "a", C3: "b"}, map[string]string{"x": "1"})
		if err != nil || res.Text != "version one 1" {
			t.Fatalf("%+v %v", res, err)
		}
	}
	if err := os.WriteFile(p, []byte("version two, longer {uv-x}"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := r.Resolve(ctx, PromptRef{C2: "a", C3: "b"}, map[string]string{"x": "2"})
	if err != nil || res.Text != "version two, longer 2" {
		t.Fatalf("edit not seen: %+v %v", res, err)
	}
	// Replace the file by rename (a new inode), same size.
	tmp := writePrompt(t, dir, "tmp.md", "version 3, longer {uv-x}")
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	res, err = r.Resolve(ctx, PromptRef{C2: "a", C3: "b"}, map[string]string{"x": "3"})
	if err != nil || res.Text != "version 3, longer 3" {
		t.Fatalf("rename not seen: %+v %v", res, err)
	}
	// Deleting the primary makes it not found again.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	_, err = r.Resolve(ctx, PromptRef{C2: "a", C3: "b"}, nil)
	wantCode(t, err, agenterr.CodePromptNotFound)
}

func TestNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "prompts/steps/a/b/f_default.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	_, err := r.Resolve(context.Background(), PromptRef{C2: "a", C3: "b"}, nil)
	wantCode(t, err, agenterr.CodePromptParse)
}

func TestTooLarge(t *testing.T) {
	dir := t.TempDir()
	writePrompt(t, dir, "prompts/steps/a/b/f_default.md", strings.Repeat("x", maxPromptBytes+1))
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	_, err := r.Resolve(context.Background(), PromptRef{C2: "a", C3: "b"}, nil)
	wantCode(t, err, agenterr.CodePromptParse)
}

func TestResolveSystem(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	writePrompt(t, dir, "prompts/system.md", "---\nrole: system\n---\nYou are {uv-agent_name}. {uv-unknown}")
	r := NewPromptResolver(PromptConfig{AgentDir: dir, SystemPath: "prompts/system.md"})
	res, err := r.ResolveSystem(ctx, map[string]string{"agent_name": "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "You are demo. {uv-unknown}" || res.Frontmatter["role"] != "system" || len(res.Warnings) != 1 {
		t.Fatalf("%+v", res)
	}
	_, err = NewPromptResolver(PromptConfig{AgentDir: dir}).ResolveSystem(ctx, nil)
	e := wantCode(t, err, agenterr.CodePromptNotFound)
	if e.Hint == "" {
		t.Fatal("no hint")
	}
	_, err = NewPromptResolver(PromptConfig{AgentDir: dir, SystemPath: "prompts/nope.md"}).ResolveSystem(ctx, nil)
	e = wantCode(t, err, agenterr.CodePromptNotFound)
	if e.File != "prompts/nope.md" {
		t.Fatalf("file %q", e.File)
	}
	// The path is printed once, as the error's location.
	if n := strings.Count(strings.TrimSuffix(e.Error(), "; hint: "+e.Hint), "prompts/nope.md"); n != 1 {
		t.Fatalf("the path is named %d times, want once: %s", n, e.Error())
	}
	writePrompt(t, dir, "prompts/empty.md", "---\na: 1\n---\n\n")
	_, err = NewPromptResolver(PromptConfig{AgentDir: dir, SystemPath: "prompts/empty.md"}).ResolveSystem(ctx, nil)
	wantCode(t, err, agenterr.CodePromptParse)
}

func TestExists(t *testing.T) {
	dir := t.TempDir()
	r := NewPromptResolver(PromptConfig{AgentDir: dir, FallbackDir: "fb"})
	ref := PromptRef{C2: "a", C3: "b", Fallback: "x.md"}
	if p, ok := r.Exists(ref); ok {
		t.Fatalf("exists %q", p)
	}
	fb := writePrompt(t, dir, "fb/f_default.md", "fb")
	if p, ok := r.Exists(ref); !ok || p != fb {
		t.Fatalf("got %q %v, want %q", p, ok, fb)
	}
	x := writePrompt(t, dir, "prompts/x.md", "x")
	if p, ok := r.Exists(ref); !ok || p != x {
		t.Fatalf("got %q %v, want %q", p, ok, x)
	}
	primary := writePrompt(t, dir, "prompts/steps/a/b/f_default.md", "")
	if p, ok := r.Exists(ref); !ok || p != primary {
		t.Fatalf("got %q %v, want %q (Exists does not read content)", p, ok, primary)
	}
}

func TestResolveRetry(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	r := NewPromptResolver(PromptConfig{AgentDir: dir, FallbackDir: "fb"})
	writePrompt(t, dir, "fb/f_failed_test-failed.md", "global fallback is not part of retry lookup")

	rt, err := r.ResolveRetry(ctx, "", "retry", "issue", "failed", "test-failed")
	if err != nil || rt.Found {
		t.Fatalf("%+v %v", rt, err)
	}
	if !reflect.DeepEqual(rt.Tried, []string{"prompts/steps/retry/issue/f_failed_test-failed.md", "prompts/steps/retry/issue/f_failed.md"}) {
		t.Fatalf("tried %v", rt.Tried)
	}

	writePrompt(t, dir, "prompts/steps/retry/issue/f_failed.md", "Generic failure: {{pattern}} {uv-x}")
	rt, err = r.ResolveRetry(ctx, "steps", "retry", "issue", "failed", "test-failed")
	if err != nil || !rt.Found || rt.Text != "Generic failure: {{pattern}} {uv-x}" {
		t.Fatalf("%+v %v", rt, err)
	}
	if len(rt.Warnings) != 1 || !strings.Contains(rt.Warnings[0], "f_failed_test-failed.md") {
		t.Fatalf("warnings %q", rt.Warnings)
	}

	writePrompt(t, dir, "prompts/steps/retry/issue/f_failed_test-failed.md", "---\nparams:\n  - failedTests\n  - errorOutput\n---\n## Tests failed\n{{#each failedTests}}- {{this.name}}\n{{/each}}")
	rt, err = r.ResolveRetry(ctx, "", "retry", "issue", "", "test-failed")
	if err != nil || !rt.Found || rt.Warnings != nil {
		t.Fatalf("%+v %v", rt, err)
	}
	if !strings.HasPrefix(rt.Text, "## Tests failed") || !reflect.DeepEqual(rt.Params, []string{"failedTests", "errorOutput"}) {
		t.Fatalf("%+v", rt)
	}
	if rt.Path != filepath.Join(dir, "prompts/steps/retry/issue/f_failed_test-failed.md") {
		t.Fatalf("path %q", rt.Path)
	}

	_, err = r.ResolveRetry(ctx, "", "retry", "issue", "failed", "../../x")
	wantCode(t, err, agenterr.CodePromptParse)

	writePrompt(t, dir, "prompts/steps/retry/issue/f_failed_bad.md", "---\nparams: [\n---\nbody")
	_, err = r.ResolveRetry(ctx, "", "retry", "issue", "failed", "bad")
	wantCode(t, err, agenterr.CodePromptParse)
}

func TestCanceledContext(t *testing.T) {
	dir := t.TempDir()
	writePrompt(t, dir, "prompts/steps/a/b/f_default.md", "x")
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Resolve(ctx, PromptRef{C2: "a", C3: "b"}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestConcurrentResolve(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 4; i++ {
		writePrompt(t, dir, fmt.Sprintf("prompts/steps/s%d/t/f_default.md", i), fmt.Sprintf("prompt %d {uv-n}", i))
	}
	r := NewPromptResolver(PromptConfig{AgentDir: dir})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				k := (g + i) % 4
				res, err := r.Resolve(context.Background(), PromptRef{C2: fmt.Sprintf("s%d", k), C3: "t"}, map[string]string{"n": "v"})
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf("prompt %d v", k); res.Text != want {
					errs <- fmt.Errorf("got %q want %q", res.Text, want)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
