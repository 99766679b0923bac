package skill

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/tool"
)

func TestCatalog(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"a/SKILL.md":      "---\nname: alpha\ndescription: Alpha <things> & more.\n---\nRead [notes](notes.md) and run `scripts/hi.sh`. Also FORMS.md.\n",
		"a/notes.md":      "# Notes\nhello\n",
		"a/scripts/hi.sh": "# Says hi.\necho '{\"hi\":1}'\n",
		"b/SKILL.md":      "---\nname: alpha\ndescription: duplicate\n---\n",
		"c/SKILL.md":      "---\nname: gamma\ndescription: Gamma.\n---\nbody\n",
	})
	c, warns := NewCatalog([]string{"."}, CatalogConfig{BaseDir: dir})
	if len(c.Skills()) != 2 || !hasWarning(warns, "name_collision") {
		t.Fatalf("skills %d warns %v", len(c.Skills()), warns)
	}
	sec := c.SystemPromptSection()
	if !strings.Contains(sec, "<name>alpha</name>") || !strings.Contains(sec, "Alpha &lt;things&gt; &amp; more.") || !strings.Contains(sec, "<name>gamma</name>") {
		t.Errorf("section: %s", sec)
	}
	tools := map[string]tool.Tool{}
	for _, tl := range c.Tools() {
		tools[tl.Spec().Name] = tl
		if !json.Valid(tl.Spec().InputSchema) {
			t.Errorf("%s schema invalid", tl.Spec().Name)
		}
	}
	if tools["run_skill_script"].Kind() != tool.KindExecute || tools["activate_skill"].Kind() != tool.KindRead {
		t.Error("kinds")
	}
	ctx := context.Background()
	r, _ := tools["activate_skill"].Run(ctx, json.RawMessage(`{"name":"alpha"}`))
	if r.IsError || !strings.Contains(r.Content, `<skill_content name="alpha">`) || !strings.Contains(r.Content, "scripts/hi.sh") || !strings.Contains(r.Content, "FORMS.md") {
		t.Errorf("activate: %+v", r)
	}
	r, _ = tools["activate_skill"].Run(ctx, json.RawMessage(`{"name":"alpha"}`))
	if !strings.Contains(r.Content, "already active") {
		t.Errorf("second activation: %+v", r)
	}
	r, _ = tools["read_skill_file"].Run(ctx, json.RawMessage(`{"skill":"alpha","path":"notes.md"}`))
	if r.IsError || !strings.Contains(r.Content, "hello") {
		t.Errorf("read: %+v", r)
	}
	r, _ = tools["read_skill_file"].Run(ctx, json.RawMessage(`{"skill":"alpha","path":"scripts/hi.sh"}`))
	if r.IsError || strings.Contains(r.Content, "echo") || !strings.Contains(r.Content, "Says hi") {
		t.Errorf("script not summarized: %+v", r)
	}
	r, _ = tools["read_skill_file"].Run(ctx, json.RawMessage(`{"skill":"alpha","path":"../c/SKILL.md"}`))
	if !r.IsError || !strings.Contains(r.Content, "PATH_ESCAPE") {
		t.Errorf("escape: %+v", r)
	}
	r, _ = tools["run_skill_script"].Run(ctx, json.RawMessage(`{"skill":"alpha","path":"scripts/hi.sh"}`))
	if !r.IsError || !strings.Contains(r.Content, "SANDBOX_UNAVAILABLE") {
		t.Errorf("no sandbox: %+v", r)
	}
	if sb := testSandbox(); sb != nil {
		c2, _ := NewCatalog([]string{filepath.Join(dir, "a")}, CatalogConfig{Sandbox: sb})
		for _, tl := range c2.Tools() {
			if tl.Spec().Name == "run_skill_script" {
				r, _ = tl.Run(ctx, json.RawMessage(`{"skill":"alpha","path":"scripts/hi.sh"}`))
				if r.IsError || !strings.Contains(r.Content, `"output":{"hi":1}`) {
					t.Errorf("sandboxed run: %+v", r)
				}
			}
		}
	}
	// runner.skills entries name skill folders; nested SKILL.md files inside
	// a skill (templates of generated skills) are not skills.
	writeTree(t, dir, map[string]string{"c/templates/inner/SKILL.md": "---\nname: inner\ndescription: not a skill\n---\n"})
	single, _ := NewCatalog([]string{"c"}, CatalogConfig{BaseDir: dir})
	if len(single.Skills()) != 1 || single.Skills()[0].Name != "gamma" {
		t.Errorf("skill folder entry: %+v", single.Skills())
	}
	empty, _ := NewCatalog(nil, CatalogConfig{})
	if empty.SystemPromptSection() != "" || empty.Tools() != nil {
		t.Error("empty catalog should add nothing")
	}
}

func TestCatalogConcurrentActivation(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a/SKILL.md": "---\nname: a\ndescription: A.\n---\nbody\n"})
	c, _ := NewCatalog([]string{dir}, CatalogConfig{})
	act := c.Tools()[0]
	done := make(chan string, 8)
	for i := 0; i < 8; i++ {
		go func() {
			r, _ := act.Run(context.Background(), json.RawMessage(`{"name":"a"}`))
			done <- r.Content
		}()
	}
	full := 0
	for i := 0; i < 8; i++ {
		if strings.Contains(<-done, "<skill_content") {
			full++
		}
	}
	if full != 1 {
		t.Errorf("body disclosed %d times", full)
	}
}
