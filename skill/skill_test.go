package skill

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/agenterr"
	"github.com/capstan-dev/capstan/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}

// writeTree creates files (relative path → content) under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func hasWarning(ws []Warning, code string) bool {
	for _, w := range ws {
		if w.Code == code {
			return true
		}
	}
	return false
}

func TestParseQuirks(t *testing.T) {
	cases := []struct {
		name, in string
		wantErr  bool
		check    func(t *testing.T, fm Frontmatter, body string)
	}{
		{name: "minimal", in: "---\nname: a\ndescription: does a\n---\n# A\n", check: func(t *testing.T, fm Frontmatter, body string) {
			if fm.Name != "a" || fm.Description != "does a" || body != "# A\n" {
				t.Errorf("%+v %q", fm, body)
			}
		}},
		{name: "bom+crlf", in: "\xef\xbb\xbf---\r\nname: a\r\ndescription: d\r\n---\r\nbody\r\n", check: func(t *testing.T, fm Frontmatter, body string) {
			if fm.Name != "a" || body != "body\n" {
				t.Errorf("%+v %q", fm, body)
			}
		}},
		{name: "unquoted colon retried", in: "---\nname: a\ndescription: Use it. TRIGGER when: the user asks\n---\n", check: func(t *testing.T, fm Frontmatter, _ string) {
			if !fm.Quoted || !strings.Contains(fm.Description, "TRIGGER when: the user") {
				t.Errorf("%+v", fm)
			}
		}},
		{name: "escaped quotes", in: "---\nname: pptx\ndescription: \"Make a \\\"deck,\\\" fast\"\n---\n", check: func(t *testing.T, fm Frontmatter, _ string) {
			if fm.Description != `Make a "deck," fast` {
				t.Errorf("%q", fm.Description)
			}
		}},
		{name: "block scalar with dashes inside", in: "---\nname: a\ndescription: |-\n  line one --- not a fence\n  line two\n---\nbody\n", check: func(t *testing.T, fm Frontmatter, body string) {
			if !strings.Contains(fm.Description, "---") || body != "body\n" {
				t.Errorf("%q %q", fm.Description, body)
			}
		}},
		{name: "extra keys kept", in: "---\nname: a\ndescription: d\nmodel: opus\nallowed-tools: Bash(git:*) Read\nmetadata:\n  version: 1\n---\n", check: func(t *testing.T, fm Frontmatter, _ string) {
			if fm.Extra["model"] != "opus" || fm.AllowedTools != "Bash(git:*) Read" || fm.Metadata["version"] != "1" {
				t.Errorf("%+v", fm)
			}
		}},
		{name: "no frontmatter", in: "# Heading\ntext\n", wantErr: true},
		{name: "unclosed", in: "---\nname: a\n", wantErr: true},
		{name: "invalid yaml", in: "---\nname: [a\ndescription: d\n---\n", wantErr: true},
		{name: "empty frontmatter", in: "---\n---\nbody", check: func(t *testing.T, fm Frontmatter, body string) {
			if fm.Description != "" || body != "body" {
				t.Errorf("%+v %q", fm, body)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fm, body, err := Parse([]byte(c.in))
			if c.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, fm, body)
		})
	}
}

func TestParseErrorPosition(t *testing.T) {
	_, _, err := Parse([]byte("---\nname: a\ndescription: [broken\n---\n"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line < 2 {
		t.Fatalf("err %v (%#v)", err, pe)
	}
}

func TestDiscoverCorpusQuirks(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("very long description — ", 50)
	writeTree(t, dir, map[string]string{
		"minimal/SKILL.md":                          "---\nname: minimal\ndescription: The smallest skill.\n---\n# Minimal\n",
		"long-desc/SKILL.md":                        "---\nname: long-desc\ndescription: |-\n  " + long + "\n---\nbody\n",
		"template/SKILL.md":                         "---\nname: template-skill\ndescription: A template.\n---\n",
		"document-skills/pptx/SKILL.md":             "---\nname: pptx\ndescription: Decks.\n---\nSee [editing](editing.md) and run `thumbnail.py`.\nAlso read REFERENCE.md and scripts/missing.py.\n",
		"document-skills/pptx/editing.md":           "# Editing\n",
		"document-skills/pptx/reference.md":         "# Reference\n",
		"document-skills/pptx/scripts/thumbnail.py": "print('x')\n",
		"document-skills/pptx/assets/logo.bin":      "\x00\x01\x02",
		"no-frontmatter/SKILL.md":                   "# Just a heading\n",
		"no-desc/SKILL.md":                          "---\nname: no-desc\n---\nbody\n",
		"bad-yaml/SKILL.md":                         "---\nname: [x\ndescription: y\n---\n",
		"colon/SKILL.md":                            "---\nname: colon\ndescription: Do it. TRIGGER when: asked\n---\n",
		"Bad_Name/SKILL.md":                         "---\nname: Bad_Name\ndescription: d\nunknown-key: 1\n---\n",
		"node_modules/x/SKILL.md":                   "---\nname: x\ndescription: hidden\n---\n",
	})
	skills, warns := Discover(dir)
	ids := map[string]*Skill{}
	for i := range skills {
		ids[skills[i].ID] = &skills[i]
	}
	for _, want := range []string{"minimal", "long-desc", "template", "document-skills/pptx", "colon", "Bad_Name"} {
		if ids[want] == nil {
			t.Errorf("skill %q not loaded", want)
		}
	}
	for _, gone := range []string{"no-frontmatter", "no-desc", "bad-yaml", "node_modules/x"} {
		if ids[gone] != nil {
			t.Errorf("skill %q should be skipped", gone)
		}
	}
	if p := ids["document-skills/pptx"]; p != nil {
		if p.Name != "pptx" {
			t.Errorf("name %q", p.Name)
		}
		got := map[string]Reference{}
		for _, r := range p.References {
			got[r.Text] = r
		}
		if r := got["editing.md"]; !r.Exists || r.How != "exact" {
			t.Errorf("editing.md: %+v", r)
		}
		if r := got["REFERENCE.md"]; !r.Exists || r.Path != "reference.md" || r.How != "case-insensitive" {
			t.Errorf("REFERENCE.md: %+v", r)
		}
		if r := got["thumbnail.py"]; !r.Exists || r.Path != "scripts/thumbnail.py" {
			t.Errorf("thumbnail.py: %+v", r)
		}
		if r := got["scripts/missing.py"]; r.Exists {
			t.Errorf("missing.py: %+v", r)
		}
	}
	for _, code := range []string{WarnDescriptionLong, WarnNameMismatch, WarnReferenceCase, WarnMissingReference,
		WarnSkippedParse, WarnSkippedNoDesc, WarnQuotedRetry, WarnNameFormat, WarnUnknownField} {
		if !hasWarning(warns, code) {
			t.Errorf("no %s warning in %v", code, warns)
		}
	}
	for _, w := range warns {
		if w.Code == WarnSkippedParse && strings.Contains(w.File, "bad-yaml") && w.Line == 0 {
			t.Errorf("unparseable YAML warning without a line: %+v", w)
		}
	}
}

func TestLoadErrorsAreCoded(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"s/SKILL.md": "---\nname: s\n---\n"})
	_, _, err := Load(filepath.Join(dir, "s"), "s")
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodeSkillParse || e.Pointer != "/description" || e.Hint == "" {
		t.Fatalf("%#v", err)
	}
	_, _, err = Load(filepath.Join(dir, "nothing"), "nothing")
	if !errors.Is(err, agenterr.ErrSkillNotFound) {
		t.Fatalf("%v", err)
	}
}

// TestSkillFileLinkedOutsideIsRefused: a SKILL.md that is a symbolic link
// to a file outside the skill folder is not read (its description and
// body would go to the model), as the skill's other files are not: Load
// fails with PATH_ESCAPE naming the file, and the catalog skips the skill.
func TestSkillFileLinkedOutsideIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"outside/SKILL.md":   "---\nname: s\ndescription: SECRET-OUTSIDE\n---\nSECRET BODY\n",
		"skills/in/SKILL.md": "---\nname: in\ndescription: d\n---\nbody\n",
		"skills/in/other.md": "---\nname: in\ndescription: d\n---\nbody\n",
	})
	if err := os.MkdirAll(filepath.Join(dir, "skills", "s"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "outside", "SKILL.md"), filepath.Join(dir, "skills", "s", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	sk, _, err := Load(filepath.Join(dir, "skills", "s"), "s")
	e := agenterr.From(err)
	if e == nil || e.Code != agenterr.CodePathEscape || !strings.HasSuffix(e.File, filepath.Join("s", "SKILL.md")) || e.Hint == "" {
		t.Fatalf("Load of a SKILL.md linked outside: %+v, %#v", sk, err)
	}
	skills, warns := Discover(filepath.Join(dir, "skills"))
	for _, s := range skills {
		if s.ID == "s" || strings.Contains(s.Description, "SECRET") {
			t.Fatalf("the linked skill is in the catalog: %+v", s)
		}
	}
	if !hasWarning(warns, WarnSkippedParse) {
		t.Fatalf("no skip warning: %v", warns)
	}
	// A link that stays inside the folder is a skill file like any other.
	if err := os.Remove(filepath.Join(dir, "skills", "in", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other.md", filepath.Join(dir, "skills", "in", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(filepath.Join(dir, "skills", "in"), "in"); err != nil {
		t.Fatalf("a link inside the folder: %v", err)
	}
}

func TestBodyTooLongWarns(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"big/SKILL.md": "---\nname: big\ndescription: d\n---\n" + strings.Repeat("line\n", 600)})
	_, warns, err := Load(filepath.Join(dir, "big"), "big")
	if err != nil || !hasWarning(warns, WarnBodyLong) {
		t.Fatalf("%v %v", err, warns)
	}
}

func TestReferenceOutsideRootWarns(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"s/SKILL.md": "---\nname: s\ndescription: d\n---\nSee [secret](../../etc/passwd.md).\n"})
	sk, warns, err := Load(filepath.Join(dir, "s"), "s")
	if err != nil || !hasWarning(warns, WarnReferenceEscapes) || len(sk.References) != 0 {
		t.Fatalf("%v %v %+v", err, warns, sk)
	}
}

func FuzzSkillFrontmatter(f *testing.F) {
	for _, s := range []string{
		"---\nname: a\ndescription: d\n---\nbody",
		"\xef\xbb\xbf---\r\nname: a\r\n---\r\n",
		"---\ndescription: x: y\n---\n",
		"---\nname: [\n---\n",
		"---\n---\n",
		"---\nmetadata:\n  a: [1, 2]\nallowed-tools: [Read, Bash]\n---\n",
		"# nothing",
		"---\ndescription: &a x\nname: *a\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fm, body, err := Parse(b)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if len(body) > len(b) {
			t.Fatalf("body longer than input")
		}
		_ = fm
	})
}
